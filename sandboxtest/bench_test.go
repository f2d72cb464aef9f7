package sandboxtest_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/postgres"
	"github.com/roboco/sandboxer/engines/postgres/postgrestest"
	"github.com/roboco/sandboxer/internal/poll"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/sandboxtest"
)

// The per-test databases' figures on real runtimes (`make bench` runs
// them with -benchtime 1x: one round each, whatever b.N): hand-out
// latency percentiles, 8 tests in parallel, and a package of 200 tests
// against one container per test. SANDBOXER_BENCH_RUNTIMES picks the
// runtimes (default all; one that does not answer is skipped),
// SANDBOXTEST_BENCH_BASELINE the container-per-test baseline's test count
// (default 200; fewer are extrapolated, and said so).

// benchParallel is how many tests run at once.
const benchParallel = 8

// schemaFS is the bench's migrated template: 10 tables and 300 rows.
var schemaFS = func() fstest.MapFS {
	var schema, rows strings.Builder
	for i := range 10 {
		fmt.Fprintf(&schema, "create table t%d (id bigserial primary key, name text not null, created timestamptz not null default now());\n", i)
		fmt.Fprintf(&rows, "insert into t%d (name) select 'row ' || g from generate_series(1, 30) g;\n", i)
	}
	return fstest.MapFS{
		"001_schema.sql": {Data: []byte(schema.String())},
		"002_rows.sql":   {Data: []byte(rows.String())},
	}
}()

// benchRuntimes are the runtimes asked for, each connected (or the
// sub-benchmark skipped).
func benchRuntimes(b *testing.B, fn func(b *testing.B, r testruntimes.Runtime)) {
	b.Helper()
	names := testruntimes.Names
	if v := os.Getenv("SANDBOXER_BENCH_RUNTIMES"); v != "" && v != "all" {
		names = strings.Split(v, ",")
	}
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			r := testruntimes.Connect(b, name)
			testenv.Image(b, name, "postgres")
			fn(b, r)
		})
	}
}

// scope is one simulated test inside a benchmark: the benchmark's TB with
// cleanups of its own, run by end, and a failure that ends only this
// test's goroutine.
type scope struct {
	testing.TB
	cleanups []func()
}

func (s *scope) Cleanup(f func())               { s.cleanups = append(s.cleanups, f) }
func (s *scope) Fatalf(format string, a ...any) { s.TB.Errorf(format, a...); goruntime.Goexit() }
func (s *scope) Fatal(a ...any)                 { s.TB.Error(a...); goruntime.Goexit() }
func (s *scope) FailNow()                       { s.TB.Fail(); goruntime.Goexit() }
func (s *scope) Skipf(format string, a ...any) {
	s.TB.Errorf("skipped: "+format, a...)
	goruntime.Goexit()
}
func (s *scope) end() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// runTests runs n simulated tests, benchParallel at a time, each as body
// in a scope of its own.
func runTests(b *testing.B, n int, body func(t testing.TB)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range benchParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				func() {
					s := &scope{TB: b}
					defer s.end()
					done := make(chan struct{})
					go func() { defer close(done); body(s) }() // Goexit ends this goroutine only
					<-done
				}()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// ownRows is a test's work: write its own rows to one of the template's
// tables and read them back.
func ownRows(t testing.TB, rawURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "insert into t3 (name) select 'mine ' || g from generate_series(1, 10) g"); err != nil {
		t.Fatalf("write: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, "select count(*) from t3 where name like 'mine %'").Scan(&n); err != nil || n != 10 {
		t.Fatalf("read: %d rows, %v", n, err)
	}
}

// percentiles reports p50 and p95 of ds in ms, and their mean: with
// tests back to back, the mean hand-out is what the server's clone rate
// bounds (tests/s = parallel tests / (mean hand-out + mean test)).
func percentiles(b *testing.B, ds []time.Duration, what string) {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(len(ds))/1000, what+"-mean-ms")
	slices.Sort(ds)
	at := func(p float64) float64 {
		return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), what+"-p50-ms")
	b.ReportMetric(at(0.95), what+"-p95-ms")
}

// benchOpts are the shared sandbox's options on r, under a prefix of the
// benchmark's own (removed by label at its end, after Close).
func benchOpts(b *testing.B, r testruntimes.Runtime) sandboxtest.DBOptions {
	prefix := "sbb" + testkit.RandomHex(4)
	testkit.CleanupLabelled(b, r.RT, map[string]string{prefix + ".sandbox": "1"})
	b.Cleanup(func() { _ = sandboxtest.Close() })
	// The runtime as the bench reached it (on the rootless row, the
	// user's socket with the limits opt-out). The daemons are shared with
	// other work: a ping may take longer than detection's default.
	dopts := r.Detect
	dopts.PingTimeout = 15 * time.Second
	return sandboxtest.DBOptions{
		Options:    sandboxtest.Options{LabelPrefix: prefix, Detect: dopts},
		Migrations: sandboxtest.MigrateFS(schemaFS),
	}
}

// BenchmarkPostgresHandOut: the hand-out of a database cloned from the
// migrated template, 8 tests in parallel, each writing and reading its own
// rows, with each CREATE DATABASE strategy: from the pre-cloned pool
// ("burst": as many tests as the pool holds, once it is full; "sustained":
// 160 tests back to back, which outrun the pool, so that a hand-out waits
// for a clone: the server's clone rate is then the floor), and cloned on
// demand (the pool's absence). The template's build is left out.
func BenchmarkPostgresHandOut(b *testing.B) {
	modes := []struct {
		name     string
		pool     int
		strategy string
		tests    int
	}{
		{"pool-burst/file_copy", 0, postgrestest.StrategyFileCopy, postgrestest.DefaultPool},
		{"pool-burst/wal_log", 0, postgrestest.StrategyWALLog, postgrestest.DefaultPool},
		{"pool-sustained/file_copy", 0, postgrestest.StrategyFileCopy, 160},
		{"pool-sustained/wal_log", 0, postgrestest.StrategyWALLog, 160},
		{"on-demand/file_copy", -1, postgrestest.StrategyFileCopy, 160},
		{"on-demand/wal_log", -1, postgrestest.StrategyWALLog, 160},
	}
	benchRuntimes(b, func(b *testing.B, r testruntimes.Runtime) {
		for _, m := range modes {
			b.Run(m.name, func(b *testing.B) {
				opts := benchOpts(b, r) // a shared sandbox of the mode's own
				opts.Pool, opts.Strategy = m.pool, m.strategy
				warm := &scope{TB: b}
				db := sandboxtest.NewDB(warm, "postgres", opts) // builds the template
				warm.end()
				for range b.N {
					if m.pool >= 0 {
						poolFull(b, serverURL(b, "postgres", db.URL), db.Name)
					}
					var mu sync.Mutex
					var handOuts []time.Duration
					start := time.Now()
					runTests(b, m.tests, func(t testing.TB) {
						t0 := time.Now()
						db := sandboxtest.NewDB(t, "postgres", opts)
						d := time.Since(t0)
						mu.Lock()
						handOuts = append(handOuts, d)
						mu.Unlock()
						ownRows(t, db.URL)
					})
					elapsed := time.Since(start)
					percentiles(b, handOuts, "handout")
					b.ReportMetric(float64(m.tests)/elapsed.Seconds(), "tests/s")
				}
			})
		}
	})
}

// poolFull waits until the server holds exactly the pool's clones of the
// template that released cloned (a database named like it), and not
// released itself: every released database dropped (the workers drop
// once the pools are full), the pool refilled.
func poolFull(b *testing.B, server, released string) {
	prefix := released[:strings.LastIndex(released, "_")+1]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	err = poll.Until(ctx, time.Minute, 20*time.Millisecond, func() error {
		var n int
		if err := conn.QueryRow(ctx, "select count(*) from pg_database where starts_with(datname, $1) and datname <> $2",
			prefix, released).Scan(&n); err != nil {
			return err
		}
		var gone bool
		if err := conn.QueryRow(ctx, "select not exists (select from pg_database where datname = $1)", released).Scan(&gone); err != nil {
			return err
		}
		if n != postgrestest.DefaultPool || !gone {
			return fmt.Errorf("%d test databases", n)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRedisMongoHandOut: the hand-out of a database of every engine
// but postgres (BenchmarkPostgresHandOut's): a redis logical database, a
// mongo database; 8 tests in parallel, and their release on the test's
// cleanup (redis: FLUSHDB; mongo: dropDatabase).
func BenchmarkRedisMongoHandOut(b *testing.B) {
	const tests = 400
	benchRuntimes(b, func(b *testing.B, r testruntimes.Runtime) {
		base := benchOpts(b, r)
		for _, engine := range engines.Default.Names() {
			if engine == (postgres.Engine{}).Spec().Name {
				continue // BenchmarkPostgresHandOut's
			}
			b.Run(engine, func(b *testing.B) {
				testenv.Image(b, r.Name, engine)
				warm := &scope{TB: b}
				sandboxtest.NewDB(warm, engine, base) // starts the shared sandbox
				warm.end()
				for range b.N {
					var mu sync.Mutex
					var handOuts, releases []time.Duration
					runTests(b, tests, func(t testing.TB) {
						var r0 time.Time
						t.Cleanup(func() { // runs after the release
							mu.Lock()
							releases = append(releases, time.Since(r0))
							mu.Unlock()
						})
						t0 := time.Now()
						sandboxtest.NewDB(t, engine, base)
						d := time.Since(t0)
						t.Cleanup(func() { r0 = time.Now() }) // runs before it
						mu.Lock()
						handOuts = append(handOuts, d)
						mu.Unlock()
					})
					percentiles(b, handOuts, "handout")
					percentiles(b, releases, "release")
				}
			})
		}
	})
}

// BenchmarkPackageOf200Tests: 200 tests, 8 at a time, each writing and
// reading its own rows in the migrated schema: on per-test databases of
// one shared sandbox (its start included: the package's first test pays
// it), and on a postgres container per test (StartWith, the migrations
// applied in it, torn down at the test's end). x-faster is the ratio.
func BenchmarkPackageOf200Tests(b *testing.B) {
	const tests = 200
	baseline := tests
	if v := os.Getenv("SANDBOXTEST_BENCH_BASELINE"); v != "" {
		fmt.Sscan(v, &baseline)
	}
	benchRuntimes(b, func(b *testing.B, r testruntimes.Runtime) {
		for range b.N {
			opts := benchOpts(b, r)
			start := time.Now()
			runTests(b, tests, func(t testing.TB) {
				ownRows(t, sandboxtest.NewDB(t, "postgres", opts).URL)
			})
			shared := time.Since(start)
			_ = sandboxtest.Close()

			start = time.Now()
			runTests(b, baseline, func(t testing.TB) {
				sb := sandboxtest.StartWith(t, opts.Options, "postgres")
				applySchema(t, sb.DSN("postgres"))
				ownRows(t, sb.DSN("postgres"))
			})
			perTest := time.Since(start) * time.Duration(tests) / time.Duration(baseline)
			b.ReportMetric(shared.Seconds(), "shared-s")
			b.ReportMetric(perTest.Seconds(), "container-per-test-s")
			b.ReportMetric(float64(baseline), "baseline-tests-run")
			b.ReportMetric(perTest.Seconds()/shared.Seconds(), "x-faster")
		}
	})
}

// applySchema runs schemaFS's files, in name order, in the database at
// rawURL: the baseline's migrations.
func applySchema(t testing.TB, rawURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	for _, name := range slices.Sorted(maps.Keys(schemaFS)) {
		if _, err := conn.Exec(ctx, string(schemaFS[name].Data)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
