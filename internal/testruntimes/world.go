package testruntimes

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// World is one test's world of sandboxes on a runtime: a label prefix of
// its own, so that its janitor sweeps never see another test's sandboxes
// (concurrent packages included) and its cleanup removes exactly what it
// made (sandboxes, the containers and networks it labels with
// TestLabels), even when it fails half-way; and the stand-in image of
// every engine.
type World struct {
	Runtime
	// Prefix is the label prefix of every sandbox the world's provisioners
	// make.
	Prefix string
	// Images are the stand-in images of every engine of engines.Default, by
	// engine name.
	Images map[string]string

	t        testing.TB
	mu       sync.Mutex
	networks []string
}

// NewWorld makes a world on r and registers its cleanup. A stand-in image
// that is not configured ends the test through testenv.Unavailable.
func NewWorld(t testing.TB, r Runtime) *World {
	t.Helper()
	w := &World{Runtime: r, t: t, Prefix: "sbxt" + testkit.RandomHex(4), Images: map[string]string{}}
	for _, name := range engines.Default.Names() {
		w.Images[name] = testenv.Image(t, r.Name, name)
	}
	t.Cleanup(w.cleanup)
	return w
}

// SandboxLabels select every sandbox of the world, in any state.
func (w *World) SandboxLabels() map[string]string {
	return labels.For(w.Prefix).Sandboxes()
}

// TestLabel is the key of TestLabels: "<prefix>.test".
func (w *World) TestLabel() string { return w.Prefix + ".test" }

// TestLabels mark the containers and networks a test makes that are not
// sandboxes (agents, baselines): "<prefix>.test=1".
func (w *World) TestLabels() map[string]string {
	return map[string]string{w.TestLabel(): "1"}
}

// T is the test the world belongs to.
func (w *World) T() testing.TB { return w.t }

// Owner returns a fresh owner id with tag in it.
func (w *World) Owner(tag string) string { return tag + "-" + testkit.RandomHex(3) }

// Provisioner returns a provisioner with the world's prefix and images,
// blind to the process environment's image overrides; set, when not nil,
// adjusts the options first.
func (w *World) Provisioner(set func(*provision.Options)) *provision.Provisioner {
	w.t.Helper()
	opts := provision.Options{
		LabelPrefix: w.Prefix,
		Images:      w.Images,
		Getenv:      func(string) string { return "" },
	}
	if set != nil {
		set(&opts)
	}
	p, err := provision.New(w.RT, opts)
	require.NoError(w.t, err)
	return p
}

// Janitor returns a janitor over the world's sandboxes with grace.
func (w *World) Janitor(grace time.Duration) *janitor.Janitor {
	j, err := janitor.New(w.RT, janitor.Options{Prefix: w.Prefix, Grace: grace})
	require.NoError(w.t, err)
	return j
}

// Sandboxes lists every sandbox of the world, in any state.
func (w *World) Sandboxes(ctx context.Context) []runtime.Container {
	w.t.Helper()
	cs, err := w.RT.List(ctx, w.SandboxLabels())
	require.NoError(w.t, err)
	return cs
}

// SandboxNames is the names of Sandboxes, sorted.
func (w *World) SandboxNames(ctx context.Context) []string {
	w.t.Helper()
	return testkit.Names(w.Sandboxes(ctx))
}

// Owned lists the containers that p labelled as owned by ownerID.
func (w *World) Owned(ctx context.Context, p *provision.Provisioner, ownerID string) []runtime.Container {
	w.t.Helper()
	cs, err := w.RT.List(ctx, map[string]string{p.Labels().Owner: p.OwnerName(ownerID)})
	require.NoError(w.t, err)
	return cs
}

// Agent runs a busybox stand-in called name that sleeps, as an agent
// would run, labelled with TestLabels, and returns its ID.
func (w *World) Agent(ctx context.Context, name string) string {
	w.t.Helper()
	c, err := w.RT.Run(ctx, runtime.RunSpec{
		Name:    name,
		Image:   testkit.Image(w.t, w.RT, "busybox"),
		Command: []string{"sleep", "3600"},
		Labels:  w.TestLabels(),
	})
	require.NoError(w.t, err)
	return c.ID
}

// Network creates a network for the test, removed when it ends.
func (w *World) Network(ctx context.Context) string {
	w.t.Helper()
	name := w.Prefix + "-net"
	_, err := w.RT.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: w.TestLabels()})
	require.NoError(w.t, err)
	w.mu.Lock()
	w.networks = append(w.networks, name)
	w.mu.Unlock()
	return name
}

// Warm makes sure the stand-in images are present, and the warm-start
// template of each engine that has one (provision.Options.Warm), so that
// what a test measures or provokes is not mistaken for a first pull or a
// first template build.
func (w *World) Warm() {
	w.t.Helper()
	for _, ref := range w.Images {
		testkit.EnsureImage(w.t, w.RT, ref)
	}
	p := w.Provisioner(nil)
	ctx := testkit.Context(w.t, 5*time.Minute)
	for _, name := range p.WarmServices() {
		_, err := p.EnsureTemplate(ctx, name)
		require.NoError(w.t, err, "the warm template of %s", name)
	}
}

// cleanup removes the world's containers, then its networks (which are
// in use while a container is on them).
func (w *World) cleanup() {
	testkit.RemoveLabelled(w.t, w.RT, w.SandboxLabels(), w.TestLabels())
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range w.networks {
		if err := w.RT.RemoveNetwork(ctx, n); err != nil {
			w.t.Errorf("cleanup: %v", err)
		}
	}
}
