package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/docker"
)

func janNames(sbs []janitor.Sandbox) []string {
	out := []string{}
	for _, s := range sbs {
		out = append(out, s.Name)
	}
	return out
}

func janContainerNames(sb provision.Sandbox) []string {
	out := []string{}
	for _, c := range sb.Containers {
		out = append(out, c.Name)
	}
	return out
}

// created returns the runtime's precise creation time of each container
// (inspect has nanoseconds; list, which the janitor reads, only seconds).
func (e env) created(ctx context.Context, ids ...string) map[string]time.Time {
	e.T().Helper()
	out := map[string]time.Time{}
	for _, id := range ids {
		c, err := e.RT.Inspect(ctx, id)
		require.NoError(e.T(), err)
		out[c.Name] = c.Created
	}
	return out
}

// sweepUntilRemoved sweeps every interval until a sweep removes
// something. It checks the grace window against the runtime's precise
// creation times: a sweep that ended before a sandbox was grace old must
// have skipped it, never judged it.
func sweepUntilRemoved(ctx context.Context, t *testing.T, j *janitor.Janitor, grace time.Duration, created map[string]time.Time) janitor.Report {
	t.Helper()
	var rep janitor.Report
	testkit.Poll(t, grace+30*time.Second, 100*time.Millisecond, func() error {
		var err error
		rep, err = j.Sweep(ctx)
		end := time.Now()
		require.NoError(t, err)
		for _, s := range append(rep.Removed, rep.Kept...) {
			require.GreaterOrEqual(t, s.Age, grace, "%s judged inside its grace window", s.Name)
			if c, ok := created[s.Name]; ok {
				require.GreaterOrEqual(t, end.Sub(c), grace, "%s judged %s after its creation", s.Name, end.Sub(c))
			}
		}
		if len(rep.Removed) == 0 {
			return fmt.Errorf("a sweep removed nothing: %s", rep)
		}
		return nil
	})
	return rep
}

// TestJanitorOrphanRemovedAfterGrace: a sandbox whose owner never appears
// is left alone while in grace, and removed by the first sweep after.
func TestJanitorOrphanRemovedAfterGrace(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// Long enough for the provision (a redis probe on a loaded 2-core
		// host, under other packages' tests) to end inside it, so that the
		// first sweep finds the sandbox in grace: 2 s was not (2.9 s seen).
		const grace = 6 * time.Second
		services := []string{"redis"}
		sb, err := e.Provisioner(nil).Provision(ctx, "orphan", services)
		require.NoError(t, err)
		created := e.created(ctx, sb.Containers[0].ID)
		j := e.Janitor(grace)

		rep, err := j.Sweep(ctx)
		require.NoError(t, err)
		assert.ElementsMatch(t, janContainerNames(sb), janNames(rep.Skipped), "in grace: skipped")
		assert.Empty(t, rep.Removed)
		assert.ElementsMatch(t, janContainerNames(sb), e.SandboxNames(ctx))

		rep = sweepUntilRemoved(ctx, t, j, grace, created)
		assert.ElementsMatch(t, janContainerNames(sb), janNames(rep.Removed))
		assert.Equal(t, e.Prefix+"-agent-orphan", rep.Removed[0].Owner.Name)
		assert.Empty(t, e.SandboxNames(ctx), "removed from the runtime")
	})
}

// TestJanitorRunningAgentKeepsItsSandboxes: a running container named
// after the owner keeps its sandboxes across sweeps; once it is gone, the
// next sweep removes them.
func TestJanitorRunningAgentKeepsItsSandboxes(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		const grace = time.Second
		services := []string{"postgres", "redis"}
		p := e.Provisioner(nil)
		agentID := e.Agent(ctx, p.OwnerName("kept"))
		sb, err := p.Provision(ctx, "kept", services)
		require.NoError(t, err)
		j := e.Janitor(grace)

		testkit.Poll(t, grace+30*time.Second, 100*time.Millisecond, func() error { // until both are past their grace...
			rep, err := j.Sweep(ctx)
			require.NoError(t, err)
			require.Empty(t, rep.Removed)
			if len(rep.Kept) != len(services) {
				return fmt.Errorf("a sweep kept %d of %d: %s", len(rep.Kept), len(services), rep)
			}
			return nil
		})
		for range 3 { // ...and then on every sweep
			rep, err := j.Sweep(ctx)
			require.NoError(t, err)
			assert.ElementsMatch(t, janContainerNames(sb), janNames(rep.Kept))
			assert.Empty(t, rep.Removed)
		}

		require.NoError(t, e.RT.Kill(ctx, agentID))
		require.NoError(t, e.RT.Remove(ctx, agentID))
		rep, err := j.Sweep(ctx)
		require.NoError(t, err)
		assert.ElementsMatch(t, janContainerNames(sb), janNames(rep.Removed), "the first sweep after the agent is gone")
		assert.Empty(t, e.SandboxNames(ctx))
	})
}

// TestJanitorLiveProcessOwnerKeepsItsSandboxes: sandboxes labelled with
// this test process's identity (as `sandboxer run` labels its own) are
// kept past the grace window while it lives, although no container is
// named after their owner.
func TestJanitorLiveProcessOwnerKeepsItsSandboxes(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		labels, err := lifetime.ProcessOwnerLabels(e.Prefix)
		require.NoError(t, err)
		const grace = time.Second
		services := []string{"redis"}
		sb, err := e.Provisioner(func(o *provision.Options) { o.Labels = labels }).Provision(ctx, "run", services)
		require.NoError(t, err)
		j := e.Janitor(grace)

		testkit.Poll(t, grace+30*time.Second, 100*time.Millisecond, func() error {
			rep, err := j.Sweep(ctx)
			require.NoError(t, err)
			require.Empty(t, rep.Removed)
			if len(rep.Kept) != 1 {
				return fmt.Errorf("a sweep kept %d: %s", len(rep.Kept), rep)
			}
			return nil
		})
		assert.ElementsMatch(t, janContainerNames(sb), e.SandboxNames(ctx))
	})
}

// TestJanitorSweepsDuringAnInFlightProvision: the race rule. Sweeps run
// back to back while a provision is in progress for an owner that does
// not exist yet; none may touch what the provision is creating.
func TestJanitorSweepsDuringAnInFlightProvision(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		services := engines.Default.Names()
		p := e.Provisioner(nil)
		j := e.Janitor(janitor.DefaultGrace)

		type result struct {
			sb  provision.Sandbox
			err error
		}
		done := make(chan result, 1)
		go func() {
			sb, err := p.Provision(ctx, "inflight", services)
			done <- result{sb, err}
		}()
		var sweeps, sawSkipped int
		var res result
		tick := time.NewTicker(20 * time.Millisecond) // sweeps back to back would only load the daemon
		defer tick.Stop()
		for finished := false; !finished; {
			select {
			case res = <-done:
				finished = true
			case <-tick.C:
			}
			rep, err := j.Sweep(ctx)
			require.NoError(t, err)
			sweeps++
			require.Empty(t, rep.Removed, "a sweep removed an in-flight provision's sandbox")
			require.Empty(t, rep.Kept)
			if len(rep.Skipped) > 0 {
				sawSkipped++
			}
		}
		require.NoError(t, res.err)
		t.Logf("%d sweeps during the provision, %d of them saw its sandboxes", sweeps, sawSkipped)
		assert.Positive(t, sawSkipped, "sweeps ran while the sandboxes existed")
		assert.ElementsMatch(t, janContainerNames(res.sb), e.SandboxNames(ctx), "all of them survived")
		for _, c := range res.sb.Containers {
			got, err := e.RT.Inspect(ctx, c.ID)
			require.NoError(t, err)
			assert.True(t, got.Running(), "%s running", c.Name)
		}
	})
}

// TestJanitorCleansUpAfterAKilledProvisioner: a process provisioning
// postgres, redis and mongo is SIGKILLed mid-provision; a sweep after the
// grace window leaves no container with this test's sandbox label. The
// provisioner labels its sandboxes with its own process identity, so this
// also proves the process-owner path: its pid is gone, they are orphans.
func TestJanitorCleansUpAfterAKilledProvisioner(t *testing.T) {
	e := newEnv(t, testruntimes.Connect(t, docker.Name)) // crashprov drives Docker
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	services := engines.Default.Names()
	env := os.Environ()
	for _, s := range services {
		env = append(env, provision.ImageEnvName(s)+"="+testenv.Image(t, e.Name, s))
	}

	bin := filepath.Join(t.TempDir(), "crashprov")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/roboco/sandboxer/internal/crashprov")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build crashprov: %s", out)

	cmd := exec.CommandContext(ctx, bin, "-prefix", e.Prefix, "-owner", "crash", "-services", strings.Join(services, ","))
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	testkit.Poll(t, time.Minute, 10*time.Millisecond, func() error {
		if len(e.SandboxNames(ctx)) == 0 {
			return errors.New("no sandbox yet")
		}
		return nil
	}, "the provisioner never created a container; stderr:\n%s", &stderr)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	waitErr := cmd.Wait()
	var exitErr *exec.ExitError
	require.ErrorAs(t, waitErr, &exitErr)
	ws, ok := exitErr.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "killed, not exited: %v", waitErr)
	for l := range lines {
		require.NotEqual(t, "provisioned", l, "the kill came after the provision completed: not a mid-provision crash")
	}
	left := e.SandboxNames(ctx)
	t.Logf("killed mid-provision with %d sandbox(es) created: %v", len(left), left)

	const grace = 2 * time.Second
	j := e.Janitor(grace)
	var removed []string
	testkit.Poll(t, grace+time.Minute, 100*time.Millisecond, func() error {
		rep, err := j.Sweep(ctx)
		require.NoError(t, err)
		require.Empty(t, rep.Kept, "the dead provisioner's sandboxes are nobody's")
		for _, s := range rep.Removed {
			require.GreaterOrEqual(t, s.Age, grace)
			require.False(t, s.Owner.Process.IsZero(), "%s is owned by the process", s.Name)
			removed = append(removed, s.Name)
		}
		if left := e.SandboxNames(ctx); len(rep.Skipped) > 0 || len(left) > 0 {
			return fmt.Errorf("left after a sweep: %v (%s)", left, rep)
		}
		return nil
	})
	assert.Subset(t, removed, left, "swept what the crash left")
	assert.Empty(t, e.SandboxNames(ctx), "no container carries this test's sandbox label")
}

// BenchmarkJanitorSweep50 times sweeps over 50 real sandbox containers
// (busybox stand-ins labelled as sandboxes): "kept" with their owner
// running (list + owner snapshot), "removed" with the owner gone (kill and
// remove all 50).
func BenchmarkJanitorSweep50(b *testing.B) {
	rt := testruntimes.Connect(b, docker.Name).RT
	ctx := context.Background()
	image := testkit.Image(b, rt, "busybox")
	prefix := "sbxbench" + testkit.RandomHex(4)
	owner := prefix + "-agent-1"
	testkit.CleanupLabelled(b, rt, map[string]string{prefix + ".test": "1"})
	seed := func() {
		var g errgroup.Group
		for i := range 50 {
			g.Go(func() error {
				_, err := rt.Run(ctx, runtime.RunSpec{
					Name:    fmt.Sprintf("%s-sandbox-bb-%d", prefix, i),
					Image:   image,
					Command: []string{"sleep", "3600"},
					Labels: map[string]string{
						labels.For(prefix).Sandbox: "1", labels.For(prefix).Owner: owner, prefix + ".test": "1",
					},
				})
				return err
			})
		}
		require.NoError(b, g.Wait())
	}
	seed()
	agent, err := rt.Run(ctx, runtime.RunSpec{Name: owner, Image: image, Command: []string{"sleep", "3600"}, Labels: map[string]string{prefix + ".test": "1"}})
	require.NoError(b, err)
	j, err := janitor.New(rt, janitor.Options{Prefix: prefix, Grace: time.Nanosecond})
	require.NoError(b, err)

	b.Run("kept", func(b *testing.B) {
		for b.Loop() {
			rep, err := j.Sweep(ctx)
			if err != nil || len(rep.Kept) != 50 {
				b.Fatalf("sweep: %v, %s", err, rep)
			}
		}
	})
	require.NoError(b, rt.Remove(ctx, agent.ID))
	b.Run("removed", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			if cs, _ := rt.List(ctx, labels.For(prefix).Sandboxes()); len(cs) == 0 {
				seed()
			}
			b.StartTimer()
			rep, err := j.Sweep(ctx)
			if err != nil || len(rep.Removed) != 50 {
				b.Fatalf("sweep: %v, %s", err, rep)
			}
		}
	})
}
