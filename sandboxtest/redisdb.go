package sandboxtest

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// redisAlloc hands out the shared redis server's logical databases, one
// per test: database 0 stays the server's own, the others are free until
// handed out, and go back flushed.
type redisAlloc struct {
	url  string
	c    *redis.Client
	free chan int
}

// newRedisAlloc is the allocator of the server at rawURL, started with
// args ("--databases", N).
func newRedisAlloc(rawURL string, args []string) (*redisAlloc, error) {
	i := slices.Index(args, "--databases")
	if i < 0 || i+1 >= len(args) {
		return nil, fmt.Errorf("no --databases in the server's arguments %q", args)
	}
	n, err := strconv.Atoi(args[i+1])
	if err != nil || n < 2 {
		return nil, fmt.Errorf("bad --databases %q", args[i+1])
	}
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	a := &redisAlloc{url: rawURL, c: redis.NewClient(opts), free: make(chan int, n-1)}
	for db := 1; db < n; db++ {
		a.free <- db
	}
	return a, nil
}

func (a *redisAlloc) acquire(ctx context.Context, _ DBOptions) (string, string, error) {
	select {
	case db := <-a.free:
		name := strconv.Itoa(db)
		url, err := withPath(a.url, name)
		return name, url, err
	case <-ctx.Done():
		return "", "", fmt.Errorf("every logical database is in use (%d): %w", cap(a.free), ctx.Err())
	}
}

// release flushes the database and makes it free again; one whose flush
// failed is never handed out again.
func (a *redisAlloc) release(ctx context.Context, name string) error {
	db, err := strconv.Atoi(name)
	if err != nil {
		return err
	}
	conn := a.c.Conn()
	defer conn.Close()
	// The connection goes back to the client's pool on database 0.
	if _, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Select(ctx, db)
		p.FlushDB(ctx)
		p.Select(ctx, 0)
		return nil
	}); err != nil {
		return fmt.Errorf("flush of database %d: %w", db, err)
	}
	a.free <- db
	return nil
}

func (a *redisAlloc) close() { _ = a.c.Close() }
