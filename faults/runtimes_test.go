package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/containerd"
	"github.com/roboco/sandboxer/runtime/docker"
	"github.com/roboco/sandboxer/runtime/podman"
)

// trio is every engine, in registry order.
var trio = []string{"postgres", "redis", "mongo"}

// backend is one runtime the fault tests run against.
type backend struct {
	name string
	rt   runtime.ContainerRuntime
	// hardening, when set, reads what the port does not report about a
	// container's isolation straight from the backend's own API.
	hardening func(ctx context.Context, id string) (hardening, error)
}

// hardening is what a container was granted, as the backend's own API
// reports it.
type hardening struct {
	Privileged  bool
	Binds       []string
	CapAdd      []string
	Devices     int
	NetworkMode string
	PidMode     string
	IpcMode     string
	SecurityOpt []string
	// MaskedPaths are the /proc paths hidden from the container (empty
	// when it runs privileged or unconfined).
	MaskedPaths []string
}

// runtimeCandidate connects to one runtime; it ends the (sub)test through
// testenv.Unavailable when the runtime does not answer.
type runtimeCandidate struct {
	name    string
	connect func(t *testing.T, logger *slog.Logger) backend
}

// runtimeCandidates are the runtimes the fault tests cover: the same list
// as integration/runtimes_test.go.
var runtimeCandidates = []runtimeCandidate{
	{name: docker.Name, connect: connectDocker},
	{name: podman.Name, connect: connectPodman},
	{name: containerd.Name, connect: connectContainerd},
}

// forEachRuntime runs fn as a subtest per runtime candidate, named after
// the runtime. logger, when not nil, is handed to the adapter.
func forEachRuntime(t *testing.T, logger *slog.Logger, fn func(t *testing.T, b backend)) {
	t.Helper()
	testenv.Load()
	for _, c := range runtimeCandidates {
		t.Run(c.name, func(t *testing.T) {
			fn(t, c.connect(t, logger))
		})
	}
}

func connectDocker(t *testing.T, logger *slog.Logger) backend {
	t.Helper()
	var opts []docker.Option
	if logger != nil {
		opts = append(opts, docker.WithLogger(logger))
	}
	rt, err := docker.New(opts...)
	if err != nil {
		testenv.Unavailable(t, docker.Name, "%v", err)
	}
	t.Cleanup(func() { rt.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := rt.Version(ctx); err != nil {
		testenv.Unavailable(t, docker.Name, "%v", err)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return backend{
		name: docker.Name,
		rt:   rt,
		hardening: func(ctx context.Context, id string) (hardening, error) {
			c, err := cli.ContainerInspect(ctx, id)
			if err != nil {
				return hardening{}, err
			}
			hc := c.HostConfig
			return hardening{
				Privileged:  hc.Privileged,
				Binds:       hc.Binds,
				CapAdd:      hc.CapAdd,
				Devices:     len(hc.Devices),
				NetworkMode: string(hc.NetworkMode),
				PidMode:     string(hc.PidMode),
				IpcMode:     string(hc.IpcMode),
				SecurityOpt: hc.SecurityOpt,
				MaskedPaths: hc.MaskedPaths,
			}, nil
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
// default sockets).
func connectPodman(t *testing.T, logger *slog.Logger) backend {
	t.Helper()
	var opts []podman.Option
	if logger != nil {
		opts = append(opts, podman.WithLogger(logger))
	}
	rt, err := podman.New(opts...)
	return backend{name: podman.Name, rt: connectPort(t, podman.Name, rt, err)}
}

// connectContainerd connects to CONTAINERD_ADDRESS in CONTAINERD_NAMESPACE.
func connectContainerd(t *testing.T, logger *slog.Logger) backend {
	t.Helper()
	var opts []containerd.Option
	if logger != nil {
		opts = append(opts, containerd.WithLogger(logger))
	}
	rt, err := containerd.New(opts...)
	return backend{name: containerd.Name, rt: connectPort(t, containerd.Name, rt, err)}
}

// fenv is one fault test's world on a runtime: a label prefix of its own,
// the stand-in images, and a cleanup that removes every container and
// network carrying the prefix, even when the test fails half-way.
type fenv struct {
	t        *testing.T
	b        backend
	prefix   string
	images   map[string]string
	networks []string
}

func newFenv(t *testing.T, b backend) *fenv {
	t.Helper()
	e := &fenv{t: t, b: b, prefix: "sbxfault" + randHex(3), images: map[string]string{}}
	for _, s := range trio {
		e.images[s] = testenv.Image(t, b.name, s)
	}
	t.Cleanup(e.cleanup)
	return e
}

// testLabel marks the containers and networks a test makes that are not
// sandboxes.
func (e *fenv) testLabel() string { return e.prefix + ".test" }

func (e *fenv) cleanup() {
	removeLabelled(e.t, e.b.rt, e.prefix)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range e.networks {
		if err := e.b.rt.RemoveNetwork(ctx, n); err != nil {
			e.t.Logf("cleanup: %v", err)
		}
	}
}

// removeLabelled removes every sandbox and test container of prefix.
func removeLabelled(t *testing.T, rt runtime.ContainerRuntime, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, sel := range []map[string]string{{janitor.SandboxLabel(prefix): "1"}, {prefix + ".test": "1"}} {
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

// provisioner returns a provisioner with this test's prefix and the
// stand-in images; set adjusts the options.
func (e *fenv) provisioner(set func(*provision.Options)) *provision.Provisioner {
	e.t.Helper()
	opts := provision.Options{
		LabelPrefix: e.prefix,
		Images:      e.images,
		Getenv:      func(string) string { return "" },
	}
	if set != nil {
		set(&opts)
	}
	p, err := provision.New(e.b.rt, opts)
	require.NoError(e.t, err)
	return p
}

// sandboxes lists every container carrying this test's sandbox label, in
// any state.
func (e *fenv) sandboxes(ctx context.Context) []runtime.Container {
	e.t.Helper()
	cs, err := e.b.rt.List(ctx, map[string]string{janitor.SandboxLabel(e.prefix): "1"})
	require.NoError(e.t, err)
	return cs
}

// network creates a network for the test.
func (e *fenv) network(ctx context.Context) string {
	e.t.Helper()
	name := e.prefix + "-net"
	_, err := e.b.rt.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: map[string]string{e.testLabel(): "1"}})
	require.NoError(e.t, err)
	e.networks = append(e.networks, name)
	return name
}

// warm makes sure the stand-in images are present, so that the faults
// under test are not mistaken for a first pull.
func (e *fenv) warm(ctx context.Context) {
	e.t.Helper()
	for _, ref := range e.images {
		ok, err := e.b.rt.ImageExists(ctx, ref)
		require.NoError(e.t, err)
		if !ok {
			require.NoError(e.t, e.b.rt.PullImage(ctx, ref, nil), "pull %s", ref)
		}
	}
}

func names(cs []runtime.Container) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s (%s)", c.Name, c.State))
	}
	return out
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// poll calls cond every interval, on the test's goroutine (so that cond
// may use require), until it returns true; it fails the test when timeout
// passes first.
func poll(t *testing.T, cond func() bool, timeout, interval time.Duration, msgAndArgs ...any) {
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
