package janitor_test

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// TestSweepsNeverTouchAnInFlightProvision is the race rule: while a
// provision is in progress (its sandboxes exist, one per engine, their readiness
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
	w.fake.AddImage("mariadb:11", "/var/lib/mysql")
	w.fake.Script("pg_isready", fakeruntime.Result{Stdout: "accepting connections"})
	w.fake.Script("psql", fakeruntime.Result{Stdout: "1\n"})
	w.fake.Script("redis-cli", fakeruntime.Result{Stdout: "PONG\n"})
	w.fake.Script("mongosh", fakeruntime.Result{Stdout: "1\n"})
	w.fake.Script("mariadb", fakeruntime.Result{Stdout: "1\n"})

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
	require.Eventually(t, func() bool { return held.Load() >= int32(len(services)) }, 10*time.Second, time.Millisecond,
		"every engine's sandbox created and probing")
	require.Len(t, w.names(), len(services))

	j := w.janitor(janitor.Options{})
	step := janitor.DefaultGrace / 10
	for elapsed := time.Duration(0); ; elapsed += step {
		rep, err := j.Sweep(ctx)
		require.NoError(t, err)
		assert.Empty(t, rep.Removed, "at +%s", elapsed)
		assert.Len(t, rep.Skipped, len(services), "at +%s", elapsed)
		if elapsed+step >= janitor.DefaultGrace {
			w.clock.Advance(janitor.DefaultGrace - elapsed - time.Millisecond)
			rep, err := j.Sweep(ctx)
			require.NoError(t, err)
			assert.Len(t, rep.Skipped, len(services), "the last millisecond of grace")
			break
		}
		w.clock.Advance(step)
	}

	_, err = p.Provision(ctx, "42", []string{"redis"})
	require.ErrorIs(t, err, provision.ErrConflict, "a concurrent provision's pre-clear must not take the in-flight sandbox")
	require.Len(t, w.names(), len(services))

	close(release)
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("the provision did not finish")
	}
	require.NoError(t, res.err)
	var want []string
	for _, e := range engines.Default.All() {
		want = append(want, provision.ContainerName(labels.DefaultPrefix, e.Spec().Short, "42"))
	}
	slices.Sort(want)
	assert.Equal(t, want, w.names(), "one sandbox per engine, roboco-sandbox-pg-42 and the others")

	w.clock.Advance(time.Millisecond) // grace over; roboco-agent-42 never came
	rep, err := j.Sweep(ctx)
	require.NoError(t, err)
	assert.Len(t, rep.Removed, len(services))
	assert.Empty(t, w.names())
}

// TestSweepLeavesANewerSameNamedContainerAlone is the same-name race: an
// orphan's owner is gone, and between the sweep's snapshot and its remove
// a provisioner replaces the orphan with a newer sandbox of the same name.
// The newer container has a new ID (IDs are never reused, on every
// backend), and the sweep removes by the ID it listed, so the newer one
// survives untouched, wherever in the removal the replacement happens.
func TestSweepLeavesANewerSameNamedContainerAlone(t *testing.T) {
	const name = "roboco-sandbox-pg-1"
	tests := []struct {
		name string
		// at is the verb whose first call on the orphan's ID the
		// replacement happens at: the look-up (VerbInspect) or the
		// remove itself (VerbRemove).
		at string
		// wantVanished: the orphan was gone at the look-up, so the sweep
		// reports it vanished; else it was there, and is reported
		// removed (it is gone, whoever removed it).
		wantVanished bool
	}{
		{name: "AtTheLookUp", at: fakeruntime.VerbInspect, wantVanished: true},
		{name: "AtTheRemove", at: fakeruntime.VerbRemove},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			orphan := w.fake.Seed(runtime.Container{Name: name, Image: "postgres:16-alpine", Created: w.clock.Now().Add(-time.Hour),
				Labels: map[string]string{
					keys.Sandbox: "1", keys.Owner: "roboco-agent-1",
					keys.Engine: "postgres", keys.Call: "oldcall",
				}})
			var (
				replaced atomic.Bool
				newer    runtime.Container
				hits     []string
				mu       sync.Mutex
			)
			w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
				if c.Verb == fakeruntime.VerbKill || c.Verb == fakeruntime.VerbRemove {
					mu.Lock()
					hits = append(hits, c.Object)
					mu.Unlock()
				}
				if c.Verb != tt.at || c.Object != orphan.ID || !replaced.CompareAndSwap(false, true) {
					return nil
				}
				// What a provisioner's pre-clear + run does meanwhile.
				assert.NoError(t, w.fake.Remove(ctx, orphan.ID))
				newer = w.fake.Seed(runtime.Container{Name: orphan.Name, Image: orphan.Image,
					Labels: withLabel(orphan.Labels, keys.Call, "newcall"), Created: w.clock.Now()})
				return nil
			})

			rep, err := w.janitor(janitor.Options{}).Sweep(context.Background())
			require.NoError(t, err)
			require.True(t, replaced.Load(), "the replacement happened during the sweep")
			got := rep.Removed
			if tt.wantVanished {
				assert.Empty(t, rep.Removed)
				got = rep.Vanished
			} else {
				assert.Empty(t, rep.Vanished)
			}
			require.Len(t, got, 1)
			assert.Equal(t, orphan.ID, got[0].ID, "the orphan is the one reported")
			mu.Lock()
			assert.NotContains(t, hits, newer.ID, "nothing destructive reached the newer container")
			mu.Unlock()

			left := w.fake.Containers()
			require.Len(t, left, 1, "the newer container survives")
			assert.Equal(t, newer.ID, left[0].ID)
			assert.NotEqual(t, orphan.ID, left[0].ID)
			assert.Equal(t, newer.Labels, left[0].Labels)
			assert.True(t, left[0].Running(), "and is untouched")
		})
	}
}

func withLabel(labels map[string]string, k, v string) map[string]string {
	out := maps.Clone(labels)
	out[k] = v
	return out
}
