package podman

import (
	"context"
	"net/http"
	"testing"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/runtime"
)

// newTestRuntime connects to the service of the environment
// (CONTAINER_HOST, else the default sockets); a service that does not
// answer skips the test, or fails it under SANDBOXER_REQUIRE=podman. -short
// (unit tests only) skips it.
func newTestRuntime(t *testing.T, opts ...Option) *Runtime {
	t.Helper()
	return adaptertest.Connect(t, func() (*Runtime, error) { return New(opts...) })
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
