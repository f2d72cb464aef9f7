package sandboxtest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/engines/postgres/postgrestest"
	"github.com/roboco/sandboxer/engines/redis/redistest"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/sandboxtest"
)

// TestAllocatorsShareAServer: two allocators on one server, as two test
// binaries of a run have, never hand out the same database. Redis: the
// logical databases one has claimed the other never hands out, and hands
// out once released. Postgres: a template is built once for both, and their clones'
// names differ.
func TestAllocatorsShareAServer(t *testing.T) {
	t.Run("Redis", func(t *testing.T) {
		opts, _ := onDocker(t, "redis")
		// The shared server, with its logical databases; this process's
		// own allocator holds one of them.
		db := sandboxtest.NewDB(t, "redis", sandboxtest.DBOptions{Options: opts})
		server, err := enginetest.WithPath(db.URL, "0")
		require.NoError(t, err)
		a, err := redistest.Kit{}.NewAllocator(server)
		require.NoError(t, err)
		defer a.Close()
		b, err := redistest.Kit{}.NewAllocator(server)
		require.NoError(t, err)
		defer b.Close()
		ctx := testkit.Context(t, 2*time.Minute)
		seen := map[string]bool{db.Name: true}
		var last string
		for i := 0; ; i++ {
			alloc := a
			if i%2 == 1 {
				alloc = b
			}
			short, cancel := context.WithTimeout(ctx, time.Second)
			name, _, err := alloc.Acquire(short, enginetest.Request{})
			cancel()
			if err != nil {
				require.ErrorIs(t, err, context.DeadlineExceeded)
				break
			}
			require.False(t, seen[name], "database %s handed out twice", name)
			seen[name], last = true, name
		}
		assert.Len(t, seen, 1023, "every logical database but 0 handed out, once")
		require.NoError(t, b.Release(ctx, last))
		name, _, err := a.Acquire(ctx, enginetest.Request{})
		require.NoError(t, err)
		assert.Equal(t, last, name, "a database another allocator released is handed out again")
	})
	t.Run("Postgres", func(t *testing.T) {
		opts, _ := onDocker(t, "postgres")
		sb := sandboxtest.StartWith(t, opts, "postgres")
		var migrated atomic.Int32
		req := enginetest.Request{Template: enginetest.Key("shared"), Pool: 2, Migrate: func(ctx context.Context, url string) error {
			migrated.Add(1)
			return nil
		}}
		ctx := testkit.Context(t, 2*time.Minute)
		seen := map[string]bool{}
		for range 2 {
			alloc, err := postgrestest.Kit{}.NewAllocator(sb.DSN("postgres"))
			require.NoError(t, err)
			for range 3 {
				name, _, err := alloc.Acquire(ctx, req)
				require.NoError(t, err)
				require.False(t, seen[name], "database %s handed out twice", name)
				seen[name] = true
			}
			require.NoError(t, alloc.Tidy(ctx))
			alloc.Close()
		}
		assert.Equal(t, int32(1), migrated.Load(), "the template is built once per server, not per allocator")
	})
}
