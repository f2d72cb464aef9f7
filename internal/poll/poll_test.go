package poll_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/poll"
)

func TestUntil(t *testing.T) {
	errNotYet := errors.New("not yet")
	t.Run("ReturnsOnceCondHolds", func(t *testing.T) {
		calls := 0
		err := poll.Until(context.Background(), time.Minute, time.Millisecond, func() error {
			calls++
			if calls < 3 {
				return errNotYet
			}
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, 3, calls)
	})
	t.Run("TimeoutWrapsTheLastError", func(t *testing.T) {
		start := time.Now()
		err := poll.Until(context.Background(), 50*time.Millisecond, 10*time.Millisecond, func() error { return errNotYet })
		require.ErrorIs(t, err, errNotYet)
		assert.Contains(t, err.Error(), "not within 50ms")
		assert.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("ContextEndsTheWait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := poll.Until(ctx, time.Hour, time.Hour, func() error {
			calls++
			cancel()
			return errNotYet
		})
		require.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), "not yet", "the last error is in the message")
		assert.Equal(t, 1, calls)
	})
	t.Run("AtLeastOneCall", func(t *testing.T) {
		calls := 0
		require.NoError(t, poll.Until(context.Background(), 0, time.Hour, func() error { calls++; return nil }))
		assert.Equal(t, 1, calls)
	})
}
