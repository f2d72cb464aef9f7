package postgrestest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/internal/ids"
)

// The STRATEGY of CREATE DATABASE (postgres >= 15). WAL_LOG copies the
// template block by block through the WAL; FILE_COPY copies its files
// after a checkpoint, and was the only way before postgres 15.
const (
	StrategyWALLog   = "WAL_LOG"
	StrategyFileCopy = "FILE_COPY"
)

// DefaultStrategy is the clones' strategy when a Request sets none
// (on postgres >= 15):
// measured the faster for small templates on a tmpfs data directory
// (bench: BenchmarkPostgresCloneCycle).
const DefaultStrategy = StrategyFileCopy

// DefaultPool is how many databases are cloned ahead per template when a
// Request sets no Pool: a
// burst of that many tests each pops one while the workers clone the
// next.
const DefaultPool = 16

// refillWorkers is how many clones and drops a shared server has in
// flight for the pools, on a host of cpus cores: four per core, 4 to 8.
// One statement at a time leaves the server idle while it waits for the
// checkpoints it asked for (a FILE_COPY clone asks for two, DROP DATABASE
// for one), and concurrent statements share a checkpoint. Measured on 2
// cores (BenchmarkPostgresCloneCycle, FILE_COPY): 113 clones/s on one
// connection, 190 on 2, 217 on 4, 232 on 8; under sustained demand
// (BenchmarkPostgresHandOut) 8 workers rather than 2 halved the hand-out's
// p50 (about 40 ms rather than 80) at the same tests/s, which the host's
// CPU bounds.
func refillWorkers(cpus int) int { return min(max(4*cpus, 4), 8) }

// maxPendingDrops is how many released databases may wait for their drop
// while the pools are refilled first (about 8 MB each of the sandbox's
// memory, on tmpfs); past it, drops come first.
const maxPendingDrops = 64

// A pool clone that failed is tried again after a back-off that doubles
// from minRetry to maxRetry, and starts over at the next success.
const (
	minRetry = 100 * time.Millisecond
	maxRetry = 5 * time.Second
)

// closeTimeout bounds closing a connection to the shared server, which
// may be gone already (a killed container).
const closeTimeout = 5 * time.Second

// buildTimeout bounds a template's build (its migrations included).
const buildTimeout = 5 * time.Minute

// cloneTimeout bounds one clone or drop of a database.
const cloneTimeout = 30 * time.Second

// postgresAlloc hands out clones of templates on the shared postgres
// server, the way IntegreSQL does: per template, a pool of databases
// cloned ahead, so that a hand-out is a pop. A bounded set of workers
// (refillWorkers) refills the pools and drops released databases in the
// background, refills first (a hand-out waits for a clone, nobody waits
// for a drop) until too many drops are pending.
//
// Allocators of several processes may share the server: a template is
// built once, by whichever gets its advisory lock first, and used by all
// (its name is its key); the clones' names carry the allocator's tag.
type postgresAlloc struct {
	admin   string // the maintenance database's URL
	tag     string // random: this allocator's part of its clones' names
	version int    // server_version_num
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	seq     atomic.Int64
	// workers is how many background workers there are (refillWorkers);
	// wake tells the idle ones there is work (one token per worker).
	workers int
	wake    chan struct{}

	mu        sync.Mutex
	templates map[string]*template
	drops     []string
}

// template is one migrated template database and its pool of clones.
type template struct {
	name, strategy string
	once           sync.Once
	err            error
	// ready holds the clones made ahead (nil without a pool), good ones
	// only; built is set once the template is migrated, inflight counts
	// the clones being made for it; failed is closed (and replaced) when
	// a pool clone fails, and no worker clones for the pool before
	// retryAt, which backoff (the last delay) set. All but ready under
	// postgresAlloc.mu.
	ready    chan clone
	built    bool
	inflight int
	failed   chan struct{}
	retryAt  time.Time
	backoff  time.Duration
}

// clone is a worker's clone: a database ready to hand out, or why not.
type clone struct {
	name string
	err  error
}

func newPostgresAlloc(rawURL string) (*postgresAlloc, error) {
	admin, err := enginetest.WithPath(rawURL, "postgres")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := refillWorkers(goruntime.NumCPU())
	a := &postgresAlloc{admin: admin, tag: ids.Hex(3), ctx: ctx, cancel: cancel, workers: n, wake: make(chan struct{}, n), templates: map[string]*template{}}
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	conn, err := pgx.Connect(cctx, admin)
	if err != nil {
		cancel()
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(cctx))
	var v string
	if err := conn.QueryRow(cctx, "select current_setting('server_version_num')").Scan(&v); err != nil {
		cancel()
		return nil, err
	}
	a.version, _ = strconv.Atoi(v)
	for range a.workers {
		a.wg.Add(1)
		go a.worker()
	}
	return a, nil
}

// Acquire hands out a clone of req's template (built on first use), from
// its pool when it has one.
func (a *postgresAlloc) Acquire(ctx context.Context, req enginetest.Request) (string, string, error) {
	strategy := req.Strategy
	if strategy == "" && a.version >= 150000 {
		strategy = DefaultStrategy
	}
	if strategy != "" && a.version < 150000 {
		return "", "", fmt.Errorf("%w: strategy %s needs postgres >= 15 (server_version_num %d)", enginetest.ErrInvalid, strategy, a.version)
	}
	pool := req.Pool
	if pool == 0 {
		pool = DefaultPool
	}
	key := enginetest.Key(req.Template, strategy, strconv.Itoa(max(pool, 0)))
	a.mu.Lock()
	tpl, ok := a.templates[key]
	if !ok {
		tpl = &template{name: "tpl_" + key[:16], strategy: strategy, failed: make(chan struct{})}
		if pool > 0 {
			tpl.ready = make(chan clone, pool)
		}
		a.templates[key] = tpl
	}
	a.mu.Unlock()
	tpl.once.Do(func() { tpl.err = a.build(tpl, req.Migrate) })
	if tpl.err != nil {
		return "", "", tpl.err
	}
	var c clone
	if tpl.ready == nil {
		c = a.clone(ctx, nil, tpl)
	} else {
		a.mu.Lock()
		failed := tpl.failed
		a.mu.Unlock()
		select {
		case c = <-tpl.ready:
			a.signal() // one to make again
		case <-failed:
			// The pool's clones fail for now: a clone of this test's
			// own, with an outcome of its own.
			c = a.clone(ctx, nil, tpl)
		case <-ctx.Done():
			return "", "", fmt.Errorf("waiting for a clone of %s: %w", tpl.name, ctx.Err())
		}
	}
	if c.err != nil {
		return "", "", c.err
	}
	url, err := enginetest.WithPath(a.admin, c.name)
	return c.name, url, err
}

// build creates the template, runs the migrations in it, closes it to
// connections, and hands its pool to the workers. It runs once per
// template in this process (sync.Once: concurrent first tests wait for
// the one build), and once per server across processes: under the
// template's advisory lock, a template another process built (closed to
// connections and marked as one) is used as it is, and what a build that
// died half-way left is dropped and built again.
func (a *postgresAlloc) build(tpl *template, migrate func(ctx context.Context, url string) error) error {
	ctx, cancel := context.WithTimeout(a.ctx, buildTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, a.admin)
	if err != nil {
		return fmt.Errorf("template %s: %w", tpl.name, err)
	}
	// Closing the session releases its advisory lock.
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", tpl.name); err != nil {
		return fmt.Errorf("template %s: lock: %w", tpl.name, err)
	}
	var done bool
	err = conn.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", tpl.name).Scan(&done)
	id := pgx.Identifier{tpl.name}.Sanitize()
	switch {
	case err == nil && done:
		return a.built(tpl)
	case err == nil:
		if _, err := conn.Exec(ctx, "DROP DATABASE "+id+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("template %s: drop a build that did not finish: %w", tpl.name, err)
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("template %s: %w", tpl.name, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+id); err != nil {
		return fmt.Errorf("template %s: %w", tpl.name, err)
	}
	if migrate != nil {
		url, err := enginetest.WithPath(a.admin, tpl.name)
		if err != nil {
			return err
		}
		if err := migrate(ctx, url); err != nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)")
			return fmt.Errorf("template %s: migrations: %w", tpl.name, err)
		}
	}
	// A clone needs the template to itself: no session of the migrations
	// may linger in it, and no test may connect to it by mistake.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+id+" WITH ALLOW_CONNECTIONS false IS_TEMPLATE true"); err != nil {
		return fmt.Errorf("template %s: %w", tpl.name, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", tpl.name); err != nil {
		return fmt.Errorf("template %s: %w", tpl.name, err)
	}
	return a.built(tpl)
}

// built hands a template that is ready to the workers.
func (a *postgresAlloc) built(tpl *template) error {
	a.mu.Lock()
	tpl.built = true
	a.mu.Unlock()
	a.signal()
	return nil
}

// signal wakes every idle worker to look for work.
func (a *postgresAlloc) signal() {
	for range a.workers {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// next claims the next job: a clone for a pool short of one, else a
// drop; a drop first when too many are pending. ok is false when there
// is nothing to do.
func (a *postgresAlloc) next() (tpl *template, drop string, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	popDrop := func() (*template, string, bool) {
		name := a.drops[0]
		a.drops = a.drops[1:]
		return nil, name, true
	}
	if len(a.drops) >= maxPendingDrops {
		return popDrop()
	}
	now := time.Now()
	for _, t := range a.templates {
		if t.built && t.ready != nil && len(t.ready)+t.inflight < cap(t.ready) && !now.Before(t.retryAt) {
			t.inflight++
			return t, "", true
		}
	}
	if len(a.drops) > 0 {
		return popDrop()
	}
	return nil, "", false
}

// worker refills pools and drops released databases until the allocator
// closes, on a connection of its own.
func (a *postgresAlloc) worker() {
	defer a.wg.Done()
	var conn *pgx.Conn
	defer func() { closeConn(conn) }()
	for a.ctx.Err() == nil {
		tpl, name, ok := a.next()
		switch {
		case !ok:
			select {
			case <-a.wake:
			case <-a.ctx.Done():
			}
		case tpl != nil:
			a.pool(tpl, a.clone(a.ctx, &conn, tpl))
		default:
			a.dropNow(&conn, name)
		}
	}
}

// pool puts a worker's clone in tpl's pool. A failed clone is not put
// there: its error belongs to that moment (a busy template, a terminated
// backend), and the test that popped it later would fail for it. The
// workers try again after a back-off, and the tests waiting for the pool
// are told, so that each makes a clone of its own.
func (a *postgresAlloc) pool(tpl *template, c clone) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tpl.inflight--
	if c.err == nil {
		tpl.ready <- c // never blocks: a slot was claimed
		tpl.backoff = 0
		return
	}
	if a.ctx.Err() != nil {
		return // closing: nobody waits any more
	}
	if now := time.Now(); !now.Before(tpl.retryAt) {
		// Once per round: the other clones in flight that fail too
		// belong to this round, and do not double the delay again.
		tpl.backoff = min(max(2*tpl.backoff, minRetry), maxRetry)
		tpl.retryAt = now.Add(tpl.backoff)
		time.AfterFunc(tpl.backoff, a.signal)
	}
	close(tpl.failed)
	tpl.failed = make(chan struct{})
	slog.Warn("postgrestest: a pool clone failed; trying again", "template", tpl.name, "retry_in", tpl.backoff, "err", c.err)
}

// connected returns *conn, (re)connected as needed.
func (a *postgresAlloc) connected(ctx context.Context, conn **pgx.Conn) (*pgx.Conn, error) {
	if *conn == nil || (*conn).IsClosed() {
		c, err := pgx.Connect(ctx, a.admin)
		if err != nil {
			return nil, err
		}
		*conn = c
	}
	return *conn, nil
}

// clone creates a database from tpl on *conn (a connection of its own
// when conn is nil).
func (a *postgresAlloc) clone(ctx context.Context, conn **pgx.Conn, tpl *template) clone {
	ctx, cancel := context.WithTimeout(ctx, cloneTimeout)
	defer cancel()
	if conn == nil {
		var own *pgx.Conn
		defer func() { closeConn(own) }()
		conn = &own
	}
	c, err := a.connected(ctx, conn)
	if err != nil {
		return clone{err: fmt.Errorf("clone of %s: %w", tpl.name, err)}
	}
	name := fmt.Sprintf("t_%s_%s_%d", tpl.name[4:12], a.tag, a.seq.Add(1))
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{tpl.name}.Sanitize()
	if tpl.strategy != "" {
		sql += " STRATEGY " + tpl.strategy
	}
	if _, err := c.Exec(ctx, sql); err != nil {
		return clone{err: fmt.Errorf("clone of %s: %w", tpl.name, err)}
	}
	return clone{name: name}
}

// Release queues the database's drop for the workers.
func (a *postgresAlloc) Release(_ context.Context, name string) error {
	a.mu.Lock()
	a.drops = append(a.drops, name)
	a.mu.Unlock()
	a.signal()
	return nil
}

// dropNow drops a released database, ending the sessions a test left in
// it. Nobody waits for it: a failure is logged.
func (a *postgresAlloc) dropNow(conn **pgx.Conn, name string) {
	ctx, cancel := context.WithTimeout(a.ctx, cloneTimeout)
	defer cancel()
	c, err := a.connected(ctx, conn)
	if err == nil {
		_, err = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	}
	if err != nil && a.ctx.Err() == nil { // else the shared sandbox is going away
		slog.Warn("postgrestest: drop of a test's database", "db", name, "err", err)
	}
}

// closeConn closes conn (if any), bounded: the server may be gone.
func closeConn(conn *pgx.Conn) {
	if conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = conn.Close(ctx)
}

// Close stops the workers, once the ones at work are done.
func (a *postgresAlloc) Close() {
	a.cancel()
	a.wg.Wait()
}

// Tidy stops the workers and drops, within ctx, the clones made ahead and
// the released databases whose drop is pending: the templates stay, for
// the other processes that share the server.
func (a *postgresAlloc) Tidy(ctx context.Context) error {
	a.Close()
	a.mu.Lock()
	names := a.drops
	a.drops = nil
	for _, t := range a.templates {
		for len(t.ready) > 0 {
			if c := <-t.ready; c.err == nil {
				names = append(names, c.name)
			}
		}
	}
	a.mu.Unlock()
	if len(names) == 0 {
		return nil
	}
	conn, err := pgx.Connect(ctx, a.admin)
	if err != nil {
		return fmt.Errorf("drop %d databases made ahead or released: %w", len(names), err)
	}
	defer closeConn(conn)
	var errs []error
	for _, name := range names {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			errs = append(errs, fmt.Errorf("drop %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
