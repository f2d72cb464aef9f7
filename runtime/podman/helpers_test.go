package podman

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/runtime"
)

// newTestRuntime connects to the service of the environment
// (CONTAINER_HOST, else the default sockets); a service that does not
// answer skips the test, or fails it under SANDBOXER_REQUIRE=podman. -short
// (unit tests only) skips it.
func newTestRuntime(t *testing.T, opts ...Option) *Runtime {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the Podman service (-short runs unit tests only)")
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

// apiGet decodes GET path of the libpod API into out, for what the port
// does not offer (volumes, the stored spec).
func apiGet(t testing.TB, ctx context.Context, r *Runtime, path string, out any, pathValues ...string) error {
	t.Helper()
	c, err := r.connect(ctx, runtime.OpInspect, path)
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodGet, path: path, pathValues: pathValues}, out)
}
