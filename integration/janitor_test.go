package integration

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
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

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/docker"
)

// janEnv is one janitor test's world on one runtime: a label prefix of
// its own (so that its sweeps never see another test's containers,
// concurrent packages included), and a cleanup that removes everything
// carrying it.
type janEnv struct {
	t      *testing.T
	name   string // the runtime's name, for testenv
	rt     runtime.ContainerRuntime
	prefix string
}

// testLabel marks the non-sandbox containers a test makes (its agents), as
// "<prefix>.test=1".
func (e *janEnv) testLabel() string { return e.prefix + ".test" }

func newJanEnv(t *testing.T, b testruntimes.Runtime) *janEnv {
	t.Helper()
	rnd := make([]byte, 4)
	_, _ = rand.Read(rnd)
	e := &janEnv{t: t, name: b.Name, rt: b.RT, prefix: "sbxtest" + hex.EncodeToString(rnd)}
	t.Cleanup(func() {
		testruntimes.RemoveLabelled(t, e.rt, labels.For(e.prefix).Sandboxes(), map[string]string{e.testLabel(): "1"})
	})
	return e
}

// provisioner returns a provisioner for this test's prefix, with the
// stand-in images of services.
func (e *janEnv) provisioner(services []string, labels map[string]string) *provision.Provisioner {
	e.t.Helper()
	images := map[string]string{}
	for _, s := range services {
		images[s] = testenv.Image(e.t, e.name, s)
	}
	p, err := provision.New(e.rt, provision.Options{LabelPrefix: e.prefix, Images: images, Labels: labels})
	require.NoError(e.t, err)
	return p
}

// agent runs a busybox stand-in named name that sleeps, as an agent would
// run, and returns its ID.
func (e *janEnv) agent(ctx context.Context, name string) string {
	e.t.Helper()
	c, err := e.rt.Run(ctx, runtime.RunSpec{
		Name:    name,
		Image:   testruntimes.EnsureImage(e.t, e.rt, testenv.Image(e.t, e.name, "busybox")),
		Command: []string{"sleep", "3600"},
		Labels:  map[string]string{e.testLabel(): "1"},
	})
	require.NoError(e.t, err)
	return c.ID
}

// sandboxes lists this test's sandbox containers by name.
func (e *janEnv) sandboxes(ctx context.Context) []string {
	e.t.Helper()
	cs, err := e.rt.List(ctx, labels.For(e.prefix).Sandboxes())
	require.NoError(e.t, err)
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func (e *janEnv) janitor(grace time.Duration) *janitor.Janitor {
	return janitor.New(e.rt, janitor.Options{Prefix: e.prefix, Grace: grace})
}

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
func (e *janEnv) created(ctx context.Context, ids ...string) map[string]time.Time {
	e.t.Helper()
	out := map[string]time.Time{}
	for _, id := range ids {
		c, err := e.rt.Inspect(ctx, id)
		require.NoError(e.t, err)
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
	testruntimes.Poll(t, func() bool {
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
		return len(rep.Removed) > 0
	}, grace+30*time.Second, 100*time.Millisecond)
	return rep
}

// TestJanitorOrphanRemovedAfterGrace: a sandbox whose owner never appears
// is left alone while in grace, and removed by the first sweep after.
func TestJanitorOrphanRemovedAfterGrace(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newJanEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		const grace = 2 * time.Second
		services := []string{"redis"}
		sb, err := e.provisioner(services, nil).Provision(ctx, "orphan", services)
		require.NoError(t, err)
		created := e.created(ctx, sb.Containers[0].ID)
		j := e.janitor(grace)

		rep, err := j.Sweep(ctx)
		require.NoError(t, err)
		assert.ElementsMatch(t, janContainerNames(sb), janNames(rep.Skipped), "in grace: skipped")
		assert.Empty(t, rep.Removed)
		assert.ElementsMatch(t, janContainerNames(sb), e.sandboxes(ctx))

		rep = sweepUntilRemoved(ctx, t, j, grace, created)
		assert.ElementsMatch(t, janContainerNames(sb), janNames(rep.Removed))
		assert.Equal(t, e.prefix+"-agent-orphan", rep.Removed[0].Owner.Name)
		assert.Empty(t, e.sandboxes(ctx), "removed from the runtime")
	})
}

// TestJanitorRunningAgentKeepsItsSandboxes: a running container named
// after the owner keeps its sandboxes across sweeps; once it is gone, the
// next sweep removes them.
func TestJanitorRunningAgentKeepsItsSandboxes(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newJanEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		const grace = time.Second
		services := []string{"postgres", "redis"}
		p := e.provisioner(services, nil)
		agentID := e.agent(ctx, p.OwnerName("kept"))
		sb, err := p.Provision(ctx, "kept", services)
		require.NoError(t, err)
		j := e.janitor(grace)

		testruntimes.Poll(t, func() bool { // until both are past their grace...
			rep, err := j.Sweep(ctx)
			require.NoError(t, err)
			require.Empty(t, rep.Removed)
			return len(rep.Kept) == len(services)
		}, grace+30*time.Second, 100*time.Millisecond)
		for range 3 { // ...and then on every sweep
			rep, err := j.Sweep(ctx)
			require.NoError(t, err)
			assert.ElementsMatch(t, janContainerNames(sb), janNames(rep.Kept))
			assert.Empty(t, rep.Removed)
		}

		require.NoError(t, e.rt.Kill(ctx, agentID))
		require.NoError(t, e.rt.Remove(ctx, agentID))
		rep, err := j.Sweep(ctx)
		require.NoError(t, err)
		assert.ElementsMatch(t, janContainerNames(sb), janNames(rep.Removed), "the first sweep after the agent is gone")
		assert.Empty(t, e.sandboxes(ctx))
	})
}

// TestJanitorLiveProcessOwnerKeepsItsSandboxes: sandboxes labelled with
// this test process's identity (as `sandboxer run` labels its own) are
// kept past the grace window while it lives, although no container is
// named after their owner.
func TestJanitorLiveProcessOwnerKeepsItsSandboxes(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newJanEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		labels, err := janitor.ProcessOwnerLabels(e.prefix)
		require.NoError(t, err)
		const grace = time.Second
		services := []string{"redis"}
		sb, err := e.provisioner(services, labels).Provision(ctx, "run", services)
		require.NoError(t, err)
		j := e.janitor(grace)

		testruntimes.Poll(t, func() bool {
			rep, err := j.Sweep(ctx)
			require.NoError(t, err)
			require.Empty(t, rep.Removed)
			return len(rep.Kept) == 1
		}, grace+30*time.Second, 100*time.Millisecond)
		assert.ElementsMatch(t, janContainerNames(sb), e.sandboxes(ctx))
	})
}

// TestJanitorSweepsDuringAnInFlightProvision: the race rule. Sweeps run
// back to back while a provision is in progress for an owner that does
// not exist yet; none may touch what the provision is creating.
func TestJanitorSweepsDuringAnInFlightProvision(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newJanEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		services := []string{"postgres", "redis", "mongo"}
		p := e.provisioner(services, nil)
		j := e.janitor(janitor.DefaultGrace)

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
		assert.ElementsMatch(t, janContainerNames(res.sb), e.sandboxes(ctx), "all of them survived")
		for _, c := range res.sb.Containers {
			got, err := e.rt.Inspect(ctx, c.ID)
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
	testenv.Load()
	e := newJanEnv(t, testruntimes.ConnectDocker(t)) // crashprov drives Docker
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	services := []string{"postgres", "redis", "mongo"}
	env := os.Environ()
	for _, s := range services {
		env = append(env, provision.ImageEnvName(s)+"="+testenv.Image(t, e.name, s))
	}

	bin := filepath.Join(t.TempDir(), "crashprov")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/roboco/sandboxer/internal/crashprov")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build crashprov: %s", out)

	cmd := exec.CommandContext(ctx, bin, "-prefix", e.prefix, "-owner", "crash", "-services", strings.Join(services, ","))
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

	testruntimes.Poll(t, func() bool { return len(e.sandboxes(ctx)) > 0 }, time.Minute, 10*time.Millisecond,
		"the provisioner never created a container; stderr:\n%s", &stderr)
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
	left := e.sandboxes(ctx)
	t.Logf("killed mid-provision with %d sandbox(es) created: %v", len(left), left)

	const grace = 2 * time.Second
	j := e.janitor(grace)
	var removed []string
	testruntimes.Poll(t, func() bool {
		rep, err := j.Sweep(ctx)
		require.NoError(t, err)
		require.Empty(t, rep.Kept, "the dead provisioner's sandboxes are nobody's")
		for _, s := range rep.Removed {
			require.GreaterOrEqual(t, s.Age, grace)
			require.False(t, s.Owner.Process.IsZero(), "%s is owned by the process", s.Name)
			removed = append(removed, s.Name)
		}
		return len(rep.Skipped) == 0 && len(e.sandboxes(ctx)) == 0
	}, grace+time.Minute, 100*time.Millisecond)
	assert.Subset(t, removed, left, "swept what the crash left")
	assert.Empty(t, e.sandboxes(ctx), "no container carries this test's sandbox label")
}

// BenchmarkJanitorSweep50 times sweeps over 50 real sandbox containers
// (busybox stand-ins labelled as sandboxes): "kept" with their owner
// running (list + owner snapshot), "removed" with the owner gone (kill and
// remove all 50).
func BenchmarkJanitorSweep50(b *testing.B) {
	testenv.Load()
	rt, err := docker.New()
	require.NoError(b, err)
	defer rt.Close()
	ctx := context.Background()
	if _, err := rt.Version(ctx); err != nil {
		testenv.Unavailable(b, "docker", "%v", err)
	}
	image := testruntimes.EnsureImage(b, rt, testenv.Image(b, "docker", "busybox"))
	rnd := make([]byte, 4)
	_, _ = rand.Read(rnd)
	prefix := "sbxbench" + hex.EncodeToString(rnd)
	owner := prefix + "-agent-1"
	b.Cleanup(func() {
		cs, _ := rt.List(context.Background(), map[string]string{prefix + ".test": "1"})
		for _, c := range cs {
			_ = rt.Remove(context.Background(), c.ID)
		}
	})
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
	j := janitor.New(rt, janitor.Options{Prefix: prefix, Grace: time.Nanosecond})

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
