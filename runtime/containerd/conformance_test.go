package containerd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/conformance"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// TestConformance runs the one suite against the daemon at
// CONTAINERD_ADDRESS (from build/images.env after `make env`).
func TestConformance(t *testing.T) {
	testkit.RequireRuntime(t)
	fixtures := conformance.FixturesFromEnv(t, Name)
	probe := newTestRuntime(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	root, err := probe.snapshotterRoot(ctx)
	require.NoError(t, err, "the snapshotter's root, where container filesystems live")

	conformance.Run(t, conformance.Config{
		Runtime:  Name,
		Fixtures: fixtures,
		New: func(t testing.TB) runtime.ContainerRuntime {
			return newTestRuntime(t)
		},
		// containerd has no volumes: the adapter makes anonymous volumes
		// snapshots of their own, which Remove deletes.
		Volumes: probe.Volumes,
		Images: func(ctx context.Context) ([]string, error) {
			return testkit.CLILines(ctx, "ctr", "-a", probe.Endpoint(), "-n", probe.Namespace(), "images", "ls", "-q")
		},
		ContainerIDs: func(ctx context.Context) ([]string, error) {
			return testkit.CLILines(ctx, "ctr", "-a", probe.Endpoint(), "-n", probe.Namespace(), "containers", "ls", "-q")
		},
		HostDataDirs: []string{root},
		// The OCI spec containerd stored, not the adapter's record.
		StoredMounts: func(ctx context.Context, id string) ([]runtime.Mount, error) {
			ctx = probe.ctx(ctx)
			c, err := probe.client.LoadContainer(ctx, id)
			if err != nil {
				return nil, err
			}
			spec, err := c.Spec(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]runtime.Mount, 0, len(spec.Mounts))
			for _, m := range spec.Mounts {
				out = append(out, runtime.Mount{Type: m.Type, Source: m.Source, Destination: m.Destination})
			}
			return out, nil
		},
	})
}

// newTestRuntime connects to the test daemon (with opts), or ends the test
// through testenv.Unavailable when it does not answer. -short (unit tests
// only) skips it.
func newTestRuntime(t testing.TB, opts ...Option) *Runtime {
	t.Helper()
	testkit.RequireRuntime(t) // -short touches no runtime; otherwise a missing daemon fails below
	testenv.Load()
	r, err := New(opts...)
	if err != nil {
		testenv.Unavailable(t, Name, "%v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.Version(ctx); err != nil {
		if errors.Is(err, runtime.ErrUnavailable) {
			testenv.Unavailable(t, Name, "%v (run `make env`, which starts a private containerd and sets CONTAINERD_ADDRESS)", err)
		}
		t.Fatalf("version: %v", err)
	}
	return r
}

// snapshotterRoot asks the daemon where its snapshotter keeps container
// filesystems.
func (r *Runtime) snapshotterRoot(ctx context.Context) (string, error) {
	resp, err := r.client.IntrospectionService().Plugins(r.ctx(ctx), fmt.Sprintf("type==io.containerd.snapshotter.v1,id==%s", r.snapshotter))
	if err != nil {
		return "", err
	}
	for _, p := range resp.GetPlugins() {
		if root := p.GetExports()["root"]; root != "" {
			return root, nil
		}
	}
	return "", fmt.Errorf("snapshotter %s exports no root", r.snapshotter)
}
