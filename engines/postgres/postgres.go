// Package postgres is sandboxer's PostgreSQL engine: its container,
// budget, readiness probe, emitted env, warm start and its login with
// pgx. Importing it registers the engine (engines.Register), as importing
// a database/sql driver does:
//
//	import _ "github.com/roboco/sandboxer/engines/postgres"
//
// Its test kit (fill-to-full, per-test databases) is postgrestest.
package postgres

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/roboco/sandboxer/engines"
)

func init() { engines.Register(Engine{}) }

// Engine is PostgreSQL, on the official image's contract
// (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB; first start initialises
// through a temporary server on the unix socket only).
type Engine struct{}

// Order is postgres's place in the report order: first.
const Order = 10

// Spec describes the postgres engine. Tmpfs is the layout of the default
// image (postgres:16-alpine: PGDATA and its VOLUME /var/lib/postgresql/data).
func (Engine) Spec() engines.Spec {
	return engines.Spec{
		Name:         "postgres",
		Short:        "pg",
		Order:        Order,
		Image:        "postgres:16-alpine",
		Port:         5432,
		Tmpfs:        []string{pgDefaultData, pgWAL, pgTablespace},
		Capabilities: capabilities(),
		ReadyTimeout: 60 * time.Second,
	}
}

// capabilities are what postgres's entrypoint needs (engines.DropToServerUser)
// and what root needs in postgres's own directories:
//   - FOWNER: root chmods directories it no longer owns once they are
//     postgres's (pgStart's chmod of the tablespace after its chown:
//     without FOWNER the cold start exits 1);
//   - DAC_OVERRIDE: root reads and writes in PGDATA, postgres's and 0700:
//     the warm template's capture (`tar -C PGDATA -cf -`, an exec as root:
//     "Cannot open: Permission denied" without it) and the warm start's
//     `tar -xp` into it.
func capabilities() []string {
	return append([]string{"DAC_OVERRIDE", "FOWNER"}, engines.DropToServerUser()...)
}

// A sandbox's postgres keeps three places, each on a tmpfs of its own, so
// that what a consumer writes can fill only a place whose filling is an
// ERROR for that statement:
//   - pgTablespace holds the consumer's data: the sandbox database and
//     every database created afterwards (template1 is moved there), so a
//     per-test database lands there too;
//   - the data volume (the image's VOLUME that holds its PGDATA:
//     /var/lib/postgresql/data up to 17, /var/lib/postgresql from 18)
//     keeps the server's own files: the catalogs of postgres and
//     template0, pg_xact, and what every checkpoint writes (a checkpoint
//     that cannot write there is a PANIC, and the crash recovery that
//     follows cannot finish on a full disk);
//   - pgWAL (POSTGRES_INITDB_WALDIR, the official image's contract) holds
//     the WAL, which max_wal_size keeps far below its tmpfs (a full WAL is
//     a PANIC too).
//
// pgWAL and pgTablespace are outside /var/lib/postgresql, so that they
// never nest in an image's VOLUME (18's is /var/lib/postgresql itself).
const (
	pgWAL        = "/var/lib/sandboxer/wal"
	pgTablespace = "/var/lib/sandboxer/tablespace"
	// pgDefaultData is PGDATA when the image does not say (its config is
	// not known, or sets none): the official images' default up to 17,
	// which 18's entrypoint also accepts when PGDATA is set to it.
	pgDefaultData = "/var/lib/postgresql/data"
)

// pgMinWAL is the smallest max_wal_size/min_wal_size postgres takes (two
// 16 MB segments).
const pgMinWAL = 32 * engines.MiB

// pgStart is the container's command, run by the image's entrypoint as
// `sh -c` (as root, the image's user): it hands pgTablespace to postgres
// and drops an init script into /docker-entrypoint-initdb.d (the official
// image runs it during first-start initialisation, on its unix-socket-only
// server, after creating POSTGRES_DB) that creates the tablespace and makes
// it the default of POSTGRES_DB and template1; then it execs the
// entrypoint again with "$@" (postgres and its options), so postgres stays
// the container's main process.
const pgStart = `chown postgres "` + pgTablespace + `" && chmod 700 "` + pgTablespace + `"
cat >/docker-entrypoint-initdb.d/sandboxer-tablespace.sh <<'EOF'
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc --dbname postgres \
	-c "CREATE TABLESPACE sandbox LOCATION '` + pgTablespace + `'" \
	-c "ALTER DATABASE template1 SET TABLESPACE sandbox" \
	-c "ALTER DATABASE \"$POSTGRES_DB\" SET TABLESPACE sandbox"
EOF
exec docker-entrypoint.sh "$@"
`

// pgLayout is where a sandbox of an image keeps its data: PGDATA (the
// image's, set explicitly in the container's env so that every start,
// cold, warm or the template's, reads the same one), the tmpfs that holds
// it (the image's VOLUME around PGDATA, or PGDATA itself when none is),
// and the image's other VOLUMEs.
type pgLayout struct {
	pgdata string
	data   string
	others []string
}

func postgresLayout(img engines.Image) pgLayout {
	l := pgLayout{pgdata: img.Path("PGDATA", pgDefaultData)}
	vols := img.Volumes([]string{pgDefaultData})
	if !img.Known {
		// No image store to ask (Kubernetes): PGDATA is set to the old
		// default, on a tmpfs of its own. 18's entrypoint refuses a mount
		// at /var/lib/postgresql/data only while PGDATA is its own
		// default, and a VOLUME is no volume on such a runtime.
		l.pgdata = pgDefaultData
	}
	l.data = engines.VolumeHolding(vols, l.pgdata)
	if l.data == "" {
		l.data = l.pgdata
	}
	for _, v := range vols {
		if v != l.data && !strings.HasPrefix(v, l.data+"/") {
			l.others = append(l.others, v)
		}
	}
	return l
}

// Container turns durability off (a sandbox is thrown away, so fsync and
// full-page writes only cost time) and the JIT (LLVM's memory is outside
// any budget; the official alpine images have it), places its tmpfs after
// img's layout (pgLayout) and, within a memory limit, sizes the budget so
// that a full sandbox is an ERROR ("could not extend file ... No space
// left on device", SQLSTATE 53100) and the server keeps serving:
//   - the consumer's data (pgTablespace): 3/8 of the limit (192 MiB of
//     512 MiB);
//   - the server's own files (the data volume): 1/16, at least 48 MiB;
//   - WAL (pgWAL): 3/16, at least 96 MiB, with max_wal_size at most a
//     third of it, so checkpoints recycle WAL long before it could fill
//     its tmpfs;
//   - any other VOLUME of the image: 1/128, at least 1 MiB;
//   - shared_buffers 1/16, maintenance_work_mem 1/16, work_mem 1/128;
//   - the rest (about a quarter) is headroom for the server's processes.
//
// Dropped databases give their tmpfs pages back at once (DROP DATABASE
// unlinks the files), so creating and dropping per-test databases never
// accumulates.
func (Engine) Container(cred engines.Credentials, lim engines.Limits, img engines.Image) engines.Container {
	l := postgresLayout(img)
	c := engines.Container{
		Env: map[string]string{
			"POSTGRES_USER":          cred.User,
			"POSTGRES_PASSWORD":      cred.Password,
			"POSTGRES_DB":            cred.Database,
			"POSTGRES_INITDB_WALDIR": pgWAL,
			"PGDATA":                 l.pgdata,
		},
		Command: []string{
			"sh", "-c", pgStart, "sandboxer-postgres",
			"postgres",
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			"-c", "wal_level=minimal",
			"-c", "max_wal_senders=0",
			"-c", "wal_skip_threshold=0",
			"-c", "jit=off",
		},
		Tmpfs: map[string]string{l.data: "", pgWAL: "", pgTablespace: ""},
	}
	if lim.MemoryBytes <= 0 {
		c.CoverVolumes(l.others, 0)
		return c
	}
	wal := lim.Share(3, 16, 3*pgMinWAL)
	c.Tmpfs[pgTablespace] = engines.TmpfsSize(lim.Share(3, 8, 16*engines.MiB))
	c.Tmpfs[l.data] = engines.TmpfsSize(lim.Share(1, 16, 48*engines.MiB))
	c.Tmpfs[pgWAL] = engines.TmpfsSize(wal)
	c.CoverVolumes(l.others, lim.Share(1, 128, engines.MiB))
	c.Command = append(c.Command,
		"-c", "shared_buffers="+engines.Megabytes(lim.Share(1, 16, 16*engines.MiB), "MB"),
		"-c", "maintenance_work_mem="+engines.Megabytes(lim.Share(1, 16, 8*engines.MiB), "MB"),
		"-c", "work_mem="+engines.Megabytes(lim.Share(1, 128, engines.MiB), "MB"),
		"-c", "max_wal_size="+engines.Megabytes(max(pgMinWAL, wal/4), "MB"),
		"-c", "min_wal_size="+engines.Megabytes(pgMinWAL, "MB"),
	)
	return c
}

// Probe asks pg_isready over TCP, then logs in with psql and runs a query:
// pg_isready alone can answer before password authentication works.
func (Engine) Probe(ep engines.Endpoint, cred engines.Credentials) []engines.ProbeStep {
	port := strconv.Itoa(ep.Port)
	return []engines.ProbeStep{
		{
			Cmd:   []string{"pg_isready", "-h", ep.Host, "-p", port, "-U", cred.User, "-d", cred.Database, "-t", "2"},
			Check: engines.ExitZero,
		},
		{
			Cmd: []string{"psql", "-h", ep.Host, "-p", port, "-U", cred.User, "-d", cred.Database,
				"-w", "-X", "-tA", "-c", "select 1"},
			Env:   map[string]string{"PGPASSWORD": cred.Password, "PGCONNECT_TIMEOUT": "2"},
			Check: engines.StdoutIs("1"),
		},
	}
}

// Env emits <P>_DB_HOST, PORT, USER, PASSWORD, NAME, ADMIN_DB and URL.
func (Engine) Env(prefix string, ep engines.Endpoint, cred engines.Credentials) []engines.EnvVar {
	u := engines.ConnURL("postgres", cred.User, cred.Password, ep, cred.Database, "sslmode=disable")
	vars := append(engines.UserVars(cred), engines.EnvVar{Name: "NAME", Value: cred.Database}, engines.EnvVar{Name: "ADMIN_DB", Value: "postgres"})
	return engines.ConnEnv(prefix+"_DB_", ep, u, vars...)
}

// Login connects with pgx and asks the server's version: a query, so the
// session is proven past authentication.
func (Engine) Login(ctx context.Context, rawURL string) (engines.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, engines.AttemptTimeout)
	defer cancel()
	s := engines.Session{Client: "pgx"}
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return s, engines.LoginError("postgres", rawURL, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "select current_setting('server_version')").Scan(&s.Server); err != nil {
		return s, engines.LoginError("postgres", rawURL, err)
	}
	return s, nil
}
