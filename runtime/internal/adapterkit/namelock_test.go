package adapterkit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNameLocksSerialiseOneNameOnly: holders of one name never overlap,
// another name is taken while the first is held, a waiter gives up with
// its context, and no lock is left once every holder has gone.
func TestNameLocksSerialiseOneNameOnly(t *testing.T) {
	var l NameLocks
	ctx := context.Background()
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := l.Lock(ctx, "a")
			if !assert.NoError(t, err) {
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			inside.Add(-1)
			unlock()
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), most.Load(), "holders of one name at once")

	unlockA, err := l.Lock(ctx, "a")
	require.NoError(t, err)
	unlockB, err := l.Lock(ctx, "b")
	require.NoError(t, err, "another name while a is held")
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = l.Lock(short, "a")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "a waiter gives up with its context")
	unlockA()
	unlockB()
	l.mu.Lock()
	assert.Empty(t, l.locks, "no lock left once every holder has gone")
	l.mu.Unlock()
}
