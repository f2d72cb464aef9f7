package podman

import (
	"context"
	"testing"
	"time"

	"github.com/roboco/sandboxer/conformance"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// TestConformance runs the shared suite against the service of the
// environment (CONTAINER_HOST, else the default sockets): the subtests are
// TestConformance/podman/<Semantic>.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the Podman service (-short runs unit tests only)")
	}
	fx := conformance.FixturesFromEnv(t, Name)

	// A runtime of its own for what the port does not offer: the volume
	// list and the service's storage root.
	testenv.Load()
	probe, err := New()
	if err != nil {
		testenv.Unavailable(t, Name, "%v", err)
	}
	t.Cleanup(func() { _ = probe.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	root, err := probe.graphRoot(ctx)
	if err != nil {
		testenv.Unavailable(t, Name, "%v", err)
	}

	conformance.Run(t, conformance.Config{
		Runtime:  Name,
		Fixtures: fx,
		New: func(t testing.TB) runtime.ContainerRuntime {
			r, err := New()
			if err != nil {
				testenv.Unavailable(t, Name, "%v", err)
			}
			t.Cleanup(func() { _ = r.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := r.Version(ctx); err != nil {
				testenv.Unavailable(t, Name, "%v", err)
			}
			return r
		},
		Volumes: func(ctx context.Context) ([]string, error) {
			var vols []struct {
				Name string `json:"Name"`
			}
			if err := apiGet(t, ctx, probe, "/volumes/json", &vols); err != nil {
				return nil, err
			}
			names := make([]string, 0, len(vols))
			for _, v := range vols {
				names = append(names, v.Name)
			}
			return names, nil
		},
		Images: func(ctx context.Context) ([]string, error) {
			return testkit.CLILines(ctx, "podman", "--url", probe.Endpoint(), "images", "--format", "{{.Repository}}:{{.Tag}}")
		},
		HostDataDirs: []string{root},
	})
}
