package docker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/internal/testenv"
)

// newTestRuntime connects to the daemon of the environment (DOCKER_HOST,
// else the default socket); a daemon that does not answer skips the test,
// or fails it under SANDBOXER_REQUIRE=docker. -short (unit tests only)
// skips it.
func newTestRuntime(t *testing.T, opts ...Option) *Runtime {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the Docker daemon (-short runs unit tests only)")
	}
	testenv.Load()
	r, err := New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	if _, err := r.Version(adaptertest.Ctx(t)); err != nil {
		testenv.Unavailable(t, Name, "%v", err)
	}
	return r
}
