package docker

import (
	"testing"

	"github.com/roboco/sandboxer/internal/adaptertest"
)

// newTestRuntime connects to the daemon of the environment (DOCKER_HOST,
// else the default socket); a daemon that does not answer skips the test,
// or fails it under SANDBOXER_REQUIRE=docker. -short (unit tests only)
// skips it.
func newTestRuntime(t *testing.T, opts ...Option) *Runtime {
	t.Helper()
	return adaptertest.Connect(t, func() (*Runtime, error) { return New(opts...) })
}
