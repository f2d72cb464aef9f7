package janitor_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/provision"
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

	services := []string{"postgres", "redis", "mongo"}
	p, err := provision.New(w.fake, provision.Options{Getenv: func(string) string { return "" }, Now: w.clock.Now})
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
