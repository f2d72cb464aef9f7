package sandboxtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/poll"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/sandboxtest"
)

// runshareBinary compiles testdata/runshare, as `go test` compiles a
// package's test binary (from the build cache after the first time).
func runshareBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "runshare.test")
	ctx := testkit.Context(t, 5*time.Minute)
	out, err := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./testdata/runshare").CombinedOutput()
	require.NoError(t, err, "go test -c ./testdata/runshare: %s", out)
	return bin
}

// run is one `go test ./...` as the test sees it: its test binaries share
// a run directory, a label prefix and a runtime.
type run struct {
	t      *testing.T
	r      testruntimes.Runtime
	bin    string
	dir    string // the binaries' ready and release files
	runDir string // SANDBOXTEST_RUN_DIR
	prefix string
}

// binary is one test binary of the run: a process of its own.
type binary struct {
	name string
	cmd  *exec.Cmd
	out  *testkit.SyncBuffer
	done chan error
	// container, database: what its test got, once ready.
	container, database string
}

// start starts the test binary name, as `go test` starts one.
func (rn *run) start(name string) *binary {
	rn.t.Helper()
	cmd := exec.Command(rn.bin, "-test.v", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(os.Environ(),
		"RUNSHARE_DIR="+rn.dir, "RUNSHARE_NAME="+name, "RUNSHARE_PREFIX="+rn.prefix,
		"RUNSHARE_RUNTIME="+rn.r.Detect.Runtime, "RUNSHARE_CONTAINER_HOST="+rn.r.Detect.ContainerHost,
		sandboxtest.EnvRunDir+"="+rn.runDir)
	if rn.r.Detect.UnenforcedLimits {
		cmd.Env = append(cmd.Env, "RUNSHARE_UNENFORCED=1")
	}
	b := &binary{name: name, cmd: cmd, out: &testkit.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = b.out, b.out
	require.NoError(rn.t, cmd.Start())
	go func() { b.done <- cmd.Wait() }()
	rn.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-b.done
		}
	})
	return b
}

// ready waits until b's test holds its database.
func (rn *run) ready(b *binary) {
	rn.t.Helper()
	ctx := testkit.Context(rn.t, 5*time.Minute)
	exited := false
	err := poll.Until(ctx, 5*time.Minute, 20*time.Millisecond, func() error {
		select {
		case err := <-b.done:
			b.done <- err
			exited = true
			return nil
		default:
		}
		body, err := os.ReadFile(filepath.Join(rn.dir, b.name+".ready"))
		if err != nil {
			return err
		}
		f := strings.Fields(string(body))
		b.container, b.database = f[0], f[1]
		return nil
	})
	require.NoError(rn.t, err, "%s holds a database; its output:\n%s", b.name, b.out)
	require.False(rn.t, exited, "%s exited before it held a database; its output:\n%s", b.name, b.out)
}

// release lets b's test end, and waits until b has exited.
func (rn *run) release(b *binary) {
	rn.t.Helper()
	require.NoError(rn.t, os.WriteFile(filepath.Join(rn.dir, b.name+".release"), nil, 0o600))
	select {
	case err := <-b.done:
		b.done <- err
		require.NoError(rn.t, err, "%s passed; its output:\n%s", b.name, b.out)
	case <-time.After(5 * time.Minute):
		rn.t.Fatalf("%s did not exit within 5 minutes; its output:\n%s", b.name, b.out)
	}
}

// kill ends b with SIGKILL: no Main, no leave.
func (rn *run) kill(b *binary) {
	rn.t.Helper()
	require.NoError(rn.t, b.cmd.Process.Signal(syscall.SIGKILL))
	err := <-b.done
	b.done <- err
}

// containers lists the run's sandboxes with the runtime's own CLI.
func (rn *run) containers() []string {
	rn.t.Helper()
	return rn.r.LabelledNames(rn.t, rn.prefix+".sandbox", "1")
}

func newRun(t *testing.T, r testruntimes.Runtime) *run {
	t.Helper()
	testenv.Image(t, r.Name, "postgres")
	rn := &run{t: t, r: r, bin: runshareBinary(t), dir: t.TempDir(), runDir: t.TempDir(), prefix: "sbr" + testkit.RandomHex(4)}
	testkit.CleanupLabelled(t, r.RT, map[string]string{rn.prefix + ".sandbox": "1"}) // what a failed test left
	return rn
}

// TestSharedAcrossTestBinaries: the test binaries of one run, started at
// once as `go test -p N` starts them, share one postgres sandbox (the
// runtime's own CLI lists one container while they run), each with a
// database of its own cloned from one migrated template; a janitor keeps
// it while any of them lives; one leaving hands it over to the others and
// to a newcomer; the last one out removes it; and a binary after that
// starts a new one.
func TestSharedAcrossTestBinaries(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, r testruntimes.Runtime) {
		rn := newRun(t, r)
		const n = 4
		bins := make([]*binary, n)
		for i := range bins {
			bins[i] = rn.start(string(rune('a' + i)))
		}
		databases := map[string]bool{}
		for _, b := range bins {
			rn.ready(b)
			assert.Equal(t, bins[0].container, b.container, "%s uses the run's one sandbox", b.name)
			databases[b.database] = true
		}
		assert.Len(t, databases, n, "a database of its own for each binary")
		assert.Equal(t, []string{bins[0].container}, rn.containers(), "one container serves every binary")

		ctx := testkit.Context(t, 5*time.Minute)
		j, err := janitor.New(r.RT, janitor.Options{Prefix: rn.prefix, NoGrace: true})
		require.NoError(t, err)
		rep, err := j.Sweep(ctx)
		require.NoError(t, err)
		assert.Empty(t, rep.Removed, "live binaries use it: %s", rep)
		assert.Equal(t, []string{bins[0].container}, janitorNames(rep.Kept), "kept for its live owner run")

		rn.release(bins[0])
		assert.Equal(t, []string{bins[0].container}, rn.containers(), "it stays while b, c, d run")
		late := rn.start("late")
		rn.ready(late)
		assert.Equal(t, bins[0].container, late.container, "a newcomer joins the running sandbox")

		for _, b := range append(bins[1:], late) {
			rn.release(b)
		}
		assert.Empty(t, rn.containers(), "the last one out removed it")

		next := rn.start("next")
		rn.ready(next)
		require.Len(t, rn.containers(), 1)
		assert.NotEqual(t, bins[0].container, next.container, "a run after the last exit starts a sandbox of its own")
		rn.release(next)
		assert.Empty(t, rn.containers())
	})
}

// TestSharedSandboxOfKilledBinaries: when every test binary that used a
// shared sandbox was killed (no Main), a janitor sweep removes it; until
// then, with one of them alive, it keeps it.
func TestSharedSandboxOfKilledBinaries(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, r testruntimes.Runtime) {
		rn := newRun(t, r)
		bins := []*binary{rn.start("a"), rn.start("b"), rn.start("c")}
		for _, b := range bins {
			rn.ready(b)
		}
		container := bins[0].container
		ctx := testkit.Context(t, 5*time.Minute)
		j, err := janitor.New(r.RT, janitor.Options{Prefix: rn.prefix, NoGrace: true})
		require.NoError(t, err)

		rn.kill(bins[0])
		rn.kill(bins[1])
		rep, err := j.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{container}, janitorNames(rep.Kept), "c still lives: %s", rep)
		assert.Equal(t, []string{container}, rn.containers())

		rn.kill(bins[2])
		assert.Equal(t, []string{container}, rn.containers(), "killed binaries remove nothing")
		rep, err = j.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{container}, janitorNames(rep.Removed), "every binary of the run is dead: %s", rep)
		assert.Empty(t, rn.containers(), "the janitor removed it")

		next := rn.start("next")
		rn.ready(next)
		assert.NotEqual(t, container, next.container, "the next run starts afresh")
		rn.release(next)
		assert.Empty(t, rn.containers())
	})
}

func janitorNames(sbs []janitor.Sandbox) []string {
	var out []string
	for _, sb := range sbs {
		out = append(out, sb.Name)
	}
	return out
}

// TestGoTestRunSharesOneServer: `go test -p 4` of four packages (testdata/
// runshare and its b, c, d), each test binary taking a database and
// holding it until told, runs on one postgres container, as the
// runtime's own CLI lists while they run, and leaves none behind.
func TestGoTestRunSharesOneServer(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, r testruntimes.Runtime) {
		rn := newRun(t, r)
		pkgs := []string{"runshare", "b", "c", "d"}
		args := []string{"test", "-count=1", "-p", "4", "-timeout=10m"}
		for _, p := range pkgs {
			if p == "runshare" {
				args = append(args, "./testdata/runshare")
			} else {
				args = append(args, "./testdata/runshare/"+p)
			}
		}
		ctx := testkit.Context(t, 10*time.Minute)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Env = append(os.Environ(),
			"RUNSHARE_DIR="+rn.dir, "RUNSHARE_PREFIX="+rn.prefix,
			"RUNSHARE_RUNTIME="+r.Detect.Runtime, "RUNSHARE_CONTAINER_HOST="+r.Detect.ContainerHost,
			sandboxtest.EnvRunDir+"="+rn.runDir)
		if r.Detect.UnenforcedLimits {
			cmd.Env = append(cmd.Env, "RUNSHARE_UNENFORCED=1")
		}
		out := &testkit.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				<-done
			}
		})

		containers := map[string]bool{}
		err := poll.Until(ctx, 10*time.Minute, 50*time.Millisecond, func() error {
			for _, p := range pkgs {
				body, err := os.ReadFile(filepath.Join(rn.dir, p+".ready"))
				if err != nil {
					return err
				}
				containers[strings.Fields(string(body))[0]] = true
			}
			return nil
		})
		require.NoError(t, err, "every package's test holds a database; go test says:\n%s", out)
		require.Len(t, containers, 1, "one shared sandbox for the four test binaries")
		assert.Len(t, rn.containers(), 1, "the runtime's own CLI lists one container while they run")
		for _, p := range pkgs {
			require.NoError(t, os.WriteFile(filepath.Join(rn.dir, p+".release"), nil, 0o600))
		}
		select {
		case err := <-done:
			require.NoError(t, err, "go test passed:\n%s", out)
		case <-ctx.Done():
			t.Fatalf("go test did not end: %s", out)
		}
		assert.Empty(t, rn.containers(), "none left after the run")
	})
}

// TestPerBinaryOptOut: Options.PerBinary gives the test binary a shared
// sandbox of its own, owned by this process (process-owner labels), apart
// from the run's (run-owner labels) under otherwise equal Options.
func TestPerBinaryOptOut(t *testing.T) {
	opts, rt := onDocker(t, "redis")
	run := sandboxtest.NewDB(t, "redis", sandboxtest.DBOptions{Options: opts})
	opts.PerBinary = true
	own := sandboxtest.NewDB(t, "redis", sandboxtest.DBOptions{Options: opts})
	require.NotEqual(t, run.Container, own.Container, "a sandbox each")

	keys := labels.For(opts.LabelPrefix)
	byName := map[string]map[string]string{}
	for _, c := range listed(t, rt, opts.LabelPrefix) {
		byName[c.Name] = c.Labels
	}
	require.Len(t, byName, 2)
	assert.Equal(t, strconv.Itoa(os.Getpid()), byName[own.Container][keys.OwnerPID], "owned by this process")
	assert.Empty(t, byName[own.Container][keys.OwnerRun])
	assert.NotEmpty(t, byName[run.Container][keys.OwnerRun], "owned by the run")
	assert.Empty(t, byName[run.Container][keys.OwnerPID])
}
