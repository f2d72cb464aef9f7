// Package testruntimes is what the cross-runtime test suites (integration/,
// faults/, the CLI's tests) share about the real runtimes they cover: which
// runtimes (detect.Runtimes: Docker, Podman, containerd, and Podman
// rootless as an unprivileged user runs it), connected as the CLI connects
// to them (runtime/detect), a helper that runs a subtest per
// runtime, a test's world of sandboxes on one runtime (World), a runtime
// that records what the provisioner asked of it (Recorder), and a first
// login to a sandbox with its engine's real client (Login).
//
// It is internal/testkit's vocabulary applied to concrete runtimes, and a
// package of its own only because it imports the adapters (through
// runtime/detect): the adapters' own tests import testkit, and could not
// import a package that imports their adapter.
//
// A runtime that does not answer ends its (sub)test through
// testenv.Unavailable: it skips, or fails when SANDBOXER_REQUIRE names it.
// Under -short every entry point skips at once (testkit.RequireRuntime).
package testruntimes

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
	// The tests cover every runtime the CLI links.
	_ "github.com/roboco/sandboxer/engines/all"
	_ "github.com/roboco/sandboxer/runtime/all"
	"github.com/roboco/sandboxer/runtime/containerd"
	"github.com/roboco/sandboxer/runtime/detect"
	"github.com/roboco/sandboxer/runtime/docker"
	"github.com/roboco/sandboxer/runtime/podman"
)

// pingTimeout bounds connecting to one runtime: generous, because the
// daemons are shared with other packages' tests running at the same time.
const pingTimeout = 15 * time.Second

// Names are the runtimes the tests cover, in this order: the CLI's
// (detect.Runtimes), then testenv.PodmanRootless, the podman adapter on an
// unprivileged user's rootless service.
var Names = append(slices.Clone(detect.Runtimes), testenv.PodmanRootless)

// Runtime is one connected runtime a test runs against.
type Runtime struct {
	// Name is the runtime's name (one of Names), as testenv and the CLI's
	// --runtime know it.
	Name string
	// RT is the adapter, pinged, and closed when the test ends.
	RT runtime.ContainerRuntime
	// Docker is a Docker API client on the same daemon, for what the port
	// does not report; nil on every runtime but Docker.
	Docker *client.Client
	// CLIFlags are the CLI's global flags that make it talk to this
	// runtime as RT does ("--runtime docker"; on the rootless row the
	// podman runtime at the user's socket, with --unenforced-limits).
	CLIFlags []string
	// Detect is what runtime detection was given to reach RT, for code
	// under test that detects on its own (sandboxtest.Options.Detect): on
	// the rootless row the podman runtime at the user's socket with the
	// limits opt-out. Its Logger is unset.
	Detect detect.Options
	// DanglingVolumes lists the volumes no container uses; nil when the
	// runtime has no notion of volumes outside containers that tests check
	// (only Docker sets it: the conformance suite proves that Remove
	// deletes anonymous volumes on every backend).
	DanglingVolumes func(ctx context.Context) ([]string, error)
	// Images lists the image refs ("repo:tag") as the runtime's own CLI
	// shows them: docker image ls, podman images, ctr images ls.
	Images func(ctx context.Context) ([]string, error)
}

// Option adjusts how a runtime is connected.
type Option func(*options)

type options struct {
	logger *slog.Logger
}

// WithLogger hands logger to the adapter.
func WithLogger(logger *slog.Logger) Option {
	return func(o *options) { o.logger = logger }
}

// ForEach runs fn as a subtest per runtime of Names, named after the
// runtime. A runtime that does not answer skips its subtest, or fails it
// when SANDBOXER_REQUIRE names it; under -short the test skips at once.
func ForEach(t *testing.T, fn func(t *testing.T, r Runtime), opts ...Option) {
	t.Helper()
	testkit.RequireRuntime(t)
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			fn(t, Connect(t, name, opts...))
		})
	}
}

// Connect connects to the runtime called name where the CLI's `--runtime
// name` would (detect.Detect: DOCKER_HOST, CONTAINER_HOST,
// CONTAINERD_ADDRESS and CONTAINERD_NAMESPACE from the environment and
// build/images.env, else the runtime's well-known sockets), and closes it
// when the test ends. testenv.PodmanRootless is the podman adapter at
// testenv.EnvPodmanRootlessHost, with the limits opt-out (CLIFlags). A runtime that does not answer ends the test through
// testenv.Unavailable; under -short the test skips at once.
func Connect(t testing.TB, name string, opts ...Option) Runtime {
	t.Helper()
	testkit.RequireRuntime(t)
	testenv.Load()
	var o options
	for _, set := range opts {
		set(&o)
	}
	ctx := testkit.Context(t, 2*pingTimeout)
	dopts := detect.Options{Runtime: name, PingTimeout: pingTimeout, Logger: o.logger}
	flags := []string{"--runtime", name}
	if name == testenv.PodmanRootless {
		// Rootless Podman on cgroup v1 cannot enforce the provisioner's
		// default memory and CPU limits: the tests of this row opt out,
		// as a user there must (the conformance suite, which connects on
		// its own, asserts the refusal without it).
		dopts.Runtime, dopts.ContainerHost, dopts.UnenforcedLimits = podman.Name, testenv.PodmanRootlessHost(t), true
		flags = []string{"--runtime", podman.Name, "--container-host", dopts.ContainerHost, "--unenforced-limits"}
	}
	sel, err := detect.Detect(ctx, dopts)
	if err != nil {
		testenv.Unavailable(t, name, "%v", err)
	}
	t.Cleanup(func() { sel.Runtime.Close() })
	r := Runtime{Name: name, RT: sel.Runtime, CLIFlags: flags, Detect: dopts, Images: cliImages(name, sel.Runtime)}
	r.Detect.Logger = nil
	if name == docker.Name {
		r.Docker, r.DanglingVolumes = dockerClient(t, sel.Chosen.Endpoint)
	}
	return r
}

// dockerClient is a Docker API client on the daemon at host, and the
// lister of its dangling volumes.
func dockerClient(t testing.TB, host string) (*client.Client, func(context.Context) ([]string, error)) {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithHost(host), client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli, func(ctx context.Context) ([]string, error) {
		resp, err := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("dangling", "true"))})
		if err != nil {
			return nil, err
		}
		names := make([]string, 0, len(resp.Volumes))
		for _, v := range resp.Volumes {
			names = append(names, v.Name)
		}
		return names, nil
	}
}

// cliImages lists rt's images with the runtime's own CLI.
func cliImages(name string, rt runtime.ContainerRuntime) func(ctx context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		argv, err := ownArgv(rt)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if rt.Name() == containerd.Name {
			return testkit.CLILines(ctx, append(argv, "images", "ls", "-q")...)
		}
		return testkit.CLILines(ctx, append(argv, "images", "--format", "{{.Repository}}:{{.Tag}}")...)
	}
}
