package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/poll"
)

// Poll calls cond on the test's goroutine (so that cond may use require),
// at once and then every interval, until it returns nil. When timeout
// passes first, it fails the test with cond's last error and msgAndArgs
// (a message, or a format and its arguments, as testify takes them). A
// cond returns an error that says what it saw instead, so that a timeout
// reads as a diagnosis.
func Poll(t testing.TB, timeout, interval time.Duration, cond func() error, msgAndArgs ...any) {
	t.Helper()
	if err := poll.Until(context.Background(), timeout, interval, cond); err != nil {
		require.Fail(t, err.Error(), msgAndArgs...)
	}
}
