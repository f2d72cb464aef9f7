// Package poll waits for a condition with a deadline: the one polling loop
// that sandboxer's tests (through internal/testkit) and its bench share,
// so that nothing waits with a bare sleep and every wait says, when it
// gives up, what it last saw.
package poll

import (
	"context"
	"fmt"
	"time"
)

// Until calls cond on the caller's goroutine, at once and then interval
// after each call returns, until cond returns nil; Until then returns nil.
// It returns an error wrapping cond's last error once timeout has passed
// since the first call, or ctx's error (with cond's last error in the
// message) when ctx ends first. Every call of cond is made before the
// deadline, so a cond that blocks is bounded by its own context, not by
// Until.
func Until(ctx context.Context, timeout, interval time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("not within %s: %w", timeout, err)
		}
		t := time.NewTimer(min(interval, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}
