package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/poll"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// startTogether runs fn(i) for i in [0, n) on n goroutines released at the
// same instant, and waits for all of them.
func startTogether(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-gate
			fn(i)
		}()
	}
	ready.Wait()
	close(gate)
	done.Wait()
}

// loginAll logs in once, with no retry, to every sandbox of sb with its
// engine's real client and the URL sb emitted for it: the env and the
// containers belong together.
func loginAll(ctx context.Context, sb provision.Sandbox) error {
	var errs []error
	for _, c := range sb.Containers {
		if _, err := testruntimes.Login(ctx, sb, c); err != nil {
			errs = append(errs, fmt.Errorf("%s at %s:%d: first login: %w (%s)", c.Name, c.Endpoint.Host, c.Endpoint.Port, err, diagnose(ctx, sb, c)))
		}
	}
	return errors.Join(errs...)
}

// diagnose says, after a failed first login, whether the sandbox's port
// accepts connections at all and whether a login succeeds a little later:
// the difference between readiness reported early and a port that leads
// elsewhere.
func diagnose(ctx context.Context, sb provision.Sandbox, c provision.Container) string {
	addr := net.JoinHostPort(c.Endpoint.Host, strconv.Itoa(c.Endpoint.Port))
	dial := "accepts TCP"
	if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err != nil {
		dial = "refuses TCP: " + err.Error()
	} else {
		conn.Close()
	}
	start := time.Now()
	err := poll.Until(ctx, 10*time.Second, 500*time.Millisecond, func() error {
		_, err := testruntimes.Login(ctx, sb, c)
		return err
	})
	if err != nil {
		return fmt.Sprintf("%s; logins for 10 s after fail too: %v", dial, err)
	}
	return fmt.Sprintf("%s; a login %s later succeeds", dial, time.Since(start).Round(time.Millisecond))
}

// TestConcurrentDistinctOwners: 20 owners provision and tear down at the
// same time. Each gets its own working sandbox (its env logs in to its
// own containers), each teardown removes exactly its owner's, and nothing
// is left at the end.
func TestConcurrentDistinctOwners(t *testing.T) {
	const owners = 20
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := testruntimes.NewWorld(t, b)
		ctx := testkit.Context(t, 5*time.Minute)
		e.Warm()
		p := e.Provisioner(nil)
		services := []string{"redis"}

		errs := make([]error, owners)
		start := time.Now()
		startTogether(owners, func(i int) {
			id := fmt.Sprintf("own%02d", i)
			sb, err := p.Provision(ctx, id, services)
			if err != nil {
				errs[i] = fmt.Errorf("provision: %w", err)
				return
			}
			var problems []error
			for _, c := range sb.Containers {
				got, err := b.RT.Inspect(ctx, c.ID)
				switch {
				case err != nil:
					problems = append(problems, err)
				case got.Labels[p.Labels().Owner] != p.OwnerName(id):
					problems = append(problems, fmt.Errorf("%s is labelled for owner %q", c.Name, got.Labels[p.Labels().Owner]))
				case !got.Running():
					problems = append(problems, fmt.Errorf("%s is %s", c.Name, got.State))
				}
			}
			problems = append(problems, loginAll(ctx, sb))
			removed, err := p.Teardown(ctx, id)
			if err != nil {
				problems = append(problems, fmt.Errorf("teardown: %w", err))
			}
			if len(removed) != len(sb.Containers) {
				problems = append(problems, fmt.Errorf("teardown removed %d containers, provisioned %d", len(removed), len(sb.Containers)))
			}
			for _, r := range removed {
				if r.Labels[p.Labels().Owner] != p.OwnerName(id) {
					problems = append(problems, fmt.Errorf("teardown of %s removed %s of %q", id, r.Name, r.Labels[p.Labels().Owner]))
				}
			}
			errs[i] = errors.Join(problems...)
		})
		t.Logf("%d owners provisioned, checked and tore down at once in %s", owners, time.Since(start).Round(time.Millisecond))
		for i, err := range errs {
			assert.NoError(t, err, "owner %d", i)
		}
		assert.Empty(t, e.SandboxNames(ctx), "zero leaks")
	})
}

// TestConcurrentSameOwner: 5 provisions of the same owner at once. The
// outcome is never a mix: either exactly one call succeeds and the owner's
// containers are exactly that call's (all running, its env logs in to
// them), or none succeeds and the owner has nothing; every other call
// fails with a clear conflict error. One service: exactly one call wins.
func TestConcurrentSameOwner(t *testing.T) {
	const calls = 5
	cases := []struct {
		name     string
		services []string
		// exactlyOne: with a single service, the first Run wins and
		// nothing can undo it.
		exactlyOne bool
	}{
		{"OneService", []string{"redis"}, true},
		{"TwoServices", []string{"postgres", "redis"}, false},
	}
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		for _, tt := range cases {
			t.Run(tt.name, func(t *testing.T) {
				e := testruntimes.NewWorld(t, b)
				ctx := testkit.Context(t, 5*time.Minute)
				e.Warm()
				p := e.Provisioner(nil)
				const id = "same"

				sbs := make([]provision.Sandbox, calls)
				errs := make([]error, calls)
				startTogether(calls, func(i int) {
					sbs[i], errs[i] = p.Provision(ctx, id, tt.services)
				})

				var winners []int
				for i, err := range errs {
					if err == nil {
						winners = append(winners, i)
						continue
					}
					t.Logf("call %d: %v", i, err)
					assert.ErrorIs(t, err, provision.ErrConflict, "call %d fails with a conflict", i)
					var pe *provision.Error
					if assert.ErrorAs(t, err, &pe, "call %d", i) {
						assert.Contains(t, err.Error(), pe.Container, "the message names the contested container")
						assert.NoError(t, pe.Rollback, "call %d rolled back cleanly", i)
					}
				}
				require.LessOrEqual(t, len(winners), 1, "at most one call succeeds")
				if tt.exactlyOne {
					require.Len(t, winners, 1, "exactly one call succeeds")
				}

				owned, err := b.RT.List(ctx, map[string]string{p.Labels().Owner: p.OwnerName(id)})
				require.NoError(t, err)
				if len(winners) == 0 {
					t.Logf("no call won: every one hit a conflict")
					assert.Empty(t, testkit.Names(owned), "no winner: the owner has nothing")
				} else {
					sb := sbs[winners[0]]
					t.Logf("call %d won: %v", winners[0], testkit.Names(owned))
					want := map[string]bool{}
					for _, c := range sb.Containers {
						want[c.ID] = true
					}
					got := map[string]bool{}
					calls := map[string]bool{}
					for _, c := range owned {
						got[c.ID] = true
						calls[c.Labels[p.Labels().Call]] = true
						assert.Equal(t, runtime.StateRunning, c.State, "%s", c.Name)
					}
					assert.Equal(t, want, got, "the owner's containers are exactly the winner's")
					assert.Len(t, calls, 1, "all made by one call")
					assert.NoError(t, loginAll(ctx, sb), "the winner's env logs in to them")
				}

				_, err = p.Teardown(ctx, id)
				require.NoError(t, err)
				assert.Empty(t, e.SandboxNames(ctx), "zero leaks")
			})
		}
	})
}
