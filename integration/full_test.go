package integration

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	_ "github.com/roboco/sandboxer/engines/all/alltest"
	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/engines/postgres/postgrestest"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// fillChunk is the size of one record a fill writes (1 kB rows, keys and
// documents, as a test's fixtures would be).
const fillChunk = 1000

// TestFullIsAnErrorNotADeath: a sandbox of each engine at the default
// memory limit, filled past its budget with the engine's real client
// (enginetest.Filler), answers a write with the engine's own "full" error
// (postgres SQLSTATE 53100, redis "OOM command not allowed", mongo's
// "database or disk is full"); afterwards it still serves a read of what
// it holds, and the runtime's own tools see the container running, not
// OOM-killed. A runtime that cannot enforce a memory limit has no budget
// to hold: provisioning says ErrUnsupported there, and that is asserted.
func TestFullIsAnErrorNotADeath(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, r testruntimes.Runtime) {
		e := newEnv(t, r)
		ctx := testkit.Context(t, 10*time.Minute)
		owner := e.Owner("full")
		sb, err := e.Provisioner(nil).Provision(ctx, owner, allEngines)
		if errors.Is(err, runtime.ErrUnsupported) {
			info, verr := r.RT.Version(ctx)
			require.NoError(t, verr)
			assert.True(t, info.Rootless, "only a rootless runtime may refuse the memory limit: %v", err)
			t.Logf("%s (rootless, cgroup v%s) cannot enforce the memory limit, so no budget holds: %v", r.Name, info.CgroupVersion, err)
			return
		}
		require.NoError(t, err, "provision")
		for _, c := range sb.Containers {
			t.Run(c.Engine, func(t *testing.T) {
				eng, _ := engines.Default.Lookup(c.Engine)
				f, err := enginetest.KitOf(eng)
				require.NoError(t, err, "%s can be filled", c.Engine)
				url, err := testruntimes.URL(sb, c)
				require.NoError(t, err)

				res, err := f.Fill(ctx, url, fillChunk, 2*provision.DefaultMemoryBytes)
				require.NoError(t, err, "fill: every write succeeds until the server says full")
				require.ErrorIs(t, res.Full, enginetest.ErrFull, "%d MiB written into a %d MiB sandbox without the engine's full error", res.Bytes>>20, provision.DefaultMemoryBytes>>20)
				t.Logf("%s on %s: full after %d records (%.1f MiB): %v", c.Engine, r.Name, res.Records, float64(res.Bytes)/(1<<20), res.Full)

				n, err := f.Count(ctx, url)
				require.NoError(t, err, "a full sandbox still serves reads")
				assert.GreaterOrEqual(t, n, res.Records, "every accepted record is there")
				_, err = engines.Default.Login(ctx, c.Engine, url)
				assert.NoError(t, err, "a full sandbox still takes logins")

				st := r.OwnStateOf(t, ctx, c.Name)
				assert.True(t, st.Running, "the container is running, as %s sees it", r.Name)
				assert.False(t, st.OOMKilled, "nothing was OOM-killed, as %s sees it", r.Name)
			})
		}
	})
}

// TestDroppedDatabasesGiveTheirRoomBack: per-test databases are created,
// filled and dropped in one postgres sandbox, many times over, their total
// several times the sandbox's budget: every round succeeds, because a
// dropped database's tmpfs pages are given back, and the sandbox still
// serves afterwards.
func TestDroppedDatabasesGiveTheirRoomBack(t *testing.T) {
	const (
		rounds  = 16
		perTest = 32 << 20 // bytes of rows per test database
	)
	testruntimes.ForEach(t, func(t *testing.T, r testruntimes.Runtime) {
		e := newEnv(t, r)
		ctx := testkit.Context(t, 10*time.Minute)
		sb, err := e.Provisioner(nil).Provision(ctx, e.Owner("dbs"), []string{"postgres"})
		if errors.Is(err, runtime.ErrUnsupported) {
			t.Logf("%s cannot enforce the memory limit, so no budget holds: %v", r.Name, err)
			return
		}
		require.NoError(t, err, "provision")
		admin, err := testruntimes.URL(sb, sb.Containers[0])
		require.NoError(t, err)
		f := enginetest.Filler(postgrestest.Kit{})
		conn, err := pgx.Connect(ctx, admin)
		require.NoError(t, err)
		defer conn.Close(context.WithoutCancel(ctx))
		for i := range rounds {
			db := fmt.Sprintf("test_%d", i)
			_, err := conn.Exec(ctx, "create database "+db)
			require.NoError(t, err, "round %d: create database", i)
			u, err := url.Parse(admin)
			require.NoError(t, err)
			u.Path = "/" + db
			res, err := f.Fill(ctx, u.String(), fillChunk, perTest)
			require.NoError(t, err, "round %d: fill", i)
			require.NoError(t, res.Full, "round %d: %d MiB fit in a fresh database", i, perTest>>20)
			_, err = conn.Exec(ctx, "drop database "+db)
			require.NoError(t, err, "round %d: drop database", i)
		}
		t.Logf("%d databases of %d MiB created, filled and dropped in a %d MiB sandbox", rounds, perTest>>20, provision.DefaultMemoryBytes>>20)
		_, err = engines.Default.Login(ctx, "postgres", admin)
		assert.NoError(t, err, "the sandbox still serves")
		assert.True(t, r.OwnStateOf(t, ctx, sb.Containers[0].Name).Running, "the container is running, as %s sees it", r.Name)
	})
}
