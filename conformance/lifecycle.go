package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/runtime"
)

const (
	// stopGrace is the grace Stop is given for a process that ignores
	// SIGTERM; Kill must return well within it.
	stopGrace = 3 * time.Second
	// clockTolerance absorbs timer granularity when measuring the grace.
	clockTolerance = 250 * time.Millisecond
	// parallelRuns is how many containers run and go at once.
	parallelRuns = 10
)

// ignoreTERM is a PID 1 that survives SIGTERM: only a kill ends it. It
// touches ignoreTERMReady once the trap is set, so that a test can wait
// for it (a TERM that arrives before would end the shell).
var ignoreTERM = []string{"sh", "-c", `trap "" TERM; : > ` + ignoreTERMReady + `; while :; do sleep 1; done`}

// ignoreTERMReady is the file ignoreTERM makes once it ignores SIGTERM.
const ignoreTERMReady = "/tmp/term-ignored"

// runIgnoringTERM runs spec with ignoreTERM and returns once its trap is
// set.
func (s *suite) runIgnoringTERM(t *testing.T, ctx context.Context, spec runtime.RunSpec) {
	t.Helper()
	spec.Command = ignoreTERM
	s.run(t, ctx, spec)
	s.waitTrap(t, ctx, spec.Name)
}

// waitTrap returns once the ignoreTERM of container name has set its trap.
func (s *suite) waitTrap(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	poll(t, "the trap of "+name, 30*time.Second, func() error {
		if !s.fileExists(t, ctx, name, ignoreTERMReady) {
			return errors.New("SIGTERM not ignored yet")
		}
		return nil
	})
}

// testExecStdoutStderrExitCodeEnv: exec returns the process's stdout,
// stderr and exit code separately, passes argv verbatim, adds env for that
// process only, and honours the user.
func testExecStdoutStderrExitCodeEnv(t *testing.T, s *suite) {
	ctx := testContext(t)
	spec := s.spec(t)
	spec.Env = map[string]string{"SBX_CONF_BASE": "base value"}
	s.run(t, ctx, spec)

	large := strings.Repeat("x", 1<<20)
	cases := []struct {
		name       string
		exec       runtime.ExecSpec
		wantStdout string
		wantStderr string
		wantCode   int
	}{
		{
			name:       "stdout",
			exec:       runtime.ExecSpec{Cmd: []string{"sh", "-c", `printf 'out\nput'`}},
			wantStdout: "out\nput",
		},
		{
			name:       "stderr",
			exec:       runtime.ExecSpec{Cmd: []string{"sh", "-c", `printf oops >&2`}},
			wantStderr: "oops",
		},
		{
			name:       "both and an exit code",
			exec:       runtime.ExecSpec{Cmd: []string{"sh", "-c", `printf o; printf e >&2; exit 7`}},
			wantStdout: "o",
			wantStderr: "e",
			wantCode:   7,
		},
		{
			name:     "exit code without output",
			exec:     runtime.ExecSpec{Cmd: []string{"false"}},
			wantCode: 1,
		},
		{
			name:       "argv is passed verbatim",
			exec:       runtime.ExecSpec{Cmd: []string{"printf", "%s|", "a b", "$HOME", "'c'"}},
			wantStdout: "a b|$HOME|'c'|",
		},
		{
			name: "env is added to the container's",
			exec: runtime.ExecSpec{
				Cmd: []string{"sh", "-c", `printf '%s|%s' "$SBX_CONF_EXEC" "$SBX_CONF_BASE"`},
				Env: map[string]string{"SBX_CONF_EXEC": "exec value=1"},
			},
			wantStdout: "exec value=1|base value",
		},
		{
			name:       "env does not outlive its exec",
			exec:       runtime.ExecSpec{Cmd: []string{"sh", "-c", `printf '%s' "${SBX_CONF_EXEC-unset}"`}},
			wantStdout: "unset",
		},
		{
			name:       "user",
			exec:       runtime.ExecSpec{Cmd: []string{"id", "-u"}, User: "65534"},
			wantStdout: "65534\n",
		},
		{
			name:       "large stdout",
			exec:       runtime.ExecSpec{Cmd: []string{"sh", "-c", `head -c 1048576 /dev/zero | tr '\0' x`}},
			wantStdout: large,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.exec.User != "" && s.forms.NoExecUser {
				_, err := s.rt.Exec(ctx, spec.Name, tc.exec)
				s.assertUnsupported(t, err, "exec as a user", spec.Name)
				return
			}
			res, err := s.rt.Exec(ctx, spec.Name, tc.exec)
			require.NoError(t, err, "exec %q", tc.exec.Cmd)
			assert.Equal(t, tc.wantCode, res.ExitCode, "exit code (stderr %s)", clip(res.Stderr))
			if len(tc.wantStdout) > outputLimit {
				assert.True(t, string(res.Stdout) == tc.wantStdout, "stdout: %d bytes, want %d", len(res.Stdout), len(tc.wantStdout))
			} else {
				assert.Equal(t, tc.wantStdout, string(res.Stdout), "stdout")
			}
			assert.Equal(t, tc.wantStderr, string(res.Stderr), "stderr")
		})
	}
}

// testStopAfterGraceWhenTERMIgnored: Stop of a process that ignores SIGTERM
// waits out the grace, then kills it: it returns after the grace with the
// container exited.
func testStopAfterGraceWhenTERMIgnored(t *testing.T, s *suite) {
	ctx := testContext(t)
	spec := s.spec(t)
	s.runIgnoringTERM(t, ctx, spec)

	start := time.Now()
	err := s.rt.Stop(ctx, spec.Name, stopGrace)
	elapsed := time.Since(start)
	require.NoError(t, err, "stop")
	assert.GreaterOrEqual(t, elapsed, stopGrace-clockTolerance, "stop returned before the grace was over")
	if s.forms.StopRemoves {
		// The Kubernetes form: a pod cannot be stopped and kept; it is
		// gone once stop returns, after the grace.
		_, err := s.rt.Inspect(ctx, spec.Name)
		assert.ErrorIs(t, err, runtime.ErrNotFound, "the stopped pod is gone once stop returned")
		return
	}

	c, err := s.rt.Inspect(ctx, spec.Name)
	require.NoError(t, err)
	assert.Equal(t, runtime.StateExited, c.State, "state once stop returned")
}

// testKillStopsAtOnce: Kill ends even a process that ignores SIGTERM
// without waiting for any grace, and the container is not running when it
// returns.
func testKillStopsAtOnce(t *testing.T, s *suite) {
	ctx := testContext(t)
	spec := s.spec(t)
	s.runIgnoringTERM(t, ctx, spec)

	start := time.Now()
	err := s.rt.Kill(ctx, spec.Name)
	elapsed := time.Since(start)
	require.NoError(t, err, "kill")
	assert.Less(t, elapsed, stopGrace, "kill took as long as a graceful stop")
	if s.forms.StopRemoves {
		// The Kubernetes form: the killed pod is gone once kill returned.
		_, err := s.rt.Inspect(ctx, spec.Name)
		assert.ErrorIs(t, err, runtime.ErrNotFound, "the killed pod is gone once kill returned")
		return
	}

	c, err := s.rt.Inspect(ctx, spec.Name)
	require.NoError(t, err)
	assert.False(t, c.Running(), "the container is still running once kill returned")
	assert.Equal(t, runtime.StateExited, c.State, "state once kill returned")
	assert.False(t, c.OOMKilled, "a killed container is not OOM-killed")
	assert.Equal(t, fmt.Sprintf("exited (code %d)", c.ExitCode), c.Status())
}

// testInspectAbsentIsNotFound: inspecting a container that does not exist
// (never did, or was removed) is ErrNotFound, naming the runtime and it.
func testInspectAbsentIsNotFound(t *testing.T, s *suite) {
	cases := []struct {
		name   string
		absent func(t *testing.T, ctx context.Context) string
	}{
		{name: "never created", absent: func(*testing.T, context.Context) string { return s.newName() }},
		{name: "unknown id", absent: func(*testing.T, context.Context) string { return randomHex(32) }},
		{name: "removed", absent: func(t *testing.T, ctx context.Context) string {
			spec := s.spec(t)
			s.run(t, ctx, spec)
			require.NoError(t, s.rt.Remove(ctx, spec.Name), "remove")
			return spec.Name
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			name := tc.absent(t, ctx)
			_, err := s.rt.Inspect(ctx, name)
			require.Error(t, err, "inspect of absent %s", name)
			assert.ErrorIs(t, err, runtime.ErrNotFound)
			assertErrorNames(t, err, s.rt.Name(), name)
		})
	}
}

// testExecStopKillAbsentAreNotFound: the verbs that need a container, other
// than Remove, report an absent one as ErrNotFound too.
func testExecStopKillAbsentAreNotFound(t *testing.T, s *suite) {
	cases := []struct {
		verb string
		call func(ctx context.Context, name string) error
	}{
		{verb: "exec", call: func(ctx context.Context, name string) error {
			_, err := s.rt.Exec(ctx, name, runtime.ExecSpec{Cmd: []string{"true"}})
			return err
		}},
		{verb: "stop", call: func(ctx context.Context, name string) error { return s.rt.Stop(ctx, name, time.Second) }},
		{verb: "kill", call: func(ctx context.Context, name string) error { return s.rt.Kill(ctx, name) }},
	}
	for _, tc := range cases {
		t.Run(tc.verb, func(t *testing.T) {
			ctx := testContext(t)
			name := s.newName()
			err := tc.call(ctx, name)
			require.Error(t, err, "%s of absent %s", tc.verb, name)
			assert.ErrorIs(t, err, runtime.ErrNotFound)
			assertErrorNames(t, err, s.rt.Name(), name)
		})
	}
}

// testRunDuplicateNameIsAlreadyExists: a second Run under the name of a
// live container is ErrAlreadyExists, leaves the first container as it was
// and creates nothing.
func testRunDuplicateNameIsAlreadyExists(t *testing.T, s *suite) {
	ctx := testContext(t)
	first := s.spec(t)
	first.Labels = s.labels(t, map[string]string{"sbx.conf/which": "first"})
	orig := s.run(t, ctx, first)

	dupKey := randomHex(4)
	second := s.spec(t)
	second.Name = first.Name
	second.Command = []string{"sleep", "3599"}
	second.Labels = s.labels(t, map[string]string{"sbx.conf/which": "second", "sbx.conf/dup": dupKey})
	_, err := s.rt.Run(ctx, second)
	require.Error(t, err, "second run under %s", first.Name)
	assert.ErrorIs(t, err, runtime.ErrAlreadyExists)
	assertErrorNames(t, err, s.rt.Name(), first.Name)

	c, err := s.rt.Inspect(ctx, first.Name)
	require.NoError(t, err)
	assert.Equal(t, orig.ID, c.ID, "the name still belongs to the first container")
	assert.Equal(t, runtime.StateRunning, c.State, "the first container still runs")
	assert.Equal(t, "first", c.Labels["sbx.conf/which"], "the first container's labels")
	assert.Equal(t, []string{"sleep", "3600"}, strings.Split(strings.TrimSuffix(s.readFile(t, ctx, first.Name, "/proc/1/cmdline"), "\x00"), "\x00"),
		"the first container's process")

	leaked, err := s.rt.List(ctx, map[string]string{"sbx.conf/dup": dupKey})
	require.NoError(t, err)
	assert.Empty(t, containerNames(leaked), "the refused run left a container")
}

// testRemoveAbsentIsNoError: removing a container that does not exist, or
// no longer does, succeeds, so teardown can be repeated.
func testRemoveAbsentIsNoError(t *testing.T, s *suite) {
	cases := []struct {
		name   string
		absent func(t *testing.T, ctx context.Context) string
	}{
		{name: "never created", absent: func(*testing.T, context.Context) string { return s.newName() }},
		{name: "already removed", absent: func(t *testing.T, ctx context.Context) string {
			spec := s.spec(t)
			s.run(t, ctx, spec)
			require.NoError(t, s.rt.Remove(ctx, spec.Name), "first remove")
			return spec.Name
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			name := tc.absent(t, ctx)
			assert.NoError(t, s.rt.Remove(ctx, name), "remove of absent %s", name)
			_, err := s.rt.Inspect(ctx, name)
			assert.ErrorIs(t, err, runtime.ErrNotFound, "inspect after remove")
		})
	}
}

// testIDsAreNeverReused: a container's ID is never given to another
// container, so a remove by the ID a caller listed removes that container
// or nothing, whatever happened to its name since. A remove by the ID
// removes the container, killed though it ignores SIGTERM, and its
// anonymous volume, as the runtime's own CLI sees it; a new container
// under the name gets another ID; the old ID then names nothing (inspect:
// ErrNotFound; remove: no error, as for any absent container) and a
// remove by it leaves the newer container running.
func testIDsAreNeverReused(t *testing.T, s *suite) {
	ctx := testContext(t)
	require.NotNil(t, s.cfg.ContainerIDs, "Config.ContainerIDs lists the backend's containers")
	exists := func(id string) bool {
		t.Helper()
		ids, err := s.cfg.ContainerIDs(ctx)
		require.NoError(t, err, "the runtime's own container list")
		return slices.Contains(ids, id)
	}

	spec := s.spec(t)
	spec.Command = ignoreTERM
	c, volume := s.runWithVolume(t, ctx, spec)
	s.waitTrap(t, ctx, spec.Name)
	require.NotEmpty(t, c.ID, "Run reports the container's ID")
	require.True(t, exists(c.ID), "the runtime lists %s", c.ID)
	got, err := s.rt.Inspect(ctx, c.ID)
	require.NoError(t, err, "inspect by ID")
	assert.Equal(t, spec.Name, got.Name, "the ID names the container")

	require.NoError(t, s.rt.Remove(ctx, c.ID), "remove by ID")
	assert.False(t, exists(c.ID), "the container is gone")
	s.waitVolumeGone(t, ctx, volume)

	newer := s.spec(t)
	newer.Name = spec.Name
	n := s.run(t, ctx, newer)
	require.NotEqual(t, c.ID, n.ID, "a newer container under the name gets a new ID")
	_, err = s.rt.Inspect(ctx, c.ID)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "the old ID names no container")
	assert.NoError(t, s.rt.Remove(ctx, c.ID), "a remove by the old ID")
	assert.True(t, exists(n.ID), "the newer container under the name is untouched")
	got, err = s.rt.Inspect(ctx, spec.Name)
	require.NoError(t, err)
	assert.Equal(t, n.ID, got.ID, "the name is the newer container's")
	assert.Equal(t, runtime.StateRunning, got.State, "and it still runs")
}

// testStopStoppedIsNoError: stop and kill of a container that has exited
// succeed and leave it exited.
func testStopStoppedIsNoError(t *testing.T, s *suite) {
	ctx := testContext(t)
	spec := s.spec(t)
	spec.Command = []string{"true"}
	s.run(t, ctx, spec)
	s.waitState(t, ctx, spec.Name, runtime.StateExited)

	cases := []struct {
		verb string
		call func() error
	}{
		{verb: "stop", call: func() error { return s.rt.Stop(ctx, spec.Name, time.Second) }},
		{verb: "stop again", call: func() error { return s.rt.Stop(ctx, spec.Name, time.Second) }},
		{verb: "kill", call: func() error { return s.rt.Kill(ctx, spec.Name) }},
	}
	for _, tc := range cases {
		t.Run(tc.verb, func(t *testing.T) {
			assert.NoError(t, tc.call(), "%s of exited %s", tc.verb, spec.Name)
			c, err := s.rt.Inspect(ctx, spec.Name)
			require.NoError(t, err)
			assert.Equal(t, runtime.StateExited, c.State)
		})
	}
}

// testParallelRunRemoveLeavesNothing: containers run and removed
// concurrently all succeed and leave nothing behind.
func testParallelRunRemoveLeavesNothing(t *testing.T, s *suite) {
	ctx := testContext(t)
	batch := randomHex(4)
	specs := make([]runtime.RunSpec, parallelRuns)
	for i := range specs {
		specs[i] = s.spec(t)
		specs[i].Labels = s.labels(t, map[string]string{"sbx.conf/batch": batch})
		s.track(t, specs[i].Name)
	}

	g, gctx := errgroup.WithContext(ctx)
	for _, spec := range specs {
		g.Go(func() error {
			if _, err := s.rt.Run(gctx, spec); err != nil {
				return err
			}
			if err := s.rt.Remove(gctx, spec.Name); err != nil {
				return fmt.Errorf("remove %s: %w", spec.Name, err)
			}
			return nil
		})
	}
	require.NoError(t, g.Wait(), "%d parallel runs and removes", parallelRuns)

	left, err := s.rt.List(ctx, map[string]string{runLabel: s.runID, "sbx.conf/batch": batch})
	require.NoError(t, err)
	assert.Empty(t, containerNames(left), "containers left by the parallel runs")
	for _, spec := range specs {
		_, err := s.rt.Inspect(ctx, spec.Name)
		assert.ErrorIs(t, err, runtime.ErrNotFound, "inspect %s after its remove", spec.Name)
	}
}

// oomLimit is the memory limit of the container OOMKillIsReported gets
// killed in: 32 MiB, since on cgroup v2 runc's own init (about 16 MiB)
// is charged to the container before its process runs.
const oomLimit = 32 << 20

// testOOMKillIsReported: a container whose main process the kernel kills
// for going over its memory limit exits 137 and, on a backend that reports
// OOM kills (Info.ReportsOOMKill), reads as OOM-killed in Inspect, List
// and Snapshot ("exited (OOM killed)"); a backend that does not report
// them says so in Info, and its containers never claim it. The hog
// (`tail /dev/zero`: a line that never ends, which tail holds whole) is
// let loose only once the limit is seen in the container's own cgroup,
// so that a backend that cannot enforce it never lets it eat the host: a
// backend that refuses the limit says ErrUnsupported, as the design wants.
func testOOMKillIsReported(t *testing.T, s *suite) {
	ctx := testContext(t)
	info, err := s.rt.Version(ctx)
	require.NoError(t, err, "version")
	spec := s.spec(t)
	spec.MemoryBytes = oomLimit
	spec.Command = []string{"sh", "-c", "while [ ! -e /tmp/go ]; do sleep 0.1; done; exec tail /dev/zero"}
	s.track(t, spec.Name)
	if _, err := s.rt.Run(ctx, spec); errors.Is(err, runtime.ErrUnsupported) {
		t.Logf("%s (rootless %v, cgroup v%s) cannot enforce a memory limit, and says so: %v", s.rt.Name(), info.Rootless, info.CgroupVersion, err)
		return
	} else {
		require.NoError(t, err, "run %s", spec.Name)
	}
	if got := s.cgroupLimits(t, ctx, spec.Name); got.Memory != oomLimit {
		// Only a rootless runtime run with the adapter's explicit opt-out
		// (limits it cannot enforce are dropped, not refused) gets here.
		require.True(t, info.Rootless, "the memory limit %d is in the container's cgroup (%s: %d)", oomLimit, got.Version, got.Memory)
		t.Logf("%s (rootless, cgroup v%s) runs the container without its memory limit, as its opt-out allows: there is nothing to OOM-kill", s.rt.Name(), info.CgroupVersion)
		return
	}
	s.exec(t, ctx, spec.Name, runtime.ExecSpec{Cmd: []string{"touch", "/tmp/go"}}, 0)

	var c runtime.Container
	poll(t, "the hog is killed", time.Minute, func() error {
		if c, err = s.rt.Inspect(ctx, spec.Name); err != nil {
			return err
		}
		if c.State != runtime.StateExited {
			return fmt.Errorf("state %s", c.State)
		}
		return nil
	})
	assert.Equal(t, 137, c.ExitCode, "exit code of a process killed by SIGKILL")
	listed, err := s.rt.List(ctx, map[string]string{runLabel: s.runID, testLabel: t.Name()})
	require.NoError(t, err, "list")
	require.Len(t, listed, 1, "list finds the container")
	snap, err := s.rt.Snapshot(ctx, map[string]string{runLabel: s.runID, testLabel: t.Name()})
	require.NoError(t, err, "snapshot")
	require.Len(t, snap.Matched, 1, "snapshot finds the container")
	if !info.ReportsOOMKill {
		t.Logf("%s %s does not report OOM kills (Info.ReportsOOMKill false): the container reads %q", s.rt.Name(), info.Version, c.Status())
		assert.False(t, c.OOMKilled || listed[0].OOMKilled || snap.Matched[0].OOMKilled, "a backend that does not report OOM kills never claims one")
		return
	}
	assert.True(t, c.OOMKilled, "inspect reports the OOM kill")
	assert.True(t, listed[0].OOMKilled, "list reports the OOM kill")
	assert.True(t, snap.Matched[0].OOMKilled, "snapshot reports the OOM kill")
	assert.Equal(t, "exited (OOM killed)", c.Status())
}
