// Package redistest is the redis engine's test kit (enginetest.Kit) and
// its test helpers: Sandbox (a redis sandbox per test) and DB (a logical
// database per test on one shared redis sandbox per run of test binaries).
// Importing it is what links redis and go-redis into a test binary:
// sandboxtest alone links postgres only.
//
//	func TestCache(t *testing.T) {
//		db := redistest.DB(t) // redis://…/N, flushed when the test ends
//		...
//	}
package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/engines/redis"
	"github.com/roboco/sandboxer/internal/ids"
)

func init() { enginetest.Register(Kit{}) }

// Kit is the redis engine's test kit.
type Kit struct{}

// Engine is the redis engine.
func (Kit) Engine() engines.Engine { return redis.Engine{} }

// databases is how many logical databases a shared server has: one per
// parallel test, database 0 being the server's own.
const databases = 1024

// SharedArgs give a shared server a logical database per parallel test.
func (Kit) SharedArgs() []string { return []string{"--databases", strconv.Itoa(databases)} }

// NewAllocator hands out the logical databases of the shared server at
// rawURL.
func (Kit) NewAllocator(rawURL string) (enginetest.Allocator, error) {
	opts, err := goredis.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	a := &alloc{url: rawURL, c: goredis.NewClient(opts), id: ids.Hex(8), free: make(chan int, databases-1)}
	// Each allocator tries the databases in an order of its own, so that
	// allocators of several processes seldom race for the same claim.
	for _, db := range rand.Perm(databases - 1) {
		a.free <- db + 1
	}
	return a, nil
}

// claimPoll is how often Acquire looks again when every logical database
// is claimed.
const claimPoll = 20 * time.Millisecond

// alloc hands out the shared redis server's logical databases, one per
// test: database 0 stays the server's own, the others are free until
// handed out, and go back flushed. Allocators of several processes may
// share the server: a database is handed out once its claim (a key in
// database 0, set if absent) is this allocator's, and its claim is
// deleted once it is flushed. A process killed with databases handed out
// leaves them claimed until the server goes.
type alloc struct {
	url  string
	c    *goredis.Client
	id   string // this allocator's claims' value
	free chan int
}

// claimKey is the key in database 0 that claims logical database db.
func claimKey(db int) string { return "sandboxtest:claim:" + strconv.Itoa(db) }

// Acquire hands out a free logical database; req asks nothing of redis.
func (a *alloc) Acquire(ctx context.Context, _ enginetest.Request) (string, string, error) {
	for {
		// Each database this allocator holds free is tried once a round:
		// one claimed by another process goes back to the end.
		for range len(a.free) {
			var db int
			select {
			case db = <-a.free:
			default:
			}
			if db == 0 {
				break
			}
			ok, err := a.c.SetNX(ctx, claimKey(db), a.id, 0).Result()
			if err != nil {
				a.free <- db
				return "", "", fmt.Errorf("claim of database %d: %w", db, err)
			}
			if ok {
				name := strconv.Itoa(db)
				url, err := enginetest.WithPath(a.url, name)
				return name, url, err
			}
			a.free <- db
		}
		t := time.NewTimer(claimPoll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", "", fmt.Errorf("every logical database is in use (%d): %w", cap(a.free), ctx.Err())
		}
	}
}

// Release flushes the database and makes it free again; one whose flush
// failed is never handed out again.
func (a *alloc) Release(ctx context.Context, name string) error {
	db, err := strconv.Atoi(name)
	if err != nil {
		return err
	}
	conn := a.c.Conn()
	defer conn.Close()
	// The connection goes back to the client's pool on database 0.
	if _, err := conn.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.Select(ctx, db)
		p.FlushDB(ctx)
		p.Select(ctx, 0)
		return nil
	}); err != nil {
		return fmt.Errorf("flush of database %d: %w", db, err)
	}
	if err := conn.Del(ctx, claimKey(db)).Err(); err != nil {
		return fmt.Errorf("release of database %d's claim: %w", db, err)
	}
	a.free <- db
	return nil
}

// Tidy has nothing to return: a release flushes the database and drops
// its claim at once.
func (a *alloc) Tidy(context.Context) error { return nil }

// Close closes the allocator's client.
func (a *alloc) Close() { _ = a.c.Close() }

// CLILogin pings with redis-cli at the URL (which names its user,
// default: see redis.User).
func (Kit) CLILogin() (string, string) {
	return `exec redis-cli -u "$URL" --no-auth-warning ping`, "PONG"
}

// client is a go-redis client for rawURL with retries off.
func client(rawURL string) (*goredis.Client, error) {
	opts, err := goredis.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	opts.MaxRetries = -1
	return goredis.NewClient(opts), nil
}

// Fill sets keys of chunk bytes, 64 to a pipeline, until a SET fails with
// "OOM command not allowed" (maxmemory reached under noeviction).
func (Kit) Fill(ctx context.Context, rawURL string, chunk int, limit int64) (enginetest.FillResult, error) {
	var res enginetest.FillResult
	c, err := client(rawURL)
	if err != nil {
		return res, engines.LoginError("redis", rawURL, err)
	}
	defer c.Close()
	gen := enginetest.NewPayloads()
	for res.Bytes < limit {
		const perPipe = 64
		cmds, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := range int64(perPipe) {
				p.Set(ctx, fmt.Sprintf("%s:%d", enginetest.FillTable, res.Records+i), gen.Next(chunk), 0)
			}
			return nil
		})
		for _, cmd := range cmds {
			if e := cmd.Err(); e != nil {
				if strings.HasPrefix(e.Error(), "OOM ") {
					res.Full = enginetest.Full(e)
					return res, nil
				}
				return res, fmt.Errorf("redis: fill after %d bytes: %w", res.Bytes, e)
			}
			res.Records++
			res.Bytes += int64(chunk)
		}
		if err != nil {
			return res, fmt.Errorf("redis: fill after %d bytes: %w", res.Bytes, err)
		}
	}
	return res, nil
}

// Count counts the keys Fill left (DBSIZE: Fill writes to an otherwise
// empty database).
func (Kit) Count(ctx context.Context, rawURL string) (int64, error) {
	c, err := client(rawURL)
	if err != nil {
		return 0, engines.LoginError("redis", rawURL, err)
	}
	defer c.Close()
	n, err := c.DBSize(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("redis: count: %w", err)
	}
	return n, nil
}
