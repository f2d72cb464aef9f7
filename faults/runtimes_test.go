package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// trio is every engine, in registry order.
var trio = []string{"postgres", "redis", "mongo"}

// hardening is what a container was granted, as the runtime's own API
// reports it (what the port does not report about its isolation).
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

// dockerHardening reads what Docker granted container id.
func dockerHardening(ctx context.Context, cli *client.Client, id string) (hardening, error) {
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
}

// fenv is one fault test's world on a runtime: a label prefix of its own,
// the stand-in images, and a cleanup that removes every container and
// network carrying the prefix, even when the test fails half-way.
type fenv struct {
	t        *testing.T
	b        testruntimes.Runtime
	prefix   string
	images   map[string]string
	networks []string
}

func newFenv(t *testing.T, b testruntimes.Runtime) *fenv {
	t.Helper()
	e := &fenv{t: t, b: b, prefix: "sbxfault" + randHex(3), images: map[string]string{}}
	for _, s := range trio {
		e.images[s] = testenv.Image(t, b.Name, s)
	}
	t.Cleanup(e.cleanup)
	return e
}

// testLabel marks the containers and networks a test makes that are not
// sandboxes.
func (e *fenv) testLabel() string { return e.prefix + ".test" }

func (e *fenv) cleanup() {
	removeLabelled(e.t, e.b.RT, e.prefix)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range e.networks {
		if err := e.b.RT.RemoveNetwork(ctx, n); err != nil {
			e.t.Logf("cleanup: %v", err)
		}
	}
}

// removeLabelled removes every sandbox and test container of prefix.
func removeLabelled(t *testing.T, rt runtime.ContainerRuntime, prefix string) {
	testruntimes.RemoveLabelled(t, rt, labels.For(prefix).Sandboxes(), map[string]string{prefix + ".test": "1"})
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
	p, err := provision.New(e.b.RT, opts)
	require.NoError(e.t, err)
	return p
}

// sandboxes lists every container carrying this test's sandbox label, in
// any state.
func (e *fenv) sandboxes(ctx context.Context) []runtime.Container {
	e.t.Helper()
	cs, err := e.b.RT.List(ctx, labels.For(e.prefix).Sandboxes())
	require.NoError(e.t, err)
	return cs
}

// network creates a network for the test.
func (e *fenv) network(ctx context.Context) string {
	e.t.Helper()
	name := e.prefix + "-net"
	_, err := e.b.RT.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: map[string]string{e.testLabel(): "1"}})
	require.NoError(e.t, err)
	e.networks = append(e.networks, name)
	return name
}

// warm makes sure the stand-in images are present, so that the faults
// under test are not mistaken for a first pull.
func (e *fenv) warm() {
	e.t.Helper()
	for _, ref := range e.images {
		testruntimes.EnsureImage(e.t, e.b.RT, ref)
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
