package standins

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
)

// pgContract is what an official postgres image is, as its Dockerfile and
// docker-entrypoint.sh make it (docker-library/postgres:
// 16/alpine3.23/Dockerfile — `adduser -u 70`, `ENV PGDATA
// /var/lib/postgresql/data`, `VOLUME /var/lib/postgresql/data`;
// 18/trixie/Dockerfile — `useradd --uid=999`, `ENV PGDATA
// /var/lib/postgresql/18/docker`, `VOLUME /var/lib/postgresql`), and what
// the stand-in of that name must copy.
type pgContract struct {
	standin string // the stand-in's name in build/images.env
	stands  string // the official image it stands for
	major   string
	uid     string // of the postgres user, which runs the server and owns PGDATA
	pgdata  string
	volumes []string
}

var pgContracts = []pgContract{
	{"postgres", "postgres:16-alpine", "16", "70", "/var/lib/postgresql/data", []string{"/var/lib/postgresql/data"}},
	{"postgres18", "postgres:18", "18", "999", "/var/lib/postgresql/18/docker", []string{"/var/lib/postgresql"}},
}

// TestPostgresContract holds each postgres stand-in to the image it
// stands for: its config (PGDATA, PG_MAJOR, the VOLUME list), the server's
// major version, the uid that runs the server and owns PGDATA, and the
// argument order its entrypoint produces (a first argument that is an
// option means `postgres <args>`, and the options reach the server).
func TestPostgresContract(t *testing.T) {
	t.Parallel()
	for _, pc := range pgContracts {
		t.Run(pc.standin, func(t *testing.T) {
			t.Parallel()
			ref := standinImage(t, pc.standin)
			img := inspectImage(t, ref)
			assert.Contains(t, img.Config.Env, "PGDATA="+pc.pgdata, "PGDATA of %s", pc.stands)
			assert.Contains(t, img.Config.Env, "PG_MAJOR="+pc.major)
			assert.ElementsMatch(t, pc.volumes, keys(img.Config.Volumes), "the VOLUMEs of %s", pc.stands)

			const user, db = "sandbox", "sandbox"
			password := testkit.RandomHex(16)
			c := runContainer(t, ref, runOpts{
				Env:     []string{"POSTGRES_USER=" + user, "POSTGRES_PASSWORD=" + password},
				Publish: []string{"5432/tcp"},
				Cmd:     []string{"-c", "max_connections=42"},
			})
			c.waitExec(t, pgReadyDeadline, nil, "pg_isready", "-h", c.ip(t), "-p", "5432", "-U", user, "-d", db)
			ctx := testkit.Context(t, 2*time.Minute)
			conn, err := pgx.Connect(ctx, pgURL(c.hostAddr(t, "5432/tcp"), user, password, db))
			require.NoError(t, err)
			t.Cleanup(func() { conn.Close(ctx) })

			var version, maxConn, dataDir string
			require.NoError(t, conn.QueryRow(ctx, "select current_setting('server_version'), current_setting('max_connections'), current_setting('data_directory')").Scan(&version, &maxConn, &dataDir))
			assert.True(t, strings.HasPrefix(version, pc.major+"."), "server %s is PostgreSQL %s", version, pc.major)
			assert.Equal(t, "42", maxConn, "`-c max_connections=42` as the command reaches the server")
			assert.Equal(t, pc.pgdata, dataDir)
			assert.Equal(t, pc.uid, c.uid(t), "the server runs as postgres, uid %s as in %s", pc.uid, pc.stands)
			res, err := c.exec(ctx, nil, "stat", "-c", "%u %a", pc.pgdata)
			require.NoError(t, err)
			assert.Equal(t, pc.uid+" 700", strings.TrimSpace(res.Stdout), "PGDATA is postgres's, mode 0700")
		})
	}
}

// TestPostgres18RefusesTheOldMountPoint: as the official 18 entrypoint
// does, the 18 stand-in refuses to initialise (exit 1) while
// /var/lib/postgresql/data is a mount point and PGDATA is its own default:
// a mount there would hold nothing of 18's data. With PGDATA set to that
// mount, it starts.
func TestPostgres18RefusesTheOldMountPoint(t *testing.T) {
	t.Parallel()
	ref := standinImage(t, "postgres18")
	c := runContainer(t, ref, runOpts{Env: []string{"POSTGRES_PASSWORD=" + testkit.RandomHex(16)}, Tmpfs: []string{"/var/lib/postgresql/data"}})
	assert.Equal(t, 1, c.waitExited(t, 60*time.Second), "exit code")
	logs, err := c.logs(testkit.Context(t, 30*time.Second))
	require.NoError(t, err)
	assert.Contains(t, logs, "/var/lib/postgresql/data (unused mount/volume)")

	ok := runContainer(t, ref, runOpts{Env: []string{"POSTGRES_PASSWORD=" + testkit.RandomHex(16), "PGDATA=/var/lib/postgresql/data"},
		Tmpfs: []string{"/var/lib/postgresql/data"}})
	ok.waitExec(t, pgReadyDeadline, nil, "pg_isready", "-h", ok.ip(t), "-p", "5432")
}
