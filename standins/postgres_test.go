package standins

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/postgres"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// pgReadyDeadline is the engine's readiness deadline for postgres.
const pgReadyDeadline = 60 * time.Second

// pgURL is a libpq URL for user/password on addr, database db.
func pgURL(addr, user, password, db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: addr, Path: "/" + db}
	q := u.Query()
	q.Set("sslmode", "disable")
	q.Set("connect_timeout", "10")
	u.RawQuery = q.Encode()
	return u.String()
}

// startPostgres runs the postgres stand-in as the engine does (credentials
// in env, `postgres -c fsync=off`, port published on 127.0.0.1) plus
// extra, then waits until pg_isready, run inside the container against the
// container's own address, reports ready: the temporary init server only
// listens on the unix socket, so this cannot fire early.
func startPostgres(t *testing.T, user, password, db string, extra runOpts) *container {
	t.Helper()
	opts := extra
	opts.Env = append([]string{
		"POSTGRES_USER=" + user, "POSTGRES_PASSWORD=" + password, "POSTGRES_DB=" + db,
	}, extra.Env...)
	opts.Publish = []string{"5432/tcp"}
	opts.Cmd = []string{"postgres", "-c", "fsync=off"}
	c := runContainer(t, standinImage(t, "postgres"), opts)
	ip := c.ip(t)
	c.waitExec(t, pgReadyDeadline, nil, "pg_isready", "-h", ip, "-p", "5432", "-U", user, "-d", db)
	return c
}

// TestPostgres runs the stand-in with PGDATA on tmpfs (as sandboxes do), on
// the image's anonymous volume, and elsewhere, and checks the official
// image's contract from the host with pgx.
func TestPostgres(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		opts   runOpts
		pgdata string
	}{
		{name: "PGDATAOnTmpfs", opts: runOpts{Tmpfs: []string{"/var/lib/postgresql/data"}}, pgdata: "/var/lib/postgresql/data"},
		{name: "PGDATAOnVolume", pgdata: "/var/lib/postgresql/data"},
		{name: "CustomPGDATA", opts: runOpts{Env: []string{"PGDATA=/var/lib/postgresql/custom"}}, pgdata: "/var/lib/postgresql/custom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const user, db = "sandbox", "sandbox_db"
			password := testkit.RandomHex(16)
			c := startPostgres(t, user, password, db, tt.opts)
			addr := c.hostAddr(t, "5432/tcp")
			ctx := testkit.Context(t, 2*time.Minute)

			// Ready means ready: the first login after pg_isready succeeds, with no retry.
			conn, err := pgx.Connect(ctx, pgURL(addr, user, password, db))
			require.NoError(t, err, "login right after pg_isready")
			t.Cleanup(func() { conn.Close(context.Background()) })

			t.Run("SelectOne", func(t *testing.T) {
				var one int
				require.NoError(t, conn.QueryRow(ctx, "select 1").Scan(&one))
				assert.Equal(t, 1, one)
			})
			t.Run("DatabaseAndUser", func(t *testing.T) {
				var cur, who string
				var exists bool
				require.NoError(t, conn.QueryRow(ctx,
					"select current_database(), current_user, exists(select 1 from pg_database where datname = $1)", db).
					Scan(&cur, &who, &exists))
				assert.Equal(t, db, cur)
				assert.Equal(t, user, who)
				assert.True(t, exists, "POSTGRES_DB exists")
			})
			t.Run("SuperuserIsPOSTGRES_USER", func(t *testing.T) {
				var super bool
				require.NoError(t, conn.QueryRow(ctx, "select rolsuper from pg_roles where rolname = current_user").Scan(&super))
				assert.True(t, super)
			})
			t.Run("CommandArgsPassThrough", func(t *testing.T) {
				var fsync string
				require.NoError(t, conn.QueryRow(ctx, "show fsync").Scan(&fsync))
				assert.Equal(t, "off", fsync)
			})
			t.Run("PGDATA", func(t *testing.T) {
				var dir string
				require.NoError(t, conn.QueryRow(ctx, "show data_directory").Scan(&dir))
				assert.Equal(t, tt.pgdata, dir)
			})
			t.Run("ScramHostRule", func(t *testing.T) {
				var method string
				require.NoError(t, conn.QueryRow(ctx,
					"select auth_method from pg_hba_file_rules where type = 'host' and address = 'all' and database = '{all}' and user_name = '{all}'").
					Scan(&method))
				assert.Equal(t, "scram-sha-256", method)
			})
			t.Run("WrongPasswordRefused", func(t *testing.T) {
				_, err := pgx.Connect(ctx, pgURL(addr, user, "not-"+password, db))
				require.Error(t, err)
				assert.Contains(t, err.Error(), "password authentication failed")
				assert.NotContains(t, err.Error(), password, "the password never appears in an error")
			})
			t.Run("RunsAsUID70", func(t *testing.T) {
				assert.Equal(t, "70", c.uid(t), "postgres:16-alpine's postgres user")
			})
			t.Run("InitServerOnUnixSocketOnly", func(t *testing.T) {
				// The race readiness must not fall for: during first-start
				// initialisation a temporary server runs; it must listen on the
				// unix socket only, and the real server on every address after.
				logs, err := c.logs(ctx)
				require.NoError(t, err)
				before, after, found := strings.Cut(logs, "PostgreSQL init process complete; ready for start up.")
				require.True(t, found, "init marker in the log")
				assert.Contains(t, before, `listening on Unix socket "/var/run/postgresql/.s.PGSQL.5432"`)
				assert.NotContains(t, before, "listening on IPv4")
				assert.NotContains(t, before, "listening on IPv6")
				assert.Contains(t, after, `listening on IPv4 address "0.0.0.0", port 5432`)
			})
			t.Run("ClientToolsOnPath", func(t *testing.T) {
				res, err := c.exec(ctx, []string{"PGPASSWORD=" + password},
					"psql", "-h", c.ip(t), "-U", user, "-d", db, "-tAc", "select 'psql works'")
				require.NoError(t, err)
				require.Zero(t, res.ExitCode, res.Stderr)
				assert.Equal(t, "psql works", strings.TrimSpace(res.Stdout))
			})
		})
	}
}

// TestPostgresRequiresPassword checks the official image's refusal to
// initialise a database without a superuser password.
func TestPostgresRequiresPassword(t *testing.T) {
	t.Parallel()
	c := runContainer(t, standinImage(t, "postgres"), runOpts{})
	assert.Equal(t, 1, c.waitExited(t, 30*time.Second), "exit code")
	logs, err := c.logs(testkit.Context(t, 30*time.Second))
	require.NoError(t, err)
	assert.Contains(t, logs, "superuser password is not specified")
}

// TestPostgresEnginesCommand runs each postgres stand-in exactly as the
// engine does for its image within the default memory limit (its env, its
// `sh -c` command and its bounded tmpfs mounts, laid out after the image's
// config): the contract it relies on holds, namely POSTGRES_INITDB_WALDIR
// (pg_wal on its own tmpfs), an init script dropped into
// /docker-entrypoint-initdb.d by the command (the tablespace, made the
// default of POSTGRES_DB and template1, so a new database lands there too)
// and the budget's settings passed through to the server.
func TestPostgresEnginesCommand(t *testing.T) {
	t.Parallel()
	for _, pc := range pgContracts {
		t.Run(pc.standin, func(t *testing.T) {
			t.Parallel()
			ref := standinImage(t, pc.standin)
			password := testkit.RandomHex(16)
			cred := engines.Credentials{User: engines.DefaultUser, Password: password, Database: engines.DefaultDatabase}
			cc := postgres.Engine{}.Container(cred, engines.Limits{MemoryBytes: 512 << 20}, imageOf(t, ref))
			opts := runOpts{Publish: []string{"5432/tcp"}, Cmd: cc.Command}
			for k, v := range cc.Env {
				opts.Env = append(opts.Env, k+"="+v)
			}
			for p := range cc.Tmpfs {
				opts.Tmpfs = append(opts.Tmpfs, p+":"+cc.Tmpfs[p])
			}
			c := runContainer(t, ref, opts)
			c.waitExec(t, pgReadyDeadline, nil, "pg_isready", "-h", c.ip(t), "-p", "5432", "-U", cred.User, "-d", cred.Database)
			ctx := testkit.Context(t, 2*time.Minute)
			conn, err := pgx.Connect(ctx, pgURL(c.hostAddr(t, "5432/tcp"), cred.User, password, cred.Database))
			require.NoError(t, err, "login right after pg_isready")
			t.Cleanup(func() { conn.Close(context.Background()) })

			_, err = conn.Exec(ctx, "create database per_test")
			require.NoError(t, err)
			for _, db := range []string{cred.Database, "template1", "per_test"} {
				var spc string
				require.NoError(t, conn.QueryRow(ctx, "select t.spcname from pg_database d join pg_tablespace t on t.oid = d.dattablespace where d.datname = $1", db).Scan(&spc))
				assert.Equal(t, "sandbox", spc, "database %s is in the sandbox tablespace", db)
			}
			var location string
			require.NoError(t, conn.QueryRow(ctx, "select pg_tablespace_location(oid) from pg_tablespace where spcname = 'sandbox'").Scan(&location))
			assert.Equal(t, "/var/lib/sandboxer/tablespace", location)
			for setting, want := range map[string]string{"max_wal_size": "32MB", "shared_buffers": "32MB", "wal_level": "minimal", "fsync": "off", "jit": "off", "data_directory": pc.pgdata} {
				var got string
				require.NoError(t, conn.QueryRow(ctx, "select current_setting($1)", setting).Scan(&got))
				assert.Equal(t, want, got, setting)
			}
			res, err := c.exec(ctx, nil, "readlink", pc.pgdata+"/pg_wal")
			require.NoError(t, err)
			assert.Equal(t, "/var/lib/sandboxer/wal", strings.TrimSpace(res.Stdout), "pg_wal is POSTGRES_INITDB_WALDIR")
			res, err = c.exec(ctx, nil, "cat", "/proc/mounts")
			require.NoError(t, err)
			for _, p := range append([]string{"/var/lib/sandboxer/wal", "/var/lib/sandboxer/tablespace"}, pc.volumes...) {
				assert.Regexp(t, `(?m)^tmpfs `+p+` tmpfs \S*size=`, res.Stdout, "%s is a bounded tmpfs", p)
			}
			volumes, err := docker(ctx, "inspect", "--format", "{{range .Mounts}}{{if eq .Type \"volume\"}}{{.Destination}} {{end}}{{end}}", c.ID)
			require.NoError(t, err)
			assert.Empty(t, volumes, "every VOLUME of the image is a tmpfs: no anonymous volume")
		})
	}
}

// imageOf is ref's layout as the engine is given it: the Env and VOLUMEs
// of its config, as Docker reports them.
func imageOf(t testing.TB, ref string) engines.Image {
	t.Helper()
	img := inspectImage(t, ref)
	out, err := engines.ImageOf(ref, runtime.NewImageConfig(img.Config.Env, img.Config.Volumes))
	require.NoError(t, err)
	return out
}
