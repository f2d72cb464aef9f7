package testruntimes

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/containerd"
	"github.com/roboco/sandboxer/runtime/docker"
	"github.com/roboco/sandboxer/runtime/podman"
)

// Own runs the runtime's own CLI against the endpoint the adapter talks
// to (`docker --host`, `podman --url`, `ctr --address --namespace`), for
// tests that check a property from outside the adapter, the way a user
// would look; it returns stdout, and fails the test on an error.
func (r Runtime) Own(t testing.TB, ctx context.Context, args ...string) []byte {
	t.Helper()
	argv, err := ownArgv(r.RT)
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s: %s", strings.Join(cmd.Args, " "), stderr.String())
	return out
}

// ownArgv is the runtime's own CLI aimed at rt's endpoint, chosen by the
// adapter (both podman rows use podman).
func ownArgv(rt runtime.ContainerRuntime) ([]string, error) {
	switch rt.Name() {
	case docker.Name:
		return []string{"docker", "--host", rt.Endpoint()}, nil
	case podman.Name:
		return []string{"podman", "--url", rt.Endpoint()}, nil
	case containerd.Name:
		ns, ok := rt.(interface{ Namespace() string })
		if !ok {
			return nil, fmt.Errorf("the %s adapter does not name its namespace", rt.Name())
		}
		return []string{"ctr", "--address", strings.TrimPrefix(rt.Endpoint(), "unix://"), "--namespace", ns.Namespace()}, nil
	}
	return nil, fmt.Errorf("no CLI known for runtime %q", rt.Name())
}

// OwnState is a container's state as the runtime's own tools tell it.
type OwnState struct {
	// Running: docker/podman inspect's State.Running, ctr's task status
	// RUNNING.
	Running bool
	// OOMKilled: docker/podman inspect's State.OOMKilled; on containerd
	// the kernel's own count of OOM kills in the task's memory cgroup
	// (memory.oom_control's oom_kill, memory.events' on cgroup v2), read
	// on the host.
	OOMKilled bool
}

// OwnInspect is the runtime's own record of a container, as its CLI shows
// it (docker/podman inspect, `ctr containers info` with the stored OCI
// spec), as raw JSON.
func (r Runtime) OwnInspect(t testing.TB, ctx context.Context, name string) []byte {
	t.Helper()
	if r.RT.Name() == containerd.Name {
		return r.Own(t, ctx, "containers", "info", r.ctrID(t, ctx, name))
	}
	return r.Own(t, ctx, "inspect", name)
}

// ctrID is the containerd ID of the container ref names, as ctr finds it:
// the one container whose nerdctl/name label is ref (the adapter's IDs are
// random), else ref itself (an ID, or a container made when the ID was
// the name).
func (r Runtime) ctrID(t testing.TB, ctx context.Context, ref string) string {
	t.Helper()
	ids := strings.Fields(string(r.Own(t, ctx, "containers", "ls", "-q", `labels."`+containerd.NerdctlNameLabel+`"==`+ref)))
	require.LessOrEqual(t, len(ids), 1, "ctr lists %d containers named %s: %v", len(ids), ref, ids)
	if len(ids) == 1 {
		return ids[0]
	}
	return ref
}

// OwnStateOf reads a container's state with the runtime's own tools.
func (r Runtime) OwnStateOf(t testing.TB, ctx context.Context, name string) OwnState {
	t.Helper()
	if r.RT.Name() != containerd.Name {
		var got []struct {
			State struct{ Running, OOMKilled bool }
		}
		require.NoError(t, json.Unmarshal(r.OwnInspect(t, ctx, name), &got))
		require.Len(t, got, 1, "inspect %s", name)
		return OwnState{Running: got[0].State.Running, OOMKilled: got[0].State.OOMKilled}
	}
	var st OwnState
	id := r.ctrID(t, ctx, name)
	for _, line := range strings.Split(string(r.Own(t, ctx, "tasks", "ls")), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == id {
			st.Running = f[2] == "RUNNING"
		}
	}
	var info struct {
		Spec struct {
			Linux struct {
				CgroupsPath string `json:"cgroupsPath"`
			} `json:"linux"`
		} `json:"Spec"`
	}
	require.NoError(t, json.Unmarshal(r.Own(t, ctx, "containers", "info", id), &info))
	st.OOMKilled = cgroupOOMKills(t, info.Spec.Linux.CgroupsPath) > 0
	return st
}

// cgroupOOMKills reads the kernel's OOM-kill count of the cgroup at
// cgroupsPath (an OCI spec's linux.cgroupsPath, cgroupfs style): 0 when
// the cgroup is gone.
func cgroupOOMKills(t testing.TB, cgroupsPath string) int {
	t.Helper()
	for _, f := range []struct{ file, key string }{
		{path.Join("/sys/fs/cgroup/memory", cgroupsPath, "memory.oom_control"), "oom_kill"},
		{path.Join("/sys/fs/cgroup", cgroupsPath, "memory.events"), "oom_kill"},
	} {
		b, err := os.ReadFile(f.file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, f.key+" "); ok {
				n, err := strconv.Atoi(strings.TrimSpace(v))
				require.NoError(t, err, "%s: %q", f.file, line)
				return n
			}
		}
		require.FailNow(t, fmt.Sprintf("%s has no %s line", f.file, f.key))
	}
	return 0
}

// OwnPIDs lists the host PIDs of a container's processes, as the
// runtime's own tools list them (docker top, podman top's hpid, ctr task
// ps).
func (r Runtime) OwnPIDs(t testing.TB, ctx context.Context, name string) []string {
	t.Helper()
	var out []byte
	switch r.RT.Name() {
	case docker.Name:
		out = r.Own(t, ctx, "top", name, "-eo", "pid")
	case podman.Name:
		out = r.Own(t, ctx, "top", name, "hpid")
	default:
		out = r.Own(t, ctx, "tasks", "ps", r.ctrID(t, ctx, name))
	}
	var pids []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			if _, err := strconv.Atoi(f[0]); err == nil {
				pids = append(pids, f[0])
			}
		}
	}
	return pids
}
