package sandboxtest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/roboco/sandboxer/engines/postgres/postgrestest"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/sandboxtest"
)

// BenchmarkPostgresCloneCycle: what a hand-out costs the shared server
// underneath the pool, per CREATE DATABASE strategy, on the bench's
// migrated template: one clone (CREATE DATABASE ... TEMPLATE) and one
// DROP DATABASE alone, then 8 at once (each statement's latency, and the
// server's rate), from one template and from 8 copies of it (concurrent
// clones of one template share its lock in SHARE mode: the copies tell
// whether they serialise anyway), and the checkpoints each statement
// asked for (pg_stat_checkpointer.num_requested; postgres < 17:
// pg_stat_bgwriter.checkpoints_req). cycles/s is the server's
// clone+drop rate with 8 connections at it: the sustained hand-out rate's
// ceiling, whatever the pool.
func BenchmarkPostgresCloneCycle(b *testing.B) {
	// 64 clones at a time at most: about 8 MB each, in the tablespace's
	// 1.5 GiB of the shared sandbox's 4 GiB.
	const clones = 64
	benchRuntimes(b, func(b *testing.B, r testruntimes.Runtime) {
		opts := benchOpts(b, r)
		opts.Pool = -1
		warm := &scope{TB: b}
		db := sandboxtest.NewDB(warm, "postgres", opts) // builds the template
		warm.end()
		server := serverURL(b, "postgres", db.URL)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		admin := connect(b, ctx, server)
		defer admin.Close(ctx)
		var tpl string
		if err := admin.QueryRow(ctx, "select datname from pg_database where datistemplate and starts_with(datname, 'tpl_')").Scan(&tpl); err != nil {
			b.Fatal(err)
		}
		copies := []string{tpl}
		for i := range benchParallel - 1 {
			name := fmt.Sprintf("%s_c%d", tpl, i)
			mustExec(b, ctx, admin, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(tpl)+" IS_TEMPLATE true ALLOW_CONNECTIONS false")
			copies = append(copies, name)
		}
		for _, strategy := range []string{postgrestest.StrategyFileCopy, postgrestest.StrategyWALLog} {
			b.Run(strategy, func(b *testing.B) {
				for _, m := range []struct {
					name      string
					parallel  int
					templates []string
				}{
					{"alone", 1, copies[:1]},
					{"2-at-once", 2, copies[:1]},
					{"4-at-once", 4, copies[:1]},
					{"8-at-once/one-template", benchParallel, copies[:1]},
					{"8-at-once/8-templates", benchParallel, copies},
				} {
					b.Run(m.name, func(b *testing.B) {
						for range b.N {
							cloneCycle(b, ctx, server, strategy, m.parallel, clones/m.parallel, m.templates)
						}
					})
				}
			})
		}
	})
}

// cloneCycle runs parallel connections, each cloning rounds databases
// (connection i from templates[i%len]) and then dropping them, and
// reports each statement's latency, the checkpoints each asked for, and
// the clone+drop cycles per second.
func cloneCycle(b *testing.B, ctx context.Context, server, strategy string, parallel, rounds int, templates []string) {
	conns := make([]*pgx.Conn, parallel)
	for i := range conns {
		conns[i] = connect(b, ctx, server)
		defer conns[i].Close(ctx)
	}
	var version int
	if err := conns[0].QueryRow(ctx, "select current_setting('server_version_num')::int").Scan(&version); err != nil {
		b.Fatal(err)
	}
	counter := "select checkpoints_req from pg_stat_bgwriter"
	if version >= 170000 {
		counter = "select num_requested from pg_stat_checkpointer"
	}
	checkpoints := func() int64 {
		var n int64
		if err := conns[0].QueryRow(ctx, counter).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	phase := func(stmt func(i, j int) string) ([]time.Duration, time.Duration, int64) {
		cp := checkpoints()
		var mu sync.Mutex
		var ds []time.Duration
		var wg sync.WaitGroup
		start := time.Now()
		for i, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range rounds {
					t0 := time.Now()
					if _, err := c.Exec(ctx, stmt(i, j)); err != nil {
						b.Error(err)
						return
					}
					d := time.Since(t0)
					mu.Lock()
					ds = append(ds, d)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return ds, time.Since(start), checkpoints() - cp
	}
	name := func(i, j int) string { return fmt.Sprintf("cc_%d_%d", i, j) }
	creates, createWall, createCP := phase(func(i, j int) string {
		return "CREATE DATABASE " + ident(name(i, j)) + " TEMPLATE " + ident(templates[i%len(templates)]) + " STRATEGY " + strategy
	})
	drops, dropWall, dropCP := phase(func(i, j int) string { return "DROP DATABASE IF EXISTS " + ident(name(i, j)) })
	if b.Failed() {
		return
	}
	n := float64(len(conns) * rounds)
	percentiles(b, creates, "create")
	percentiles(b, drops, "drop")
	b.ReportMetric(float64(createCP)/n, "checkpoints/create")
	b.ReportMetric(float64(dropCP)/n, "checkpoints/drop")
	b.ReportMetric(n/createWall.Seconds(), "creates/s")
	b.ReportMetric(n/dropWall.Seconds(), "drops/s")
	b.ReportMetric(n/(createWall+dropWall).Seconds(), "cycles/s")
}

// connect opens a connection to rawURL or ends the benchmark.
func connect(b *testing.B, ctx context.Context, rawURL string) *pgx.Conn {
	c, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// mustExec runs sql on c or ends the benchmark.
func mustExec(b *testing.B, ctx context.Context, c *pgx.Conn, sql string) {
	if _, err := c.Exec(ctx, sql); err != nil {
		b.Fatalf("%s: %v", sql, err)
	}
}

// ident quotes a name for SQL.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }
