package faults

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/docker"
)

// TestDaemonRestartDuringProvision restarts the runtime daemon while a
// provision of postgres and redis is in flight (postgres started, not yet
// ready), once as a crash (SIGKILL) and once as a graceful restart
// (SIGTERM). Against a private dockerd the test starts itself: the shared
// daemon is never touched. Host mode, on the private daemon's own bridge. The provision fails with a clear error (which
// service, which container, not ready or runtime unavailable), and a
// janitor sweep after the grace window leaves no sandbox container.
func TestDaemonRestartDuringProvision(t *testing.T) {
	testkit.RequireRuntime(t)
	testenv.Load()
	images := map[string]string{}
	for _, s := range []string{"postgres", "redis"} {
		images[s] = testenv.Image(t, docker.Name, s)
	}
	d := startPrivateDockerd(t)
	rt, err := docker.New(docker.WithHost(d.host))
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	ctx := testkit.Context(t, 5*time.Minute)
	d.pull(ctx, rt, images["postgres"], images["redis"])

	// Over the wire, a provision may finish during a graceful restart:
	// dockerd stops its containers only after it stopped answering, and
	// the servers answer logins until then. The exec probe needs the
	// daemon, so a restart always cuts it.
	cases := []struct {
		name      string
		sig       syscall.Signal
		readiness provision.Readiness
		mayFinish bool
	}{
		{"Crash", syscall.SIGKILL, provision.ReadinessExec, false},
		{"GracefulRestart", syscall.SIGTERM, provision.ReadinessExec, false},
		{"CrashWire", syscall.SIGKILL, provision.ReadinessWire, true},
		{"GracefulRestartWire", syscall.SIGTERM, provision.ReadinessWire, true},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			prefix := "sbxrestart" + testkit.RandomHex(3)
			testkit.CleanupLabelled(t, rt, labels.For(prefix).Sandboxes())

			started := make(chan struct{})
			var once sync.Once
			p, err := provision.New(rt, provision.Options{
				LabelPrefix: prefix,
				Images:      images,
				Getenv:      func(string) string { return "" },
				Readiness:   tt.readiness,
				// Cold: a warm sandbox the restart kills is retried cold once
				// the daemon is back (warm start's fallback, tested in
				// integration), which is not what this test is about.
				Warm: provision.WarmOff,
				OnEvent: func(ev provision.Event) {
					if ev.Kind == provision.EventStarted && ev.Service == "postgres" {
						once.Do(func() { close(started) })
					}
				},
			})
			require.NoError(t, err)

			type result struct {
				err     error
				elapsed time.Duration
			}
			done := make(chan result, 1)
			begin := time.Now()
			go func() {
				_, err := p.Provision(ctx, "restart", []string{"postgres", "redis"})
				done <- result{err, time.Since(begin)}
			}()
			select {
			case <-started:
			case res := <-done:
				require.Failf(t, "the provision ended before postgres started", "%v", res.err)
			case <-time.After(2 * time.Minute):
				require.Fail(t, "postgres never started")
			}
			select {
			case res := <-done:
				require.Failf(t, "the provision completed before the restart", "%v", res.err)
			default:
			}
			restartAt := time.Now()
			d.restart(tt.sig)
			t.Logf("%s: dockerd back after %s", tt.name, time.Since(restartAt).Round(time.Millisecond))

			var res result
			select {
			case res = <-done:
			case <-time.After(3 * time.Minute):
				require.Fail(t, "the provision did not return after the restart")
			}
			t.Logf("provision returned after %s: %v", res.elapsed.Round(time.Millisecond), res.err)
			if res.err == nil && tt.mayFinish {
				// It finished before dockerd stopped its sandboxes; the
				// restart stopped them after: none runs now.
				cs, err := rt.List(ctx, labels.For(prefix).Sandboxes())
				require.NoError(t, err)
				require.NotEmpty(t, cs)
				for _, c := range cs {
					assert.False(t, c.Running(), "%s survived the daemon's restart", c.Name)
				}
				t.Logf("%s: the provision finished before the restart stopped its sandboxes", tt.name)
			} else {
				require.Error(t, res.err, "a provision cut by a daemon restart cannot succeed: its sandboxes were stopped")
			}
			if res.err != nil {
				var pe *provision.Error
				require.ErrorAs(t, res.err, &pe, "one error that names the service")
				assert.Contains(t, []string{"postgres", "redis"}, pe.Service)
				assert.Contains(t, res.err.Error(), pe.Container, "the message names the container")
				assert.True(t, errAny(res.err, provision.ErrNotReady, runtime.ErrUnavailable),
					"the kind says what happened (not ready, or runtime unavailable): %v", res.err)
				if pe.Rollback != nil {
					t.Logf("rollback could not finish (the sweep's job): %v", pe.Rollback)
				}
			}

			const grace = time.Second
			j, err := janitor.New(rt, janitor.Options{Prefix: prefix, Grace: grace})
			require.NoError(t, err)
			var swept []string
			testkit.Poll(t, grace+time.Minute, 200*time.Millisecond, func() error {
				rep, err := j.Sweep(ctx)
				require.NoError(t, err)
				require.Empty(t, rep.Kept, "nobody owns these sandboxes")
				for _, s := range rep.Removed {
					swept = append(swept, s.Name)
				}
				cs, err := rt.List(ctx, labels.For(prefix).Sandboxes())
				require.NoError(t, err)
				if len(cs) > 0 {
					return fmt.Errorf("left: %v", testkit.Names(cs))
				}
				return nil
			}, "sandbox containers left after sweeps")
			t.Logf("the sweeps removed %v", swept)
			all, err := rt.List(ctx, nil)
			require.NoError(t, err)
			assert.Empty(t, testkit.Names(all), "no container at all is left on the private daemon")
		})
	}
}
