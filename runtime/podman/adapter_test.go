package podman

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// These tests prove what is particular to this adapter (how a spec lands in
// the service, rlimit clamping, how failures are cleaned up and
// classified); the semantics shared by every backend are proven by
// conformance_test.go.

func TestVersion(t *testing.T) {
	adaptertest.AssertVersion(t, newTestRuntime(t))
}

// storedSpec is the part of an inspect that shows what the service made of
// a spec.
type storedSpec struct {
	Config struct {
		Env []string `json:"Env"`
	} `json:"Config"`
	HostConfig struct {
		Memory    int64 `json:"Memory"`
		CPUQuota  int64 `json:"CpuQuota"`
		CPUPeriod int64 `json:"CpuPeriod"`
		PidsLimit int64 `json:"PidsLimit"`
		Ulimits   []struct {
			Name string `json:"Name"`
			Soft uint64 `json:"Soft"`
			Hard uint64 `json:"Hard"`
		} `json:"Ulimits"`
		Binds []string `json:"Binds"`
	} `json:"HostConfig"`
}

func TestRunHonoursTheSpec(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	img := testkit.Image(t, r, "busybox")
	labels := adaptertest.Labels(t, r)
	spec := adaptertest.FullSpec(img, labels, adaptertest.Network(t, r, labels))

	before := time.Now().Add(-time.Minute)
	c, err := r.Run(ctx, spec)
	require.NoError(t, err)

	t.Run("ReportedByRun", func(t *testing.T) {
		adaptertest.AssertRunReports(t, spec, c, before)
		assert.Equal(t, []runtime.Mount{{Type: "tmpfs", Source: "tmpfs", Destination: "/scratch"}}, c.Mounts, "the tmpfs, and no other mount")
	})

	t.Run("StoredByTheService", func(t *testing.T) {
		var got storedSpec
		require.NoError(t, apiGet(t, ctx, r, "/containers/%s/json", &got, c.ID))
		hc := got.HostConfig
		assert.Equal(t, int64(64<<20), hc.Memory)
		assert.Equal(t, int64(50_000), hc.CPUQuota)
		assert.Equal(t, int64(100_000), hc.CPUPeriod)
		assert.Equal(t, int64(64), hc.PidsLimit)
		assert.Empty(t, hc.Binds, "no host path is mounted")
		ulimits := map[string][2]uint64{}
		for _, u := range hc.Ulimits {
			ulimits[u.Name] = [2]uint64{u.Soft, u.Hard}
		}
		assert.Equal(t, [2]uint64{1024, 2048}, ulimits["RLIMIT_NOFILE"])
		assert.Contains(t, got.Config.Env, "SBX_B=two words")
		for _, e := range got.Config.Env {
			assert.NotRegexp(t, `(?i)^(https?|no|ftp)_proxy=`, e, "the service's proxy settings are not copied in")
		}
	})
}

// TestFailedStartLeavesNothing: a container whose start fails is removed
// before Run returns, and the next Run with published ports works.
//
// Podman 4.3 binds a container's host ports in the service process before
// the start and, when the start fails, only lets go of them when that
// process next collects garbage (up to about two minutes later), container
// removed or not. An ephemeral host port (what the provisioner asks for)
// is a fresh one on every run, so that does not matter to it; a fixed
// host port may stay busy that long after a failed start.
func TestFailedStartLeavesNothing(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	img := testkit.Image(t, r, "busybox")
	labels := adaptertest.Labels(t, r)
	ports := []runtime.PortSpec{{ContainerPort: 8080}}

	bad := adaptertest.Sleeper(img, "sandboxer-test-badstart-"+testkit.RandomHex(4), labels)
	bad.Command = []string{"/nonexistent/binary"}
	bad.Ports = ports
	_, err := r.Run(ctx, bad)
	require.Error(t, err, "a start that cannot exec its command fails")
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, runtime.OpRun, re.Op)
	assert.Contains(t, err.Error(), bad.Name)

	_, err = r.Inspect(ctx, bad.Name)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "the failed container was removed")
	left, err := r.List(ctx, labels)
	require.NoError(t, err)
	assert.Empty(t, left)

	good := adaptertest.Sleeper(img, "sandboxer-test-goodstart-"+testkit.RandomHex(4), labels)
	good.Ports = ports
	c, err := r.Run(ctx, good)
	require.NoError(t, err)
	require.Len(t, c.Ports, 1)
	assert.Positive(t, c.Ports[0].HostPort)
}

func TestRunOnAbsentNetworkIsNotFound(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	spec := adaptertest.Sleeper(testkit.Image(t, r, "busybox"), "sandboxer-test-nonet-"+testkit.RandomHex(4), adaptertest.Labels(t, r))
	spec.Network = "sandboxer-test-absent-" + testkit.RandomHex(4)
	_, err := r.Run(ctx, spec)
	require.Error(t, err)
	assert.ErrorIs(t, err, runtime.ErrNotFound)
	assert.NotErrorIs(t, err, runtime.ErrImageNotFound)
	_, err = r.Inspect(ctx, spec.Name)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "nothing was created")
}

// procLimit reads one row of /proc/1/limits inside a container as
// {soft, hard}.
func procLimit(t *testing.T, ctx context.Context, r *Runtime, container, row string) [2]string {
	t.Helper()
	res, err := r.Exec(ctx, container, runtime.ExecSpec{Cmd: []string{"cat", "/proc/1/limits"}})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, "stderr: %s", res.Stderr)
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if rest, ok := strings.CutPrefix(line, row); ok {
			f := strings.Fields(rest)
			require.GreaterOrEqual(t, len(f), 2, "row %q", line)
			return [2]string{f[0], f[1]}
		}
	}
	t.Fatalf("no %q row in /proc/1/limits:\n%s", row, res.Stdout)
	return [2]string{}
}

// TestRlimitsFitTheService: without CAP_SYS_RESOURCE the service cannot
// grant rlimits above its own; the adapter sets nofile and nproc to what it
// can grant when nothing is asked (Podman's own default would fail the
// start), and clamps what is asked above that.
func TestRlimitsFitTheService(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	img := testkit.Image(t, r, "busybox")
	labels := adaptertest.Labels(t, r)
	c, err := r.connect(ctx, runtime.OpVersion, "")
	require.NoError(t, err)
	svc := c.svc
	require.NotNil(t, svc.rlimits, "the service's rlimits are read from its /proc entry (a local socket)")
	nofile := min(svc.rlimits["nofile"], podmanDefaultRlimit)
	want := fmt.Sprint(nofile)

	cases := []struct {
		name    string
		ulimits []runtime.Ulimit
		want    [2]string
	}{
		{name: "NoneAsked", want: [2]string{want, want}},
		{name: "AboveTheService", ulimits: []runtime.Ulimit{{Name: "nofile", Soft: 1024, Hard: int64(svc.rlimits["nofile"]) + 1000}}, want: [2]string{"1024", fmt.Sprint(svc.rlimits["nofile"])}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := adaptertest.Sleeper(img, "sandboxer-test-rlimit-"+testkit.RandomHex(4), labels)
			spec.Ulimits = tc.ulimits
			_, err := r.Run(ctx, spec)
			require.NoError(t, err)
			assert.Equal(t, tc.want, procLimit(t, ctx, r, spec.Name, "Max open files"))
		})
	}
}

// TestLifetimeEndsTheContainer: WithLifetime has conmon kill a container
// whose lifetime is over, torn down or not.
func TestLifetimeEndsTheContainer(t *testing.T) {
	r := newTestRuntime(t, WithLifetime(2*time.Second))
	ctx := adaptertest.Ctx(t)
	spec := adaptertest.Sleeper(testkit.Image(t, r, "busybox"), "sandboxer-test-lifetime-"+testkit.RandomHex(4), adaptertest.Labels(t, r))
	_, err := r.Run(ctx, spec)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c, err := r.Inspect(ctx, spec.Name)
		return err == nil && c.State == runtime.StateExited
	}, 30*time.Second, 100*time.Millisecond, "the container outlived its 2 s lifetime")
}

func TestExec(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	spec := adaptertest.Sleeper(testkit.Image(t, r, "busybox"), "sandboxer-test-exec-"+testkit.RandomHex(4), adaptertest.Labels(t, r))
	_, err := r.Run(ctx, spec)
	require.NoError(t, err)

	t.Run("CommandNotFoundIs127", func(t *testing.T) {
		res, err := r.Exec(ctx, spec.Name, runtime.ExecSpec{Cmd: []string{"/nonexistent/binary"}})
		require.NoError(t, err)
		assert.Equal(t, 127, res.ExitCode)
	})
	t.Run("NoCommand", func(t *testing.T) {
		_, err := r.Exec(ctx, spec.Name, runtime.ExecSpec{})
		assert.ErrorContains(t, err, "no command given")
	})
	t.Run("CancelledCallerReturnsAtOnce", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := r.Exec(cctx, spec.Name, runtime.ExecSpec{Cmd: []string{"sleep", "30"}})
		assert.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("InStoppedContainerIsAnError", func(t *testing.T) {
		require.NoError(t, r.Kill(ctx, spec.Name))
		_, err := r.Exec(ctx, spec.Name, runtime.ExecSpec{Cmd: []string{"true"}})
		require.Error(t, err)
		assert.NotErrorIs(t, err, runtime.ErrNotFound)
		assert.Contains(t, err.Error(), spec.Name)
	})
}

// TestStopKillCreatedAreNoError: a container that was created and never
// started is not running, so stop and kill have nothing to do.
func TestStopKillCreatedAreNoError(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	spec := adaptertest.Sleeper(testkit.Image(t, r, "busybox"), "sandboxer-test-created-"+testkit.RandomHex(4), adaptertest.Labels(t, r))
	c, err := r.Create(ctx, spec)
	require.NoError(t, err)
	require.Equal(t, runtime.StateCreated, c.State)

	assert.NoError(t, r.Stop(ctx, spec.Name, time.Second), "stop")
	assert.NoError(t, r.Kill(ctx, spec.Name), "kill")
	got, err := r.Inspect(ctx, spec.Name)
	require.NoError(t, err)
	assert.NotEqual(t, runtime.StateRunning, got.State)
	assert.NoError(t, r.Remove(ctx, spec.Name), "remove")
	_, err = r.Inspect(ctx, spec.Name)
	assert.ErrorIs(t, err, runtime.ErrNotFound)
}
