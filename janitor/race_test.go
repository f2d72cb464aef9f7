package janitor_test

import (
	"context"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// TestSweepsNeverTouchAnInFlightProvision is the race rule: while a
// provision is in progress (its three sandboxes exist, their readiness
// probes are held), neither sweeps — up to the last millisecond of the
// grace window — nor a concurrent provision's stale pre-clear may remove
// them. Once the provision is done and the grace is over, the owner (which
// never appeared) is gone and the next sweep removes them.
func TestSweepsNeverTouchAnInFlightProvision(t *testing.T) {
	w := newWorld(t)
	t.Cleanup(func() { w.fake.Close() })
	w.fake.AddImage("postgres:16-alpine", "/var/lib/postgresql/data")
	w.fake.AddImage("redis:8-alpine", "/data")
	w.fake.AddImage("mongo:8", "/data/db", "/data/configdb")
	w.fake.Script("pg_isready", fakeruntime.Result{Stdout: "accepting connections"})
	w.fake.Script("psql", fakeruntime.Result{Stdout: "1\n"})
	w.fake.Script("redis-cli", fakeruntime.Result{Stdout: "PONG\n"})
	w.fake.Script("mongosh", fakeruntime.Result{Stdout: "1\n"})

	release := make(chan struct{})
	var held atomic.Int32
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb != fakeruntime.VerbExec {
			return nil
		}
		held.Add(1)
		select { // every probe waits: the provision stays in flight
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})

	services := engines.Default.Names()
	// Readiness by the exec probe, which the hook holds (the fake runs no
	// server to log in to over the wire).
	p, err := provision.New(w.fake, provision.Options{Getenv: func(string) string { return "" }, Now: w.clock.Now, Readiness: provision.ReadinessExec, Warm: provision.WarmOff})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		sb  provision.Sandbox
		err error
	}
	done := make(chan result, 1)
	go func() {
		sb, err := p.Provision(ctx, "42", services)
		done <- result{sb, err}
	}()
	require.Eventually(t, func() bool { return held.Load() >= 3 }, 10*time.Second, time.Millisecond,
		"all three sandboxes created and probing")
	require.Len(t, w.names(), 3)

	j := w.janitor(janitor.Options{})
	step := janitor.DefaultGrace / 10
	for elapsed := time.Duration(0); ; elapsed += step {
		rep, err := j.Sweep(ctx)
		require.NoError(t, err)
		assert.Empty(t, rep.Removed, "at +%s", elapsed)
		assert.Len(t, rep.Skipped, 3, "at +%s", elapsed)
		if elapsed+step >= janitor.DefaultGrace {
			w.clock.Advance(janitor.DefaultGrace - elapsed - time.Millisecond)
			rep, err := j.Sweep(ctx)
			require.NoError(t, err)
			assert.Len(t, rep.Skipped, 3, "the last millisecond of grace")
			break
		}
		w.clock.Advance(step)
	}

	_, err = p.Provision(ctx, "42", []string{"redis"})
	require.ErrorIs(t, err, provision.ErrConflict, "a concurrent provision's pre-clear must not take the in-flight sandbox")
	require.Len(t, w.names(), 3)

	close(release)
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("the provision did not finish")
	}
	require.NoError(t, res.err)
	assert.Equal(t, []string{"roboco-sandbox-mongo-42", "roboco-sandbox-pg-42", "roboco-sandbox-redis-42"}, w.names())

	w.clock.Advance(time.Millisecond) // grace over; roboco-agent-42 never came
	rep, err := j.Sweep(ctx)
	require.NoError(t, err)
	assert.Len(t, rep.Removed, 3)
	assert.Empty(t, w.names())
}

// TestSweepLeavesANewerSameNamedContainerAlone is the same-name race: an
// orphan's owner is gone, and between the sweep's snapshot and its kill a
// provisioner replaces the orphan with a newer sandbox of the same name.
// The newer one survives, and the orphan is reported as vanished. On
// Docker and Podman the newer container has a new ID; on containerd the
// ID is the name, so only the call label or the creation time tells the
// two apart.
func TestSweepLeavesANewerSameNamedContainerAlone(t *testing.T) {
	const name = "roboco-sandbox-pg-1"
	newID := func(w *world, old runtime.Container) runtime.Container {
		return runtime.Container{Name: old.Name, Image: old.Image, Labels: withLabel(old.Labels, keys.Call, "newcall"), Created: w.clock.Now()}
	}
	sameIDNewer := func(w *world, old runtime.Container) runtime.Container {
		return runtime.Container{ID: old.ID, Name: old.Name, Image: old.Image, Labels: maps.Clone(old.Labels), Created: w.clock.Now()}
	}
	sameIDOtherCall := func(w *world, old runtime.Container) runtime.Container {
		return runtime.Container{ID: old.ID, Name: old.Name, Image: old.Image, Labels: withLabel(old.Labels, keys.Call, "newcall"), Created: old.Created}
	}
	tests := []struct {
		name string
		// idIsName: the backend's ID is the container's name (containerd).
		idIsName bool
		// newer is what replaces the listed orphan.
		newer func(w *world, old runtime.Container) runtime.Container
		// at is the verb whose first call on the orphan's ID the
		// replacement happens at: the identity check (VerbInspect), or
		// between that check and the kill (VerbKill).
		at string
		// wantRunning: the newer one is untouched. Replaced between the
		// identity check and the kill on a backend whose ID is the name,
		// it gets the kill meant for the orphan (no runtime can check and
		// kill in one step), but is never removed.
		wantRunning bool
	}{
		{name: "NewIDAtIdentityCheck", newer: newID, at: fakeruntime.VerbInspect, wantRunning: true},
		{name: "NewIDBetweenCheckAndKill", newer: newID, at: fakeruntime.VerbKill, wantRunning: true},
		{name: "SameIDNewerCreationAtIdentityCheck", idIsName: true, newer: sameIDNewer, at: fakeruntime.VerbInspect, wantRunning: true},
		{name: "SameIDOtherCallLabelAtIdentityCheck", idIsName: true, newer: sameIDOtherCall, at: fakeruntime.VerbInspect, wantRunning: true},
		{name: "SameIDNewerCreationBetweenCheckAndKill", idIsName: true, newer: sameIDNewer, at: fakeruntime.VerbKill},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			id := ""
			if tt.idIsName {
				id = name
			}
			orphan := w.fake.Seed(runtime.Container{ID: id, Name: name, Image: "postgres:16-alpine", Created: w.clock.Now().Add(-time.Hour),
				Labels: map[string]string{
					keys.Sandbox: "1", keys.Owner: "roboco-agent-1",
					keys.Engine: "postgres", keys.Call: "oldcall",
				}})
			var (
				replaced atomic.Bool
				newer    runtime.Container
			)
			w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
				if c.Verb != tt.at || c.Object != orphan.ID || !replaced.CompareAndSwap(false, true) {
					return nil
				}
				// What a provisioner's pre-clear + run does meanwhile.
				assert.NoError(t, w.fake.Remove(ctx, orphan.ID))
				newer = w.fake.Seed(tt.newer(w, orphan))
				return nil
			})

			rep, err := w.janitor(janitor.Options{}).Sweep(context.Background())
			require.NoError(t, err)
			require.True(t, replaced.Load(), "the replacement happened during the sweep")
			assert.Empty(t, rep.Removed)
			require.Len(t, rep.Vanished, 1, "the orphan is reported as vanished")
			assert.Equal(t, orphan.ID, rep.Vanished[0].ID)
			assert.Equal(t, 1, w.fake.Calls(fakeruntime.VerbRemove), "the replacement's own remove, none by the sweep")

			left := w.fake.Containers()
			require.Len(t, left, 1, "the newer container survives")
			assert.Equal(t, newer.ID, left[0].ID)
			assert.True(t, newer.Created.Equal(left[0].Created))
			assert.Equal(t, newer.Labels, left[0].Labels)
			if tt.wantRunning {
				assert.True(t, left[0].Running(), "and is untouched")
			}
		})
	}
}

func withLabel(labels map[string]string, k, v string) map[string]string {
	out := maps.Clone(labels)
	out[k] = v
	return out
}
