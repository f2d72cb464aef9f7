package docker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
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

// testNetwork creates a labelled network removed at cleanup.
func testNetwork(t *testing.T, r *Runtime, labels map[string]string) string {
	t.Helper()
	return testNetworkOf(t, r, runtime.NetworkSpec{Labels: labels}).Name
}

// testNetworkOf creates a network of spec (named here) removed at
// cleanup, after the containers that carry spec.Labels.
func testNetworkOf(t *testing.T, r *Runtime, spec runtime.NetworkSpec) runtime.Network {
	t.Helper()
	name := "sandboxer-test-net-" + testkit.RandomHex(4)
	labels := spec.Labels
	spec.Name = name
	n, err := r.CreateNetwork(adaptertest.Ctx(t), spec)
	require.NoError(t, err)
	// Registered after adaptertest.Labels' cleanup, so it runs before it: remove
	// the containers first, or the network is still in use.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if cs, err := r.List(ctx, labels); err == nil {
			for _, c := range cs {
				_ = r.Remove(ctx, c.ID)
			}
		}
		if err := r.RemoveNetwork(ctx, name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return n
}
