package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// meddler wraps a real runtime and lets a test step in: before an Inspect
// of a given container (to recreate its name between a list and a
// remove), and in Inspect, Kill and Remove of given containers (to hang
// them until their context ends, as a stuck shim or a daemon that stops
// answering does).
type meddler struct {
	runtime.ContainerRuntime
	snapshots atomic.Int64

	mu            sync.Mutex
	beforeInspect map[string]func(ctx context.Context) // by ref, run once
	hung          map[string]bool                      // by ref
}

func newMeddler(rt runtime.ContainerRuntime) *meddler {
	return &meddler{ContainerRuntime: rt, beforeInspect: map[string]func(context.Context){}, hung: map[string]bool{}}
}

func (m *meddler) onInspect(ref string, fn func(ctx context.Context)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.beforeInspect[ref] = fn
}

func (m *meddler) hang(ref string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hung[ref] = true
}

func (m *meddler) Inspect(ctx context.Context, ref string) (runtime.Container, error) {
	m.mu.Lock()
	fn := m.beforeInspect[ref]
	delete(m.beforeInspect, ref)
	m.mu.Unlock()
	if fn != nil {
		fn(ctx)
	}
	if hung, err := m.block(ctx, ref); hung {
		return runtime.Container{}, err
	}
	return m.ContainerRuntime.Inspect(ctx, ref)
}

func (m *meddler) block(ctx context.Context, ref string) (bool, error) {
	m.mu.Lock()
	hung := m.hung[ref]
	m.mu.Unlock()
	if !hung {
		return false, nil
	}
	<-ctx.Done()
	return true, ctx.Err()
}

func (m *meddler) Kill(ctx context.Context, ref string) error {
	if hung, err := m.block(ctx, ref); hung {
		return err
	}
	return m.ContainerRuntime.Kill(ctx, ref)
}

func (m *meddler) Remove(ctx context.Context, ref string) error {
	if hung, err := m.block(ctx, ref); hung {
		return err
	}
	return m.ContainerRuntime.Remove(ctx, ref)
}

func (m *meddler) Snapshot(ctx context.Context, selector map[string]string) (runtime.Snapshot, error) {
	m.snapshots.Add(1)
	return m.ContainerRuntime.Snapshot(ctx, selector)
}

// counter wraps a real runtime and counts the calls a removal may make,
// by verb.
type counter struct {
	runtime.ContainerRuntime
	mu    sync.Mutex
	calls map[string]int
}

func newCounter(rt runtime.ContainerRuntime) *counter {
	return &counter{ContainerRuntime: rt, calls: map[string]int{}}
}

func (c *counter) count(verb string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[verb]++
}

// counts returns the calls so far, by verb.
func (c *counter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

func (c *counter) List(ctx context.Context, sel map[string]string) ([]runtime.Container, error) {
	c.count("list")
	return c.ContainerRuntime.List(ctx, sel)
}

func (c *counter) Inspect(ctx context.Context, ref string) (runtime.Container, error) {
	c.count("inspect")
	return c.ContainerRuntime.Inspect(ctx, ref)
}

func (c *counter) Kill(ctx context.Context, ref string) error {
	c.count("kill")
	return c.ContainerRuntime.Kill(ctx, ref)
}

func (c *counter) Remove(ctx context.Context, ref string) error {
	c.count("remove")
	return c.ContainerRuntime.Remove(ctx, ref)
}

// impostor runs, under the name of listed, a newer container that carries
// the same labels except the provisioner's call label: what another
// provision of the same owner makes after removing the old one. It
// returns the newer container.
func (e env) impostor(ctx context.Context, listed runtime.Container) runtime.Container {
	e.T().Helper()
	lbls := map[string]string{}
	for k, v := range listed.Labels {
		lbls[k] = v
	}
	lbls[labels.For(e.Prefix).Call] = "newer"
	require.NoError(e.T(), e.RT.Remove(ctx, listed.ID))
	c, err := e.RT.Run(ctx, runtime.RunSpec{
		Name:    listed.Name,
		Image:   testkit.Image(e.T(), e.RT, "busybox"),
		Command: []string{"sleep", "3600"},
		Labels:  lbls,
	})
	require.NoError(e.T(), err)
	return c
}

// assertSurvived checks that newer still holds its name: the same ID (IDs
// are never reused, so the ID tells) and the same creation time.
func (e env) assertSurvived(ctx context.Context, newer runtime.Container) {
	e.T().Helper()
	got, err := e.RT.Inspect(ctx, newer.Name)
	require.NoError(e.T(), err, "the newer container is gone")
	assert.Equal(e.T(), newer.ID, got.ID, "%s was replaced", newer.Name)
	assert.WithinDuration(e.T(), newer.Created, got.Created, time.Second, "%s was replaced", newer.Name)
	assert.True(e.T(), got.Running(), "the newer container was killed: %s", got.State)
}

// pastGrace waits until a dry-run sweep with a grace of 1 ns skips none of
// this test's sandboxes: Docker's list reports whole seconds, which the
// janitor reads as the end of that second.
func (e env) pastGrace(ctx context.Context) {
	e.T().Helper()
	dry, err := janitor.New(e.RT, janitor.Options{Prefix: e.Prefix, Grace: time.Nanosecond, DryRun: true})
	require.NoError(e.T(), err)
	testkit.Poll(e.T(), 30*time.Second, 50*time.Millisecond, func() error {
		rep, err := dry.Sweep(ctx)
		if err == nil && len(rep.Skipped) > 0 {
			err = fmt.Errorf("skipped: %s", rep)
		}
		return err
	}, "sandboxes stayed in a 1 ns grace window")
}

// TestJanitorLeavesANewerSameNamedSandboxAlone: between a sweep's
// snapshot and its remove, the orphan it listed is replaced by a newer
// container of the same name, which has a new ID on every runtime. The
// sweep leaves the newer one running and reports the orphan as vanished.
func TestJanitorLeavesANewerSameNamedSandboxAlone(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		services := []string{"redis"}
		sb, err := e.Provisioner(nil).Provision(ctx, "race", services)
		require.NoError(t, err)
		listed, err := e.RT.Inspect(ctx, sb.Containers[0].ID)
		require.NoError(t, err)
		e.pastGrace(ctx)

		m := newMeddler(e.RT)
		var newer runtime.Container
		m.onInspect(listed.ID, func(ctx context.Context) { newer = e.impostor(ctx, listed) })
		j, err := janitor.New(m, janitor.Options{Prefix: e.Prefix, Grace: time.Nanosecond})
		require.NoError(t, err)
		rep, err := j.Sweep(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, newer.ID, "the sweep never looked the orphan up before removing it")
		assert.NotEqual(t, listed.ID, newer.ID, "the newer container has an ID of its own")
		assert.Empty(t, rep.Removed)
		assert.Equal(t, []string{listed.Name}, janNames(rep.Vanished))
		e.assertSurvived(ctx, newer)
	})
}

// TestPreClearLeavesANewerSameNamedSandboxAlone: a provision finds a
// stale sandbox of its owner and pre-clears it; in between, another
// provision replaced it with a newer one of the same name. The newer one
// survives and this provision fails with a conflict.
func TestPreClearLeavesANewerSameNamedSandboxAlone(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		services := []string{"redis"}
		sb, err := e.Provisioner(nil).Provision(ctx, "preclear", services)
		require.NoError(t, err)
		listed, err := e.RT.Inspect(ctx, sb.Containers[0].ID)
		require.NoError(t, err)

		m := newMeddler(e.RT)
		var newer runtime.Container
		m.onInspect(listed.ID, func(ctx context.Context) { newer = e.impostor(ctx, listed) })
		p, err := provision.New(m, provision.Options{
			LabelPrefix:     e.Prefix,
			Images:          map[string]string{"redis": testenv.Image(t, e.Name, "redis")},
			NoPreClearGrace: true, // always clear a stale one
		})
		require.NoError(t, err)
		_, err = p.Provision(ctx, "preclear", services)
		require.Error(t, err)
		require.NotEmpty(t, newer.ID, "the pre-clear never looked the stale sandbox up before removing it")
		assert.NotEqual(t, listed.ID, newer.ID, "the newer container has an ID of its own")
		assert.ErrorIs(t, err, provision.ErrConflict)
		e.assertSurvived(ctx, newer)
	})
}

// TestDestroyLeavesANewerSameNamedSandboxAlone: a caller listed a
// sandbox; before it destroys it, another provision replaced it with a
// newer container of the same name, which has a new ID on every runtime.
// Destroy on the bare adapter looks the listed ID up, finds it gone, and
// leaves the newer one running.
func TestDestroyLeavesANewerSameNamedSandboxAlone(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		sb, err := e.Provisioner(nil).Provision(ctx, "newer", []string{"redis"})
		require.NoError(t, err)
		listed, err := e.RT.Inspect(ctx, sb.Containers[0].ID)
		require.NoError(t, err)
		newer := e.impostor(ctx, listed)

		c := newCounter(e.RT)
		outcome, err := runtime.Destroy(ctx, c, listed, 0)
		require.NoError(t, err)
		assert.NotEqual(t, listed.ID, newer.ID, "the newer container has an ID of its own")
		assert.Equal(t, runtime.Gone, outcome, "the listed container was already gone")
		assert.Equal(t, map[string]int{"inspect": 1}, c.counts(), "one look-up by the listed ID, nothing else")
		e.assertSurvived(ctx, newer)
		assert.Equal(t, []string{newer.Name}, b.LabelledNames(t, labels.For(e.Prefix).Call, "newer"), "the runtime's own CLI still lists it")
	})
}

// TestTeardownRoundTrips: a teardown on a real runtime lists the owner's
// sandboxes once and, per sandbox, makes one look-up and one forced
// remove by its ID, on every runtime; afterwards the runtime's own CLI
// lists none of the owner's containers.
func TestTeardownRoundTrips(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		p := e.Provisioner(nil)
		sb, err := p.Provision(ctx, "trips", []string{"redis"})
		require.NoError(t, err)
		owner := labels.For(e.Prefix).Owner
		require.Equal(t, []string{sb.Containers[0].Name}, b.LabelledNames(t, owner, sb.Owner))

		c := newCounter(e.RT)
		cp, err := provision.New(c, provision.Options{LabelPrefix: e.Prefix})
		require.NoError(t, err)
		removed, err := cp.Teardown(ctx, "trips")
		require.NoError(t, err)
		require.Len(t, removed, 1)
		assert.Equal(t, map[string]int{"list": 1, "inspect": 1, "remove": 1}, c.counts(), "round trips of the teardown")
		assert.Empty(t, b.LabelledNames(t, owner, sb.Owner), "the runtime's own CLI lists none of the owner's containers")
	})
}

// TestHungRuntimeBoundsSweepAndTeardown: Inspect, Kill and Remove of one
// sandbox hang until their context ends. A sweep and a teardown still return
// within their deadlines, with an error naming that sandbox, having
// removed the others; the janitor's loop keeps sweeping.
func TestHungRuntimeBoundsSweepAndTeardown(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		const callTimeout = time.Second
		services := []string{"redis"}
		p := e.Provisioner(nil)
		hung, err := p.Provision(ctx, "hung", services)
		require.NoError(t, err)
		fine, err := p.Provision(ctx, "fine", services)
		require.NoError(t, err)
		e.pastGrace(ctx)

		m := newMeddler(e.RT)
		m.hang(hung.Containers[0].ID)
		j, err := janitor.New(m, janitor.Options{Prefix: e.Prefix, Grace: time.Nanosecond, CallTimeout: callTimeout})
		require.NoError(t, err)
		start := time.Now()
		rep, err := j.Sweep(ctx)
		took := time.Since(start)
		require.Error(t, err)
		assert.Contains(t, err.Error(), hung.Containers[0].Name, "the error names the hung sandbox")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, took, 10*callTimeout, "the sweep waited on the hung sandbox past its deadlines")
		assert.Equal(t, janContainerNames(fine), janNames(rep.Removed), "the other orphan was removed")
		assert.Equal(t, []string{hung.Containers[0].Name}, e.SandboxNames(ctx), "only the hung one is left")

		mp, err := provision.New(m, provision.Options{LabelPrefix: e.Prefix, CallTimeout: callTimeout})
		require.NoError(t, err)
		start = time.Now()
		removed, err := mp.Teardown(ctx, "hung")
		took = time.Since(start)
		require.Error(t, err)
		assert.Contains(t, err.Error(), hung.Containers[0].Name)
		assert.Empty(t, removed)
		assert.Less(t, took, 10*callTimeout, "the teardown waited on the hung sandbox past its deadlines")

		// The loop goes on sweeping while every sweep meets the hung one.
		lctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- j.Run(lctx, 50*time.Millisecond) }()
		before := m.snapshots.Load()
		testkit.Poll(t, 30*callTimeout, 50*time.Millisecond, func() error {
			if n := m.snapshots.Load() - before; n < 3 {
				return fmt.Errorf("%d sweeps", n)
			}
			return nil
		}, "the janitor loop stopped sweeping")
		stop()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(10 * callTimeout):
			t.Fatal("the janitor loop did not end with its context")
		}
		assert.False(t, errors.Is(ctx.Err(), context.DeadlineExceeded), "the test ran out of time")
	})
}

// Unwrap returns the wrapped runtime (runtime.Unwrapper): the provisioner
// finds its image store through the meddler.
func (m *meddler) Unwrap() runtime.ContainerRuntime { return m.ContainerRuntime }

// Unwrap returns the wrapped runtime (runtime.Unwrapper): the provisioner
// finds its image store through the counter.
func (c *counter) Unwrap() runtime.ContainerRuntime { return c.ContainerRuntime }
