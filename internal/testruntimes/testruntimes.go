// Package testruntimes is what the cross-runtime test suites (integration/
// and faults/) share about the runtimes they cover: the list of runtimes
// (Docker, Podman, containerd) and how to connect to each, a helper that
// runs a subtest per runtime, and small helpers on a connected runtime
// (pull an image when absent, remove a test's labelled containers, poll a
// condition).
//
// A runtime that does not answer ends its (sub)test through
// testenv.Unavailable: it skips, or fails when SANDBOXER_REQUIRE names it.
package testruntimes

import (
	"context"
	"fmt"
	"log/slog"
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

// Runtime is one connected runtime a test runs against.
type Runtime struct {
	// Name is the runtime's name (docker.Name, podman.Name or
	// containerd.Name), as testenv and the CLI know it.
	Name string
	// RT is the adapter, pinged and closed when the test ends.
	RT runtime.ContainerRuntime
	// Docker is a Docker API client on the same daemon, for what the port
	// does not report; nil on every runtime but Docker.
	Docker *client.Client
	// DanglingVolumes lists the volumes no container uses; nil when the
	// runtime has no notion of volumes outside containers that tests check
	// (only Docker sets it: the conformance suite proves that Remove
	// deletes anonymous volumes on every backend).
	DanglingVolumes func(ctx context.Context) ([]string, error)
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

// Candidate is one runtime the tests cover.
type Candidate struct {
	// Name is the runtime's name.
	Name string
	// Connect connects to the runtime; it ends the test through
	// testenv.Unavailable when the runtime does not answer.
	Connect func(t testing.TB, opts ...Option) Runtime
}

// Candidates are the runtimes the tests cover, in this order.
var Candidates = []Candidate{
	{Name: docker.Name, Connect: ConnectDocker},
	{Name: podman.Name, Connect: ConnectPodman},
	{Name: containerd.Name, Connect: ConnectContainerd},
}

// ForEach runs fn as a subtest per candidate, named after the runtime. A
// runtime that does not answer skips its subtest, or fails it when
// SANDBOXER_REQUIRE names it.
func ForEach(t *testing.T, fn func(t *testing.T, r Runtime), opts ...Option) {
	t.Helper()
	testenv.Load()
	for _, c := range Candidates {
		t.Run(c.Name, func(t *testing.T) {
			fn(t, c.Connect(t, opts...))
		})
	}
}

func collect(opts []Option) options {
	var o options
	for _, set := range opts {
		set(&o)
	}
	return o
}

// ConnectDocker connects to the Docker daemon of DOCKER_HOST (or the
// default socket), with a Docker API client on the same daemon.
func ConnectDocker(t testing.TB, opts ...Option) Runtime {
	t.Helper()
	testenv.Load()
	var dopts []docker.Option
	if o := collect(opts); o.logger != nil {
		dopts = append(dopts, docker.WithLogger(o.logger))
	}
	rt, err := docker.New(dopts...)
	port := ping(t, docker.Name, rt, err)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return Runtime{
		Name:   docker.Name,
		RT:     port,
		Docker: cli,
		DanglingVolumes: func(ctx context.Context) ([]string, error) {
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

// ConnectPodman connects to the libpod service of CONTAINER_HOST (or the
// default sockets).
func ConnectPodman(t testing.TB, opts ...Option) Runtime {
	t.Helper()
	testenv.Load()
	var popts []podman.Option
	if o := collect(opts); o.logger != nil {
		popts = append(popts, podman.WithLogger(o.logger))
	}
	rt, err := podman.New(popts...)
	return Runtime{Name: podman.Name, RT: ping(t, podman.Name, rt, err)}
}

// ConnectContainerd connects to CONTAINERD_ADDRESS in CONTAINERD_NAMESPACE.
func ConnectContainerd(t testing.TB, opts ...Option) Runtime {
	t.Helper()
	testenv.Load()
	var copts []containerd.Option
	if o := collect(opts); o.logger != nil {
		copts = append(copts, containerd.WithLogger(o.logger))
	}
	rt, err := containerd.New(copts...)
	return Runtime{Name: containerd.Name, RT: ping(t, containerd.Name, rt, err)}
}

// ping registers rt's Close and asks its version; a runtime that could not
// be made (err) or does not answer ends the test through
// testenv.Unavailable.
func ping(t testing.TB, name string, rt runtime.ContainerRuntime, err error) runtime.ContainerRuntime {
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

// EnsureImage pulls ref into rt when it is absent (Run never pulls, and a
// fresh machine has only what some test pulled before) and returns ref.
func EnsureImage(t testing.TB, rt runtime.ContainerRuntime, ref string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ok, err := rt.ImageExists(ctx, ref)
	require.NoError(t, err)
	if !ok {
		require.NoError(t, rt.PullImage(ctx, ref, nil), "pull %s", ref)
	}
	return ref
}

// RemoveLabelled removes every container, in any state, that matches one
// of the label selectors; failures are logged, not fatal (it is meant for
// cleanups).
func RemoveLabelled(t testing.TB, rt runtime.ContainerRuntime, selectors ...map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, sel := range selectors {
		cs, err := rt.List(ctx, sel)
		if err != nil {
			t.Logf("cleanup: %v", err)
			continue
		}
		for _, c := range cs {
			if err := rt.Remove(ctx, c.ID); err != nil {
				t.Logf("cleanup: %v", err)
			}
		}
	}
}

// Poll calls cond every interval, on the test's goroutine (so that cond
// may use require), until it returns true; it fails the test when timeout
// passes first. msgAndArgs describe the failure.
func Poll(t testing.TB, cond func() bool, timeout, interval time.Duration, msgAndArgs ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			require.Fail(t, fmt.Sprintf("condition not met within %s", timeout), msgAndArgs...)
		}
		<-tick.C
	}
}
