package integration

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/containerd"
	"github.com/roboco/sandboxer/runtime/docker"
	"github.com/roboco/sandboxer/runtime/podman"
)

// backend is one runtime the lifecycle tests run against.
type backend struct {
	name string
	rt   runtime.ContainerRuntime
	// danglingVolumes lists the volumes no container uses (nil when the
	// backend has no notion of volumes outside containers).
	danglingVolumes func(ctx context.Context) ([]string, error)
}

// runtimeCandidate connects to one runtime. It ends the (sub)test through
// testenv.Unavailable when the runtime does not answer.
type runtimeCandidate struct {
	name    string
	connect func(t *testing.T) backend
}

// runtimeCandidates are the runtimes the integration tests cover.
var runtimeCandidates = []runtimeCandidate{
	{name: "docker", connect: connectDocker},
	{name: "podman", connect: connectPodman},
	{name: "containerd", connect: connectContainerd},
}

// forEachRuntime runs fn as a subtest per runtime candidate, named after
// the runtime. A runtime that does not answer skips its subtest, or fails
// it when SANDBOXER_REQUIRE names it.
func forEachRuntime(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	testenv.Load()
	for _, c := range runtimeCandidates {
		t.Run(c.name, func(t *testing.T) {
			fn(t, c.connect(t))
		})
	}
}

func connectDocker(t *testing.T) backend {
	t.Helper()
	rt, err := docker.New()
	if err != nil {
		testenv.Unavailable(t, "docker", "%v", err)
	}
	t.Cleanup(func() { rt.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := rt.Version(ctx); err != nil {
		testenv.Unavailable(t, "docker", "%v", err)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return backend{
		name: "docker",
		rt:   rt,
		danglingVolumes: func(ctx context.Context) ([]string, error) {
			resp, err := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("dangling", "true"))})
			if err != nil {
				return nil, err
			}
			names := make([]string, 0, len(resp.Volumes))
			for _, v := range resp.Volumes {
				names = append(names, v.Name)
			}
			return names, nil
		},
	}
}

// connectPort pings rt and registers its Close; a runtime that does not
// answer ends the test through testenv.Unavailable.
func connectPort(t *testing.T, name string, rt runtime.ContainerRuntime, err error) runtime.ContainerRuntime {
	t.Helper()
	if err != nil {
		testenv.Unavailable(t, name, "%v", err)
	}
	t.Cleanup(func() { rt.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := rt.Version(ctx); err != nil {
		testenv.Unavailable(t, name, "%v", err)
	}
	return rt
}

// connectPodman connects to the libpod service of CONTAINER_HOST (or the
// default sockets). Its volume check is left out: the per-test volume
// assertions are made on Docker, and the conformance suite proves that
// Remove deletes anonymous volumes on every backend.
func connectPodman(t *testing.T) backend {
	t.Helper()
	rt, err := podman.New()
	return backend{name: "podman", rt: connectPort(t, "podman", rt, err)}
}

// connectContainerd connects to CONTAINERD_ADDRESS in CONTAINERD_NAMESPACE.
func connectContainerd(t *testing.T) backend {
	t.Helper()
	rt, err := containerd.New()
	return backend{name: "containerd", rt: connectPort(t, "containerd", rt, err)}
}

// ensureImage pulls ref into rt when it is absent: Run never pulls, and a
// fresh machine has only what some test pulled before.
func ensureImage(t testing.TB, rt runtime.ContainerRuntime, ref string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ok, err := rt.ImageExists(ctx, ref)
	require.NoError(t, err)
	if !ok {
		require.NoError(t, rt.PullImage(ctx, ref, nil))
	}
	return ref
}
