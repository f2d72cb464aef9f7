package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/engines/postgres/postgrestest"
)

// EnvKeepFailed, set to 1, keeps the per-test databases of failed tests
// (DBOptions.KeepOnFailure for every test).
const EnvKeepFailed = "SANDBOXTEST_KEEP_FAILED"

// releaseTimeout bounds a database's release on t.Cleanup.
const releaseTimeout = 30 * time.Second

// DBOptions tune NewDB. The zero value is the default.
type DBOptions struct {
	// Options are the shared sandbox's (runtime, prefixes, images,
	// limits): tests that pass the same ones share one sandbox per engine,
	// across the test binaries of a run unless Options.PerBinary.
	// MemoryBytes defaults to 4 GiB for a shared sandbox, since it holds
	// every parallel test's database on tmpfs, and CPUs to the host's
	// cores, since every parallel test's queries land on it.
	Options
	// Migrations build the template every postgres database is cloned
	// from (zero: an empty template). Ignored by the other engines.
	Migrations Migrations
	// Pool is how many postgres databases are cloned ahead of the tests,
	// per template (0: postgrestest.DefaultPool; negative: none, each test
	// waits for its clone).
	Pool int
	// Strategy is CREATE DATABASE's STRATEGY for the clones:
	// postgrestest.StrategyWALLog or postgrestest.StrategyFileCopy
	// (postgres >= 15; empty: postgrestest.DefaultStrategy).
	Strategy string
	// KeepOnFailure keeps a failed test's database (not dropped, not
	// flushed) and logs its name; the shared sandbox then stays after the
	// binary ends. SANDBOXTEST_KEEP_FAILED=1 sets it for every test.
	KeepOnFailure bool
}

// DB is a database of a test's own on the run's shared sandbox of its
// engine: a postgres database cloned from the migrations' template, a
// redis logical database (redistest.DB), a mongo database (mongotest.DB).
// Parallel tests each get their own; it is dropped (redis: flushed and
// handed out again) when the test ends.
type DB struct {
	// Engine is the engine's name ("postgres").
	Engine string
	// Name is the database's name; for redis, the logical database's
	// number ("7").
	Name string
	// URL is the connection URL, credentials included, at this database
	// (redis: ".../7"; mongo: authSource=admin).
	URL string
	// Env is what the engine emits for this database, as a whole-sandbox
	// helper would (ROBOCO_TEST_DB_NAME, ROBOCO_TEST_DB_URL ...).
	Env []engines.EnvVar
	// Runtime is the runtime the shared sandbox runs on; Container its
	// container's name.
	Runtime, Container string

	t testing.TB
}

// Getenv returns one emitted variable ("" when absent).
func (d *DB) Getenv(name string) string {
	for _, v := range d.Env {
		if v.Name == name {
			return v.Value
		}
	}
	return ""
}

// Setenv sets every emitted variable in the process environment for the
// rest of the test (t.Setenv: not allowed in parallel tests).
func (d *DB) Setenv() {
	d.t.Helper()
	for _, v := range d.Env {
		d.t.Setenv(v.Name, v.Value)
	}
}

// PostgresDB hands out a postgres database of the test's own, cloned
// from the template migrations build (once per shared server).
func PostgresDB(t testing.TB, migrations Migrations) *DB {
	t.Helper()
	return NewDB(t, postgresName, DBOptions{Migrations: migrations})
}

// NewDB hands out a database of engine's for t alone, on the shared
// sandbox of that engine, and returns it to the pool or drops it on
// t.Cleanup. The shared sandbox is the run's: every test binary of the
// user's on this host that runs meanwhile with the same Options (those of
// one `go test ./...` that overlap) uses one per engine; the first call of
// the first binary starts it, and Main of the last binary out removes it,
// so that a binary that starts after that starts a new one
// (Options.PerBinary: one per test binary, removed by its Main). See
// run.go for how. It ends the test as StartWith does when that is not
// possible. The engine and its test kit must be linked
// (postgres always is; redistest and mongotest link theirs): else the
// error names the import to add.
func NewDB(t testing.TB, engine string, opts DBOptions) *DB {
	t.Helper()
	db, release, err := newDB(engine, opts)
	if err != nil {
		fail(t, opts.Options, err)
	}
	db.t = t
	keep := opts.KeepOnFailure || os.Getenv(EnvKeepFailed) == "1"
	t.Cleanup(func() {
		if keep && t.Failed() {
			t.Logf("sandboxtest: kept %s database %q of the failed test on %s (%s)", db.Engine, db.Name, db.Container, db.Runtime)
			release(true)
			return
		}
		if err := release(false); err != nil {
			t.Errorf("sandboxtest: release %s database %q: %v", db.Engine, db.Name, err)
		}
	})
	return db
}

// newDB is NewDB without a test: the database, and the release that
// returns or drops it (or keeps it, and with it the shared sandbox).
func newDB(engine string, opts DBOptions) (*DB, func(keep bool) error, error) {
	kit, err := kitOf(engine)
	if err != nil {
		return nil, nil, err
	}
	if err := opts.validate(); err != nil {
		return nil, nil, err
	}
	req, err := opts.Migrations.request(opts.Pool, opts.Strategy)
	if err != nil {
		return nil, nil, err
	}
	s, err := sharedServer(engine, kit, opts.Options)
	if err != nil {
		return nil, nil, err
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	name, url, err := s.alloc.Acquire(ctx, req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s database on %s: %w", engine, s.st.sb.Containers[0].Name, err)
	}
	env, err := s.env(name, url)
	if err != nil {
		return nil, nil, err
	}
	db := &DB{Engine: engine, Name: name, URL: url, Env: env, Runtime: s.st.rt.Name(), Container: s.st.sb.Containers[0].Name}
	release := func(keep bool) error {
		if keep {
			s.kept.Store(true)
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		return s.alloc.Release(ctx, name)
	}
	return db, release, nil
}

func (o DBOptions) validate() error {
	switch o.Strategy {
	case "", postgrestest.StrategyWALLog, postgrestest.StrategyFileCopy:
	default:
		return fmt.Errorf("%w: strategy %q: want %s or %s", enginetest.ErrInvalid, o.Strategy, postgrestest.StrategyWALLog, postgrestest.StrategyFileCopy)
	}
	return nil
}

// kitOf is the test kit of the engine called name, found through the
// engine: an error naming the import to add when either is not linked.
func kitOf(name string) (enginetest.Kit, error) {
	e, ok := engines.Default.Lookup(name)
	if !ok {
		return nil, engines.Default.NotLinked(name)
	}
	return enginetest.KitOf(e)
}
