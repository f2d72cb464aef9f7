package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/engines/postgres/postgrestest"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// TestPostgres18Layout runs the postgres engine on the 18 stand-in (shaped
// like postgres:18: PGDATA /var/lib/postgresql/18/docker, VOLUME
// /var/lib/postgresql, an entrypoint that refuses a mount at
// /var/lib/postgresql/data) on every runtime: it starts cold, fills to
// postgres's own "full" error within the default limit and keeps serving,
// and, where the runtime has an image store, builds a warm template and
// starts warm from it, each judged ready over the wire and logged in to.
func TestPostgres18Layout(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, r testruntimes.Runtime) {
		e := newEnv(t, r)
		e.Images["postgres"] = testkit.EnsureImage(t, r.RT, testenv.Image(t, r.Name, "postgres18"))
		ctx := testkit.Context(t, 10*time.Minute)

		t.Run("ColdFillsToFull", func(t *testing.T) {
			sb, err := e.Provisioner(nil).Provision(ctx, e.Owner("pg18"), []string{"postgres"})
			if errors.Is(err, runtime.ErrUnsupported) {
				info, verr := r.RT.Version(ctx)
				require.NoError(t, verr)
				require.True(t, info.Rootless, "only a rootless runtime may refuse the memory limit: %v", err)
				// as TestFullIsAnErrorNotADeath: no budget holds, so there is no "full" to reach
				t.Logf("%s (rootless, cgroup v%s) cannot enforce the memory limit: %v", r.Name, info.CgroupVersion, err)
				return
			}
			require.NoError(t, err, "cold start of the 18 stand-in")
			c := sb.Containers[0]
			url, err := testruntimes.URL(sb, c)
			require.NoError(t, err)
			s, err := engines.Default.Login(ctx, "postgres", url)
			require.NoError(t, err)
			assert.Regexp(t, `^18\.`, s.Server, "the server is the 18 stand-in's")

			f := postgrestest.Kit{}
			res, err := f.Fill(ctx, url, fillChunk, 2*provision.DefaultMemoryBytes)
			require.NoError(t, err, "fill: every write succeeds until the server says full")
			require.ErrorIs(t, res.Full, enginetest.ErrFull, "%d MiB written without postgres's full error", res.Bytes>>20)
			t.Logf("postgres 18 on %s: full after %.1f MiB: %v", r.Name, float64(res.Bytes)/(1<<20), res.Full)
			n, err := f.Count(ctx, url)
			require.NoError(t, err, "a full sandbox still serves reads")
			assert.GreaterOrEqual(t, n, res.Records)
			st := r.OwnStateOf(t, ctx, c.Name)
			assert.True(t, st.Running, "running, as %s sees it", r.Name)
			assert.False(t, st.OOMKilled, "not OOM-killed, as %s sees it", r.Name)
		})

		t.Run("Warm", func(t *testing.T) {
			var evs events
			p := e.Provisioner(func(o *provision.Options) { o.Warm = provision.WarmAuto; o.OnEvent = evs.add })
			tmpl, err := p.EnsureTemplate(ctx, "postgres")
			require.NoError(t, err, "the warm template of the 18 stand-in (every row of ForEach has an image store)")
			sb, err := p.Provision(ctx, e.Owner("pg18w"), []string{"postgres"})
			require.NoError(t, err)
			assert.Empty(t, evs.take(sb.Owner, provision.EventWarmFallback), "no fallback to cold")
			ready := evs.take(sb.Owner, provision.EventReady)
			require.Len(t, ready, 1)
			assert.Equal(t, tmpl.Ref, ready[0].Template, "started warm")
			_, err = testruntimes.Login(ctx, sb, sb.Containers[0])
			assert.NoError(t, err, "first connection to a warm 18 sandbox")
			t.Cleanup(func() { _, _ = p.RemoveTemplate(testkit.Context(t, time.Minute), "postgres") })
		})
	})
}
