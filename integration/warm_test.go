package integration

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime/dockerarchive"
)

// events records a provisioner's events.
type events struct {
	mu  sync.Mutex
	evs []provision.Event
}

func (e *events) add(ev provision.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

// take returns the events so far of kind for owner, and forgets all.
func (e *events) take(owner string, kind provision.EventKind) []provision.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []provision.Event
	for _, ev := range e.evs {
		if ev.Kind == kind && ev.Owner == owner {
			out = append(out, ev)
		}
	}
	return out
}

// TestWarmFirstConnects: 20 warm postgres sandboxes in a row (the
// template built or found first), each judged ready over the wire and
// each first login with the handed-out credentials succeeding.
func TestWarmFirstConnects(t *testing.T) {
	rounds := 20
	if v := os.Getenv("SANDBOXER_READINESS_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "SANDBOXER_READINESS_ROUNDS")
		rounds = n
	}
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx := testkit.Context(t, 10*time.Minute)
		e.Warm()
		var evs events
		p := e.Provisioner(func(o *provision.Options) { o.Warm = provision.WarmAuto; o.OnEvent = evs.add })
		tmpl, err := p.EnsureTemplate(ctx, "postgres")
		require.NoError(t, err, "warm template")
		t.Logf("template %s (built now: %v, %s)", tmpl.Ref, tmpl.Built, tmpl.Elapsed.Round(time.Millisecond))
		var times []time.Duration
		ok := 0
		for i := range rounds {
			id := e.Owner("warm")
			start := time.Now()
			sb, err := p.Provision(ctx, id, []string{"postgres"})
			require.NoError(t, err, "round %d", i)
			times = append(times, time.Since(start))
			for _, fb := range evs.take(sb.Owner, provision.EventWarmFallback) {
				t.Logf("round %d fell back to cold: %v", i, fb.Err)
			}
			ready := evs.take(sb.Owner, provision.EventReady)
			require.Len(t, ready, 1)
			assert.Equal(t, tmpl.Ref, ready[0].Template, "round %d started warm", i)
			assert.Equal(t, provision.ReadinessWire, ready[0].Readiness)
			if _, err := testruntimes.Login(ctx, sb, sb.Containers[0]); assert.NoError(t, err, "round %d: first connection", i) {
				ok++
			}
			_, err = p.Teardown(ctx, id)
			require.NoError(t, err)
		}
		assert.Equal(t, rounds, ok, "first connections that succeeded")
		t.Logf("warm postgres: %d/%d first connections; provision %s", ok, rounds, summary(times))
	})
}

// testBase loads, under ref, the postgres stand-in plus one layer holding
// marker: a base image of the test's own (its ID is nobody else's), so
// that its template is built by this test, and is removed when it ends.
func testBase(t *testing.T, ctx context.Context, e env, standin, ref, marker string) {
	t.Helper()
	rt := e.RT
	store := testkit.Store(t, rt)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(store.SaveImage(ctx, standin, pw)) }()
	base, err := dockerarchive.Read(pr)
	require.NoError(t, err, "save %s", standin)
	defer base.Close()
	var out bytes.Buffer
	require.NoError(t, dockerarchive.AppendLayer(&out, base, ref, nil, []dockerarchive.LayerFile{{Name: "/sandboxer-test/marker", Body: []byte(marker)}}))
	removeImageAtEnd(t, e, ref)
	_, err = store.LoadImage(ctx, &out)
	require.NoError(t, err, "load %s", ref)
}

// removeImageAtEnd removes ref when the test ends, after the world's
// sandboxes: removed while a container uses it, an image would stay behind
// untagged for it (Docker, Podman).
func removeImageAtEnd(t *testing.T, e env, ref string) {
	t.Cleanup(func() {
		testkit.RemoveLabelled(t, e.RT, e.SandboxLabels())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, testkit.Store(t, e.RT).RemoveImage(ctx, ref), "cleanup: remove %s", ref)
	})
}

// pgURL is the postgres URL a sandbox emitted.
func pgURL(t *testing.T, sb provision.Sandbox) string {
	t.Helper()
	u, ok := sb.Lookup(provision.DefaultEnvPrefix + "_DB_URL")
	require.True(t, ok, "the sandbox emitted its URL")
	return u
}

// TestWarmTemplate, on a base image of its own: the template is built on
// first use; its own credentials are refused over the network on every
// warm sandbox (28P01); two warm sandboxes share no data; a changed base
// image (same tag, other content) builds another template; a corrupt
// template falls back to a cold start, leaves exactly one container and
// is removed.
func TestWarmTemplate(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx := testkit.Context(t, 10*time.Minute)
		e.Warm()
		baseRef := "localhost/" + e.Prefix + "/postgres:base"
		testBase(t, ctx, e, e.Images["postgres"], baseRef, "one")

		rec := &testruntimes.Recorder{ContainerRuntime: e.RT}
		var evs events
		p, err := provision.New(rec, provision.Options{
			LabelPrefix: e.Prefix,
			Images:      map[string]string{"postgres": baseRef},
			Getenv:      func(string) string { return "" },
			OnEvent:     evs.add,
		})
		require.NoError(t, err)

		// First use builds the template, from a container whose password
		// the recorder saw.
		a, err := p.Provision(ctx, e.Owner("wa"), []string{"postgres"})
		require.NoError(t, err)
		built := evs.take(a.Owner, provision.EventTemplateBuilt)
		require.Len(t, built, 1, "the first warm provision builds the template")
		tmpl := built[0].Template
		removeImageAtEnd(t, e, tmpl)
		assert.Contains(t, listImages(t, ctx, b), tmpl, "the template is in the runtime's own image list")
		ready := evs.take(a.Owner, provision.EventReady)
		require.Len(t, ready, 1)
		assert.Equal(t, tmpl, ready[0].Template, "the first sandbox started from it")

		ran := rec.Ran()
		i := slices.IndexFunc(ran, func(n string) bool { return strings.Contains(n, "-warm-") })
		require.GreaterOrEqual(t, i, 0, "a template container ran: %q", ran)
		templatePassword := rec.Passwords()[i]

		bsb, err := p.Provision(ctx, e.Owner("wb"), []string{"postgres"})
		require.NoError(t, err)
		assert.Empty(t, evs.take(bsb.Owner, provision.EventTemplateBuilt), "the second reuses the template")

		t.Run("TemplateCredentialsRefused", func(t *testing.T) {
			for _, sb := range []provision.Sandbox{a, bsb} {
				u, err := url.Parse(pgURL(t, sb))
				require.NoError(t, err)
				u.User = url.UserPassword(u.User.Username(), templatePassword)
				conn, err := pgx.Connect(ctx, u.String())
				if conn != nil {
					conn.Close(ctx)
				}
				var pgErr *pgconn.PgError
				require.ErrorAs(t, err, &pgErr, "%s: the template's password must not log in", sb.Owner)
				assert.Equal(t, "28P01", pgErr.Code, "invalid_password")
			}
		})

		t.Run("ShareNoData", func(t *testing.T) {
			ca, err := pgx.Connect(ctx, pgURL(t, a))
			require.NoError(t, err)
			defer ca.Close(ctx)
			_, err = ca.Exec(ctx, "create table only_in_a (v text); insert into only_in_a values ('a')")
			require.NoError(t, err)
			cb, err := pgx.Connect(ctx, pgURL(t, bsb))
			require.NoError(t, err)
			defer cb.Close(ctx)
			_, err = cb.Exec(ctx, "select * from only_in_a")
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, "a table made in one warm sandbox must not exist in the other")
			assert.Equal(t, "42P01", pgErr.Code, "undefined_table")
		})

		// Same tag, other content: another template. (The first base goes
		// first: retagged away, it would stay behind untagged.)
		require.NoError(t, testkit.Store(t, e.RT).RemoveImage(ctx, baseRef))
		testBase(t, ctx, e, e.Images["postgres"], baseRef, "two")
		c, err := p.Provision(ctx, e.Owner("wc"), []string{"postgres"})
		require.NoError(t, err)
		rebuilt := evs.take(c.Owner, provision.EventTemplateBuilt)
		require.Len(t, rebuilt, 1, "a changed base image builds its template")
		tmpl2 := rebuilt[0].Template
		removeImageAtEnd(t, e, tmpl2)
		assert.NotEqual(t, tmpl, tmpl2, "the template of the changed base is another")
		_, err = testruntimes.Login(ctx, c, c.Containers[0])
		assert.NoError(t, err, "the sandbox of the rebuilt template")

		t.Run("CorruptTemplateFallsBackCold", func(t *testing.T) {
			// Garbage under the template's tag: busybox with a file. The
			// real template goes first (with its sandbox), or it would stay
			// behind untagged.
			_, err := p.Teardown(ctx, c.OwnerID)
			require.NoError(t, err)
			require.NoError(t, testkit.Store(t, e.RT).RemoveImage(ctx, tmpl2))
			store, busybox := testkit.Store(t, e.RT), testkit.Image(t, e.RT, "busybox")
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(store.SaveImage(ctx, busybox, pw)) }()
			bb, err := dockerarchive.Read(pr)
			require.NoError(t, err)
			defer bb.Close()
			var garbage bytes.Buffer
			require.NoError(t, dockerarchive.AppendLayer(&garbage, bb, tmpl2, nil, []dockerarchive.LayerFile{{Name: "/sandboxer-warm/garbage", Body: []byte("garbage")}}))
			_, err = testkit.Store(t, e.RT).LoadImage(ctx, &garbage)
			require.NoError(t, err, "plant garbage under %s", tmpl2)

			id := e.Owner("wd")
			d, err := p.Provision(ctx, id, []string{"postgres"})
			require.NoError(t, err, "a corrupt template falls back to a cold start")
			assert.Len(t, evs.take(d.Owner, provision.EventWarmFallback), 1, "an event says why")
			assert.Len(t, evs.take(d.Owner, provision.EventTemplateRemoved), 1, "the corrupt template is blamed")
			ready := evs.take(d.Owner, provision.EventReady)
			require.Len(t, ready, 1)
			assert.Empty(t, ready[0].Template, "started cold")
			owned := e.Owned(ctx, p, id)
			assert.Len(t, owned, 1, "exactly one container left: %q", testkit.Names(owned))
			assert.NotContains(t, listImages(t, ctx, b), tmpl2, "the corrupt template is gone from the runtime's own list")
			_, err = testruntimes.Login(ctx, d, d.Containers[0])
			assert.NoError(t, err, "the cold sandbox")
		})
	})
}

// listImages is the runtime's own CLI's image list.
func listImages(t *testing.T, ctx context.Context, b testruntimes.Runtime) []string {
	t.Helper()
	refs, err := b.Images(ctx)
	require.NoError(t, err)
	return refs
}
