package docker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/roboco/sandboxer/conformance"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/docker"
)

// TestConformance runs the shared suite against the daemon of the
// environment (DOCKER_HOST, else the default socket): the subtests are
// TestConformance/docker/<Semantic>.
func TestConformance(t *testing.T) {
	testkit.RequireRuntime(t)
	fx := conformance.FixturesFromEnv(t, docker.Name)

	// A plain client for what the port does not offer: the volume list
	// and the daemon's data root.
	testenv.Load()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		testenv.Unavailable(t, docker.Name, "client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	info, err := cli.Info(ctx)
	if err != nil {
		testenv.Unavailable(t, docker.Name, "docker info: %v", err)
	}

	r0, err := docker.New()
	if err != nil {
		testenv.Unavailable(t, docker.Name, "%v", err)
	}
	t.Cleanup(func() { _ = r0.Close() })

	conformance.Run(t, conformance.Config{
		Runtime:  docker.Name,
		Fixtures: fx,
		New: func(t testing.TB) runtime.ContainerRuntime {
			r, err := docker.New()
			if err != nil {
				testenv.Unavailable(t, docker.Name, "%v", err)
			}
			t.Cleanup(func() { _ = r.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := r.Version(ctx); err != nil {
				testenv.Unavailable(t, docker.Name, "%v", err)
			}
			return r
		},
		Volumes: func(ctx context.Context) ([]string, error) {
			res, err := cli.VolumeList(ctx, volume.ListOptions{})
			if err != nil {
				return nil, err
			}
			names := make([]string, 0, len(res.Volumes))
			for _, v := range res.Volumes {
				names = append(names, v.Name)
			}
			return names, nil
		},
		Images: func(ctx context.Context) ([]string, error) {
			return testkit.CLILines(ctx, "docker", "-H", r0.Endpoint(), "image", "ls", "--format", "{{.Repository}}:{{.Tag}}")
		},
		ContainerIDs: func(ctx context.Context) ([]string, error) {
			return testkit.CLILines(ctx, "docker", "-H", r0.Endpoint(), "ps", "-aq", "--no-trunc")
		},
		HostDataDirs: []string{info.DockerRootDir},
		// Docker's own inspect, not the adapter's.
		StoredMounts: func(ctx context.Context, id string) ([]runtime.Mount, error) {
			c, err := cli.ContainerInspect(ctx, id)
			if err != nil {
				return nil, err
			}
			var out []runtime.Mount
			for _, m := range c.Mounts {
				out = append(out, runtime.Mount{Type: string(m.Type), Source: m.Source, Destination: m.Destination})
			}
			for dst := range c.HostConfig.Tmpfs {
				out = append(out, runtime.Mount{Type: "tmpfs", Source: "tmpfs", Destination: dst})
			}
			for _, m := range c.HostConfig.Mounts {
				out = append(out, runtime.Mount{Type: string(m.Type), Source: m.Source, Destination: m.Target})
			}
			for _, b := range c.HostConfig.Binds {
				src, dst, _ := strings.Cut(b, ":")
				out = append(out, runtime.Mount{Type: "bind", Source: src, Destination: dst})
			}
			return out, nil
		},
	})
}
