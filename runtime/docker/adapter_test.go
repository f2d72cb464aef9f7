package docker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-units"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// These tests prove what is particular to this adapter (how a spec lands in
// the daemon, how failures are cleaned up and classified); the semantics
// shared by every backend are proven by conformance_test.go.

func TestVersion(t *testing.T) {
	adaptertest.AssertVersion(t, newTestRuntime(t))
}

func TestRunHonoursTheSpec(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	img := testkit.Image(t, r, "busybox")
	labels := adaptertest.Labels(t, r)
	netName := adaptertest.Network(t, r, labels)
	spec := adaptertest.FullSpec(img, labels, netName)

	before := time.Now().Add(-time.Minute)
	c, err := r.Run(ctx, spec)
	require.NoError(t, err)

	t.Run("ReportedByRun", func(t *testing.T) {
		adaptertest.AssertRunReports(t, spec, c, before)
	})

	t.Run("StoredByTheDaemon", func(t *testing.T) {
		raw, err := r.cli.ContainerInspect(ctx, c.ID)
		require.NoError(t, err)
		hc := raw.HostConfig
		assert.Equal(t, int64(64<<20), hc.Memory)
		assert.Equal(t, int64(500_000_000), hc.NanoCPUs)
		require.NotNil(t, hc.PidsLimit)
		assert.Equal(t, int64(64), *hc.PidsLimit)
		assert.Equal(t, []*units.Ulimit{{Name: "nofile", Soft: 1024, Hard: 2048}}, hc.Ulimits)
		assert.Equal(t, container.NetworkMode(netName), hc.NetworkMode)
		assert.Equal(t, map[string]string{"/scratch": "rw,size=16m"}, hc.Tmpfs)
		assert.False(t, hc.Privileged)
		assert.Empty(t, hc.Binds)
		assert.Empty(t, hc.Mounts)
		assert.Contains(t, raw.Config.Env, "SBX_A=1")
		assert.Contains(t, raw.Config.Env, "SBX_B=two words")
	})

	t.Run("SeenInside", func(t *testing.T) {
		res, err := r.Exec(ctx, c.ID, runtime.ExecSpec{Cmd: []string{"sh", "-c",
			`echo "$SBX_B"; grep 'open files' /proc/1/limits | tr -s ' ' | cut -d' ' -f4,5; grep ' /scratch ' /proc/mounts | cut -d' ' -f3`}})
		require.NoError(t, err)
		// The rlimits are read from PID 1, the container's own process: Docker
		// 20.10 occasionally gives an exec'd process the hard limit as its soft
		// limit when execs run concurrently (reproduced with the docker CLI).
		assert.Equal(t, "two words\n1024 2048\ntmpfs\n", string(res.Stdout))
	})

	t.Run("InspectAndListAgree", func(t *testing.T) {
		got, err := r.Inspect(ctx, spec.Name)
		require.NoError(t, err)
		assert.Equal(t, c, got)

		listed, err := r.List(ctx, labels)
		require.NoError(t, err)
		require.Len(t, listed, 1)
		l := listed[0]
		assert.Equal(t, c.ID, l.ID)
		assert.Equal(t, c.Name, l.Name)
		assert.Equal(t, c.Image, l.Image)
		assert.Equal(t, c.Labels, l.Labels)
		assert.Equal(t, c.State, l.State)
		assert.Equal(t, c.Networks, l.Networks)
		assert.Equal(t, c.Ports, l.Ports)
		assert.Equal(t, c.Created.Unix(), l.Created.Unix())
	})
}

func TestRunFailuresLeaveNothingBehind(t *testing.T) {
	r := newTestRuntime(t)
	img := testkit.Image(t, r, "busybox")
	tests := []struct {
		name     string
		mutate   func(*runtime.RunSpec)
		wantKind error // nil: an error of no particular kind
		wantMsg  []string
	}{
		{
			name:     "MissingImageIsImageNotFound",
			mutate:   func(s *runtime.RunSpec) { s.Image = "sandboxer-dev/absent:nope" },
			wantKind: runtime.ErrImageNotFound,
			wantMsg:  []string{"docker: run sandboxer-test-fail-", `image "sandboxer-dev/absent:nope"`},
		},
		{
			name:     "MissingNetworkIsNotFound",
			mutate:   func(s *runtime.RunSpec) { s.Network = "sandboxer-test-absent-net" },
			wantKind: runtime.ErrNotFound,
			wantMsg:  []string{"sandboxer-test-absent-net"},
		},
		{
			name:    "StartFailureRemovesTheContainer",
			mutate:  func(s *runtime.RunSpec) { s.Entrypoint = []string{"/nonexistent"}; s.Command = nil },
			wantMsg: []string{"/nonexistent"},
		},
		{
			name:    "InvalidSpecIsRefusedBeforeCreate",
			mutate:  func(s *runtime.RunSpec) { s.Ports = []runtime.PortSpec{{ContainerPort: 80, Protocol: "sctp"}} },
			wantMsg: []string{"neither tcp nor udp"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := adaptertest.Ctx(t)
			labels := adaptertest.Labels(t, r)
			spec := adaptertest.Sleeper(img, "sandboxer-test-fail-"+testkit.RandomHex(4), labels)
			tc.mutate(&spec)

			_, err := r.Run(ctx, spec)
			require.Error(t, err)
			kinds := []error{runtime.ErrNotFound, runtime.ErrAlreadyExists, runtime.ErrUnavailable, runtime.ErrImageNotFound, runtime.ErrUnsupported}
			for _, k := range kinds {
				assert.Equal(t, k == tc.wantKind, errors.Is(err, k), "kind %v in %v", k, err)
			}
			for _, m := range tc.wantMsg {
				assert.Contains(t, err.Error(), m)
			}

			left, err := r.List(ctx, labels)
			require.NoError(t, err)
			assert.Empty(t, left, "a failed run leaves no container")
			_, err = r.Inspect(ctx, spec.Name)
			assert.ErrorIs(t, err, runtime.ErrNotFound)
		})
	}
}

func TestRunUnderALiveNameIsAlreadyExists(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	img := testkit.Image(t, r, "busybox")
	labels := adaptertest.Labels(t, r)
	spec := adaptertest.Sleeper(img, "sandboxer-test-dup-"+testkit.RandomHex(4), labels)
	first, err := r.Run(ctx, spec)
	require.NoError(t, err)

	for _, verb := range []struct {
		name string
		call func(runtime.RunSpec) (runtime.Container, error)
	}{{"Run", func(s runtime.RunSpec) (runtime.Container, error) { return r.Run(ctx, s) }},
		{"Create", func(s runtime.RunSpec) (runtime.Container, error) { return r.Create(ctx, s) }}} {
		t.Run(verb.name, func(t *testing.T) {
			_, err := verb.call(spec)
			require.Error(t, err)
			assert.ErrorIs(t, err, runtime.ErrAlreadyExists)
			assert.Contains(t, err.Error(), spec.Name)

			still, err := r.Inspect(ctx, spec.Name)
			require.NoError(t, err)
			assert.Equal(t, first.ID, still.ID, "the live container is untouched")
			assert.True(t, still.Running())
		})
	}
}

func TestCreateThenLifecycleVerbs(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	img := testkit.Image(t, r, "busybox")
	labels := adaptertest.Labels(t, r)
	spec := adaptertest.Sleeper(img, "sandboxer-test-created-"+testkit.RandomHex(4), labels)
	spec.Ports = []runtime.PortSpec{{ContainerPort: 8080}}

	c, err := r.Create(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, runtime.StateCreated, c.State)
	assert.Empty(t, c.Ports, "nothing is bound before start")

	require.NoError(t, r.Stop(ctx, c.ID, time.Second), "stop of a created container")
	require.NoError(t, r.Kill(ctx, c.ID), "kill of a created container")
	got, err := r.Inspect(ctx, c.ID)
	require.NoError(t, err)
	assert.Equal(t, runtime.StateCreated, got.State)

	require.NoError(t, r.Remove(ctx, c.Name))
	_, err = r.Inspect(ctx, c.Name)
	assert.ErrorIs(t, err, runtime.ErrNotFound)
	assert.NoError(t, r.Remove(ctx, c.Name), "second remove")
}

func TestExec(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	img := testkit.Image(t, r, "busybox")
	labels := adaptertest.Labels(t, r)
	c, err := r.Run(ctx, adaptertest.Sleeper(img, "sandboxer-test-exec-"+testkit.RandomHex(4), labels))
	require.NoError(t, err)

	tests := []struct {
		name       string
		spec       runtime.ExecSpec
		wantCode   int
		anyFailure bool // only "non-zero" is portable
		wantStdout string
		wantStderr string
	}{
		{name: "StdoutAndStderrApart", spec: runtime.ExecSpec{Cmd: []string{"sh", "-c", "echo out; echo err >&2"}}, wantStdout: "out\n", wantStderr: "err\n"},
		{name: "ExitCode", spec: runtime.ExecSpec{Cmd: []string{"sh", "-c", "exit 7"}}, wantCode: 7},
		{name: "Env", spec: runtime.ExecSpec{Cmd: []string{"sh", "-c", `printf %s "$X"`}, Env: map[string]string{"X": "a b=c"}}, wantStdout: "a b=c"},
		{name: "User", spec: runtime.ExecSpec{Cmd: []string{"id", "-u"}, User: "1234"}, wantStdout: "1234\n"},
		{name: "LargeOutput", spec: runtime.ExecSpec{Cmd: []string{"sh", "-c", "head -c 1048576 /dev/zero"}}, wantStdout: strings.Repeat("\x00", 1<<20)},
		// The code is the OCI runtime's (126 or 127) and its message goes to
		// the stream.
		{name: "MissingBinary", spec: runtime.ExecSpec{Cmd: []string{"/nonexistent"}}, anyFailure: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.Exec(ctx, c.ID, tc.spec)
			require.NoError(t, err)
			if tc.anyFailure {
				assert.NotZero(t, res.ExitCode)
				return
			}
			assert.Equal(t, tc.wantCode, res.ExitCode)
			assert.Equal(t, tc.wantStdout, string(res.Stdout))
			assert.Equal(t, tc.wantStderr, string(res.Stderr))
		})
	}

	t.Run("AbsentContainerIsNotFound", func(t *testing.T) {
		_, err := r.Exec(ctx, "sandboxer-test-absent-"+testkit.RandomHex(4), runtime.ExecSpec{Cmd: []string{"true"}})
		assert.ErrorIs(t, err, runtime.ErrNotFound)
	})
	t.Run("StoppedContainerIsAnError", func(t *testing.T) {
		require.NoError(t, r.Kill(ctx, c.ID))
		_, err := r.Exec(ctx, c.ID, runtime.ExecSpec{Cmd: []string{"true"}})
		require.Error(t, err)
		assert.NotErrorIs(t, err, runtime.ErrAlreadyExists, "a 409 on exec is not a name conflict")
		assert.NotErrorIs(t, err, runtime.ErrNotFound)
	})
}

func TestStopAndKill(t *testing.T) {
	r := newTestRuntime(t)
	img := testkit.Image(t, r, "busybox")

	t.Run("StopWaitsGraceThenKills", func(t *testing.T) {
		ctx := adaptertest.Ctx(t)
		labels := adaptertest.Labels(t, r)
		spec := adaptertest.Sleeper(img, "sandboxer-test-stop-"+testkit.RandomHex(4), labels)
		spec.Command = []string{"sh", "-c", "trap '' TERM; while :; do sleep 1; done"}
		c, err := r.Run(ctx, spec)
		require.NoError(t, err)

		start := time.Now()
		require.NoError(t, r.Stop(ctx, c.ID, time.Second))
		assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "TERM is ignored: stop waits out the grace")
		got, err := r.Inspect(ctx, c.ID)
		require.NoError(t, err)
		assert.Equal(t, runtime.StateExited, got.State)
		assert.Equal(t, 137, got.ExitCode)

		assert.NoError(t, r.Stop(ctx, c.ID, time.Second), "stop of a stopped container")
		assert.NoError(t, r.Kill(ctx, c.ID), "kill of a stopped container")
	})

	t.Run("StopHonoursTERM", func(t *testing.T) {
		ctx := adaptertest.Ctx(t)
		c, err := r.Run(ctx, adaptertest.Sleeper(img, "sandboxer-test-term-"+testkit.RandomHex(4), adaptertest.Labels(t, r)))
		require.NoError(t, err)
		require.NoError(t, r.Stop(ctx, c.ID, 30*time.Second))
		got, err := r.Inspect(ctx, c.ID)
		require.NoError(t, err)
		assert.Equal(t, runtime.StateExited, got.State)
		assert.Equal(t, 0, got.ExitCode, "the trap ran")
	})

	t.Run("KillReturnsStopped", func(t *testing.T) {
		ctx := adaptertest.Ctx(t)
		c, err := r.Run(ctx, adaptertest.Sleeper(img, "sandboxer-test-kill-"+testkit.RandomHex(4), adaptertest.Labels(t, r)))
		require.NoError(t, err)
		require.NoError(t, r.Kill(ctx, c.Name))
		got, err := r.Inspect(ctx, c.ID)
		require.NoError(t, err)
		assert.Equal(t, runtime.StateExited, got.State)
		assert.Equal(t, 137, got.ExitCode)
	})

	t.Run("AbsentContainer", func(t *testing.T) {
		ctx := adaptertest.Ctx(t)
		absent := "sandboxer-test-absent-" + testkit.RandomHex(4)
		assert.ErrorIs(t, r.Stop(ctx, absent, time.Second), runtime.ErrNotFound)
		assert.ErrorIs(t, r.Kill(ctx, absent), runtime.ErrNotFound)
		_, err := r.Inspect(ctx, absent)
		assert.ErrorIs(t, err, runtime.ErrNotFound)
		assert.NoError(t, r.Remove(ctx, absent))
	})
}

func TestRemoveDeletesAnonymousVolumes(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	ref := testenv.Image(t, Name, "busybox-volume")
	if ok, err := r.ImageExists(ctx, ref); err != nil || !ok {
		if err := r.PullImage(ctx, ref, nil); err != nil {
			testenv.Unavailable(t, Name, "image %s: %v", ref, err)
		}
	}
	c, err := r.Run(ctx, adaptertest.Sleeper(ref, "sandboxer-test-vol-"+testkit.RandomHex(4), adaptertest.Labels(t, r)))
	require.NoError(t, err)

	var vol string
	for _, m := range c.Mounts {
		if m.Destination == "/data" {
			assert.Equal(t, "volume", m.Type)
			vol = m.Source
		}
	}
	require.NotEmpty(t, vol, "the image's VOLUME /data is an anonymous volume: %+v", c.Mounts)
	_, err = r.cli.VolumeInspect(ctx, vol)
	require.NoError(t, err)

	require.NoError(t, r.Remove(ctx, c.ID))
	_, err = r.cli.VolumeInspect(ctx, vol)
	assert.True(t, cerrdefs.IsNotFound(err), "volume %s is gone: %v", vol, err)
}

func TestListBySelectorAcrossStates(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	img := testkit.Image(t, r, "busybox")
	labels := adaptertest.Labels(t, r)
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range labels {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	name := func(s string) string { return "sandboxer-test-list-" + s + "-" + testkit.RandomHex(4) }

	running, err := r.Run(ctx, adaptertest.Sleeper(img, name("running"), with(map[string]string{"role": "a", "tier": "x"})))
	require.NoError(t, err)
	exitedSpec := adaptertest.Sleeper(img, name("exited"), with(map[string]string{"role": "b", "tier": "x"}))
	exitedSpec.Command = []string{"sh", "-c", "exit 3"}
	exited, err := r.Run(ctx, exitedSpec)
	require.NoError(t, err)
	created, err := r.Create(ctx, adaptertest.Sleeper(img, name("created"), with(map[string]string{"role": "a", "tier": "y"})))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c, err := r.Inspect(ctx, exited.ID)
		return err == nil && c.State == runtime.StateExited
	}, 30*time.Second, 50*time.Millisecond)

	tests := []struct {
		name     string
		selector map[string]string
		want     []string
	}{
		{name: "AllOfTheTest", selector: labels, want: []string{running.ID, exited.ID, created.ID}},
		{name: "OnePair", selector: with(map[string]string{"role": "a"}), want: []string{running.ID, created.ID}},
		{name: "TwoPairs", selector: with(map[string]string{"role": "a", "tier": "x"}), want: []string{running.ID}},
		{name: "ValueMustMatchExactly", selector: with(map[string]string{"tier": "x "}), want: nil},
		{name: "NoMatch", selector: with(map[string]string{"role": "zzz"}), want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.List(ctx, tc.selector)
			require.NoError(t, err)
			var ids []string
			for _, c := range got {
				ids = append(ids, c.ID)
			}
			assert.ElementsMatch(t, tc.want, ids)
		})
	}

	t.Run("StatesAndExitCode", func(t *testing.T) {
		got, err := r.List(ctx, labels)
		require.NoError(t, err)
		states := map[string]runtime.Container{}
		for _, c := range got {
			states[c.ID] = c
		}
		assert.Equal(t, runtime.StateRunning, states[running.ID].State)
		assert.Equal(t, runtime.StateExited, states[exited.ID].State)
		assert.Equal(t, 3, states[exited.ID].ExitCode)
		assert.Equal(t, runtime.StateCreated, states[created.ID].State)
	})
}

func TestNetworks(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	labels := adaptertest.Labels(t, r)
	name := "sandboxer-test-net-" + testkit.RandomHex(4)
	t.Cleanup(func() { _ = r.RemoveNetwork(ctx, name) })

	n, err := r.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: labels})
	require.NoError(t, err)
	assert.Equal(t, name, n.Name)
	assert.NotEmpty(t, n.ID)
	raw, err := r.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	require.NoError(t, err)
	assert.Equal(t, "bridge", raw.Driver)
	assert.Equal(t, labels, raw.Labels)

	_, err = r.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: labels})
	assert.ErrorIs(t, err, runtime.ErrAlreadyExists)

	require.NoError(t, r.RemoveNetwork(ctx, name))
	assert.NoError(t, r.RemoveNetwork(ctx, name), "absent network")
}

func TestImages(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	img := testkit.Image(t, r, "busybox")

	t.Run("Exists", func(t *testing.T) {
		ok, err := r.ImageExists(ctx, img)
		require.NoError(t, err)
		assert.True(t, ok)
	})
	t.Run("AbsentIsFalseNotError", func(t *testing.T) {
		ok, err := r.ImageExists(ctx, "sandboxer-dev/absent:"+testkit.RandomHex(4))
		require.NoError(t, err)
		assert.False(t, ok)
	})

	absent := []struct{ name, ref string }{
		{name: "UnreachableRegistry", ref: "127.0.0.1:1/sandboxer/absent:latest"},
		{name: "InvalidReference", ref: "Not A Reference"},
	}
	if reg := testenv.Getenv("SANDBOXER_REGISTRY"); reg != "" {
		absent = append(absent,
			struct{ name, ref string }{name: "UnknownRepository", ref: reg + "/sandboxer/absent-" + testkit.RandomHex(4) + ":latest"},
			struct{ name, ref string }{name: "UnknownTag", ref: strings.SplitN(img, ":", 2)[0] + ":absent-" + testkit.RandomHex(4)},
		)
	}
	for _, tc := range absent {
		t.Run("Pull"+tc.name+"IsImageNotFound", func(t *testing.T) {
			err := r.PullImage(ctx, tc.ref, nil)
			require.Error(t, err)
			assert.ErrorIs(t, err, runtime.ErrImageNotFound)
			assert.Contains(t, err.Error(), fmt.Sprintf("docker: pull %s", tc.ref))
		})
	}

	t.Run("PullReportsProgress", func(t *testing.T) {
		if testenv.Getenv("SANDBOXER_REGISTRY") == "" {
			testenv.Unavailable(t, Name, "SANDBOXER_REGISTRY is not set (run `make env`)")
		}
		var events []runtime.PullProgress
		require.NoError(t, r.PullImage(ctx, img, func(p runtime.PullProgress) { events = append(events, p) }))
		require.NotEmpty(t, events)
		for _, e := range events {
			assert.Equal(t, img, e.Ref)
			assert.NotEmpty(t, e.Status)
		}
	})
}
