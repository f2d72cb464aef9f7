package postgrestest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/engines/postgres"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/provision"
)

// TestRefillWorkers: four workers per core, never fewer than four nor
// more than eight.
func TestRefillWorkers(t *testing.T) {
	for _, tt := range []struct{ cpus, want int }{
		{0, 4}, {1, 4}, {2, 8}, {3, 8}, {64, 8},
	} {
		assert.Equal(t, tt.want, refillWorkers(tt.cpus), "%d cores", tt.cpus)
	}
}

// TestNextJob: the workers' schedule, without a server: a clone for a
// built pool short of its size (counting the clones in flight), before
// any drop; a drop once the pools are full; a drop first once
// maxPendingDrops are waiting; nothing for an unbuilt or pool-less
// template.
func TestNextJob(t *testing.T) {
	newAlloc := func(drops int, tpls ...*template) *postgresAlloc {
		a := &postgresAlloc{templates: map[string]*template{}}
		for i, tpl := range tpls {
			a.templates[fmt.Sprint(i)] = tpl
		}
		for i := range drops {
			a.drops = append(a.drops, fmt.Sprintf("t_%d", i))
		}
		return a
	}
	pool := func(size, ready, inflight int, built bool) *template {
		tpl := &template{name: "tpl", ready: make(chan clone, size), built: built, inflight: inflight}
		for range ready {
			tpl.ready <- clone{name: "ready"}
		}
		return tpl
	}

	t.Run("ClonesBeforeDrops", func(t *testing.T) {
		tpl := pool(4, 1, 1, true)
		a := newAlloc(3, tpl)
		for range 2 { // 1 ready + 1 in flight: two more to make
			got, drop, ok := a.next()
			require.True(t, ok)
			assert.Same(t, tpl, got)
			assert.Empty(t, drop)
		}
		assert.Equal(t, 3, tpl.inflight, "each claimed clone is counted in flight")
		for i := range 3 {
			got, drop, ok := a.next()
			require.True(t, ok)
			assert.Nil(t, got)
			assert.Equal(t, fmt.Sprintf("t_%d", i), drop, "drops in release order")
		}
		_, _, ok := a.next()
		assert.False(t, ok, "pool full, nothing to drop")
	})
	t.Run("DropsFirstWhenTooManyWait", func(t *testing.T) {
		tpl := pool(4, 0, 0, true)
		a := newAlloc(maxPendingDrops, tpl)
		got, drop, ok := a.next()
		require.True(t, ok)
		assert.Nil(t, got)
		assert.Equal(t, "t_0", drop)
		got, _, ok = a.next()
		require.True(t, ok)
		assert.Same(t, tpl, got, "below the bound again: the pool first")
	})
	t.Run("NothingForUnbuiltOrPoolless", func(t *testing.T) {
		a := newAlloc(0, pool(4, 0, 0, false), &template{name: "none", built: true})
		_, _, ok := a.next()
		assert.False(t, ok)
	})
}

// TestFailedPoolCloneIsNotHandedOut: on a real server, the pool's
// refills fail for a while (a session in the template makes CREATE
// DATABASE ... TEMPLATE fail: "source database is being accessed by other
// users"); a test that comes meanwhile gets the error of a clone of its
// own at once, and once the template is free again, the tests that come
// get good databases (the template's seed row in each), not the errors of
// the clones that failed meanwhile.
func TestFailedPoolCloneIsNotHandedOut(t *testing.T) {
	a := testAlloc(t, sharedServer(t))
	ctx := testkit.Context(t, 3*time.Minute)

	const pool = 4
	opts := enginetest.Request{Pool: pool, Template: testkit.RandomHex(4), Migrate: func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		_, err = conn.Exec(ctx, "create table items (marker text); insert into items values ('seed')")
		return err
	}}
	var got []string
	t.Cleanup(func() {
		for _, name := range got {
			_ = a.Release(context.Background(), name)
		}
	})
	// good acquires a database and checks it is a clone of the template.
	good := func(what string) {
		t.Helper()
		name, url, err := a.Acquire(ctx, opts)
		require.NoError(t, err, "%s: a database", what)
		got = append(got, name)
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err, "%s: connect to %s", what, name)
		defer conn.Close(context.WithoutCancel(ctx))
		var marker string
		require.NoError(t, conn.QueryRow(ctx, "select marker from items").Scan(&marker), "%s: %s is a clone", what, name)
		assert.Equal(t, "seed", marker, what)
	}
	good("the first test")
	var tpl *template
	a.mu.Lock()
	for _, tp := range a.templates {
		tpl = tp
	}
	a.mu.Unlock()
	require.NotNil(t, tpl)
	testkit.Poll(t, time.Minute, 20*time.Millisecond, func() error {
		if n := len(tpl.ready); n < pool {
			return fmt.Errorf("%d of %d clones ready", n, pool)
		}
		return nil
	}, "the pool fills")

	admin, err := pgx.Connect(ctx, a.admin)
	require.NoError(t, err)
	defer admin.Close(context.WithoutCancel(ctx))
	tplID := pgx.Identifier{tpl.name}.Sanitize()
	// tryClone makes (and drops) a clone of the template, as a worker does.
	tryClone := func() error {
		name := pgx.Identifier{"probe_" + testkit.RandomHex(4)}.Sanitize()
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+tplID); err != nil {
			return err
		}
		_, err := admin.Exec(ctx, "DROP DATABASE "+name)
		return err
	}

	// The template busy: a session in it.
	_, err = admin.Exec(ctx, "ALTER DATABASE "+tplID+" WITH ALLOW_CONNECTIONS true")
	require.NoError(t, err)
	busyURL, err := enginetest.WithPath(a.admin, tpl.name)
	require.NoError(t, err)
	busy, err := pgx.Connect(ctx, busyURL)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "ALTER DATABASE "+tplID+" WITH ALLOW_CONNECTIONS false")
	require.NoError(t, err)
	require.ErrorContains(t, tryClone(), "being accessed by other users", "control: a clone fails while the template is busy")

	// The pool is drained; each pop asks for a refill, and every refill
	// fails.
	tried := a.seq.Load()
	for i := range pool {
		good(fmt.Sprintf("test %d of the full pool", i+1))
	}
	testkit.Poll(t, time.Minute, 20*time.Millisecond, func() error {
		a.mu.Lock()
		inflight := tpl.inflight
		a.mu.Unlock()
		if n := a.seq.Load() - tried; n < pool || inflight > 0 {
			return fmt.Errorf("%d refills tried, %d in flight", n, inflight)
		}
		return nil
	}, "the refills are tried")

	// A test that comes meanwhile waits for the pool, and is told when a
	// refill fails: it gets the outcome of a clone of its own, now.
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, _, err = a.Acquire(waitCtx, opts)
	require.Error(t, err, "no database while the template is busy")
	assert.ErrorContains(t, err, "being accessed by other users", "the error of its own clone")
	assert.NoError(t, waitCtx.Err(), "it did not wait for its deadline")

	// Free again.
	require.NoError(t, busy.Close(ctx))
	testkit.Poll(t, time.Minute, 100*time.Millisecond, tryClone, "control: the template can be cloned again")
	for i := range pool + 1 {
		good(fmt.Sprintf("test %d once the template is free", i+1))
	}
}

// sharedServer is the URL of a postgres sandbox on Docker with the
// shared server's arguments (Kit.SharedArgs), owned by this process as
// sandboxtest's shared sandboxes are (a janitor leaves it alone while the
// test runs), removed when t ends.
func sharedServer(t *testing.T) string {
	t.Helper()
	r := testruntimes.Connect(t, "docker")
	testenv.Image(t, r.Name, "postgres")
	prefix := "pgt" + testkit.RandomHex(4)
	testkit.CleanupLabelled(t, r.RT, labels.For(prefix).Sandboxes())
	owner, err := lifetime.ProcessOwnerLabels(prefix)
	require.NoError(t, err)
	name := postgres.Engine{}.Spec().Name
	p, err := provision.New(r.RT, provision.Options{LabelPrefix: prefix, Labels: owner, Args: map[string][]string{name: Kit{}.SharedArgs()}})
	require.NoError(t, err)
	sb, err := p.Provision(testkit.Context(t, 3*time.Minute), "owner", []string{name})
	require.NoError(t, err)
	rawURL, ok := sb.Lookup(engines.Default.URLName(name, provision.DefaultEnvPrefix))
	require.True(t, ok, "the sandbox emits its URL")
	return rawURL
}

// testAlloc is the allocator of the server at rawURL, closed when
// t ends.
func testAlloc(t *testing.T, rawURL string) *postgresAlloc {
	t.Helper()
	a, err := Kit{}.NewAllocator(rawURL)
	require.NoError(t, err)
	t.Cleanup(a.Close)
	return a.(*postgresAlloc)
}
