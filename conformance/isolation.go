package conformance

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// testTmpfsIsTmpfsAndNotOnHostDisk: every tmpfs path is a tmpfs mount
// inside the container, with the options asked for, and a file written
// there appears nowhere under the backend's host data directories, while a
// control file written to the container's own filesystem does (which
// proves the walk looks where the container's files go).
func testTmpfsIsTmpfsAndNotOnHostDisk(t *testing.T, s *suite) {
	ctx := testContext(t)
	require.NotEmpty(t, s.cfg.HostDataDirs, "Config.HostDataDirs: where the backend keeps container filesystems")

	spec := s.spec(t)
	spec.Tmpfs = map[string]string{
		"/scratch": "rw,size=16m,mode=750",
		"/cache":   "",
	}
	scratchOpts := []string{"rw", "size=16384k", "mode=750"}
	if s.forms.TmpfsSizeOnly {
		// The Kubernetes form: a memory-backed emptyDir has a size and
		// nothing else; a mode is refused, never dropped.
		refused := s.spec(t)
		refused.Tmpfs = spec.Tmpfs
		s.assertRefused(t, ctx, refused, "run with a tmpfs mode")
		spec.Tmpfs = map[string]string{"/scratch": "rw,size=16m", "/cache": ""}
		scratchOpts = []string{"rw", "size=16384k"}
	}
	s.run(t, ctx, spec)

	mounts := parseMounts(s.readFile(t, ctx, spec.Name, "/proc/mounts"))
	cases := []struct {
		path     string
		wantOpts []string // options /proc/mounts must show (it omits tmpfs's default mode=1777)
	}{
		{path: "/scratch", wantOpts: scratchOpts},
		{path: "/cache", wantOpts: []string{"rw"}},
	}
	for _, tc := range cases {
		t.Run("mount "+tc.path, func(t *testing.T) {
			m, ok := mounts[tc.path]
			require.True(t, ok, "%s is not a mount point inside the container", tc.path)
			assert.Equal(t, "tmpfs", m.fsType, "%s's filesystem type", tc.path)
			for _, o := range tc.wantOpts {
				assert.Contains(t, m.opts, o, "%s's mount options", tc.path)
			}
		})
	}

	secret := "sbx-conf-tmpfs-" + randomHex(8)
	control := "sbx-conf-control-" + randomHex(8)
	content := randomHex(16)
	s.sh(t, ctx, spec.Name, fmt.Sprintf("printf %%s %s > /scratch/%s && printf %%s %s > /tmp/%s", content, secret, content, control))
	assert.Equal(t, content, s.readFile(t, ctx, spec.Name, "/scratch/"+secret), "the tmpfs file reads back")

	c, err := s.rt.Inspect(ctx, spec.Name)
	require.NoError(t, err)
	require.True(t, c.Running(), "the container must be running while the host disk is searched")

	found := findOnHost(t, s.cfg.HostDataDirs, secret, control)
	assert.Empty(t, found[secret], "a file written to tmpfs reached the host disk")
	assert.NotEmpty(t, found[control],
		"control file %s written to the container's own filesystem was not found under %q: HostDataDirs does not cover the container's files, so the tmpfs check proves nothing",
		control, s.cfg.HostDataDirs)

	c, err = s.rt.Inspect(ctx, spec.Name)
	require.NoError(t, err)
	assert.True(t, c.Running(), "the container was still running after the search")
}

// mount is one line of /proc/mounts.
type mount struct {
	fsType string
	opts   []string
}

// parseMounts maps mount points to their type and options; a later mount
// on the same point hides an earlier one.
func parseMounts(text string) map[string]mount {
	out := map[string]mount{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		out[f[1]] = mount{fsType: f[2], opts: strings.Split(f[3], ",")}
	}
	return out
}

// findOnHost walks dirs and returns, for each of names, the paths of the
// files so named. Unreadable directories are skipped; at least one of dirs
// must exist.
func findOnHost(t testing.TB, dirs []string, names ...string) map[string][]string {
	t.Helper()
	found := map[string][]string{}
	walked := 0
	start := time.Now()
	for _, dir := range dirs {
		if _, err := os.Stat(dir); err != nil {
			t.Logf("host data dir %s: %v", dir, err)
			continue
		}
		walked++
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if d != nil && d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if d.IsDir() && onTmpfs(path) {
				// Memory, not disk: a tmpfs mounted under a data dir (the
				// kubelet mounts each memory-backed emptyDir under its
				// pods dir) holds no file on the host disk.
				return fs.SkipDir
			}
			if slices.Contains(names, d.Name()) {
				found[d.Name()] = append(found[d.Name()], path)
			}
			return nil
		})
		require.NoError(t, err, "walk %s", dir)
	}
	require.Positive(t, walked, "none of the host data dirs %q exists", dirs)
	t.Logf("searched %q in %s", dirs, time.Since(start).Round(time.Millisecond))
	return found
}

// testMemoryCPUPidsLimitsInCgroup: memory, CPU (fractional too) and pids
// limits are in the container's own cgroup files, read inside the
// container, cgroup v1 or v2. Where a rootless runtime runs on cgroup v1
// (no delegation: it cannot enforce them) the limits are refused instead
// (testLimitsRefusedWhereUnenforceable).
func testMemoryCPUPidsLimitsInCgroup(t *testing.T, s *suite) {
	if s.info.Rootless && s.info.CgroupVersion == "1" {
		testLimitsRefusedWhereUnenforceable(t, s)
		return
	}
	cases := []struct {
		name   string
		memory int64
		cpus   float64
		pids   int64
	}{
		{name: "one cpu", memory: 64 << 20, cpus: 1, pids: 64},
		{name: "half a cpu", memory: 48 << 20, cpus: 0.5, pids: 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			spec := s.spec(t)
			spec.MemoryBytes = tc.memory
			spec.CPUs = tc.cpus
			spec.PidsLimit = tc.pids
			if s.forms.NoProcessLimits {
				// The Kubernetes form: no pod field holds a pids limit, so
				// it is refused; memory and CPU are enforced.
				s.assertRefused(t, ctx, spec, "run with a pids limit")
				spec.Name, spec.PidsLimit = s.newName(), 0
			}
			s.run(t, ctx, spec)

			got := s.cgroupLimits(t, ctx, spec.Name)
			assert.Equal(t, tc.memory, got.Memory, "memory limit (cgroup %s)", got.Version)
			assert.InDelta(t, tc.cpus, got.CPUs, 0.001, "CPU quota/period (cgroup %s)", got.Version)
			if !s.forms.NoProcessLimits {
				assert.Equal(t, tc.pids, got.Pids, "pids limit (cgroup %s)", got.Version)
			}
		})
	}
}

// cgroupLimits reads the container's limits from inside it.
func (s *suite) cgroupLimits(t testing.TB, ctx context.Context, container string) testkit.CgroupLimits {
	t.Helper()
	return testkit.ReadCgroupLimits(t, func(path string) (string, bool) {
		if !s.fileExists(t, ctx, container, path) {
			return "", false
		}
		return s.readFile(t, ctx, container, path), true
	})
}

// runtimeSockets are the runtimes' well-known sockets, none of which may
// be visible inside a sandbox.
var runtimeSockets = []string{
	"/var/run/docker.sock",
	"/run/docker.sock",
	"/run/podman/podman.sock",
	"/var/run/podman/podman.sock",
	"/run/containerd/containerd.sock",
	"/var/run/containerd/containerd.sock",
}

// capSysAdmin is CAP_SYS_ADMIN's bit.
const capSysAdmin = 21

// testNoSocketHostMountOrPrivilege: a container gets no runtime socket, no
// host-path mount, no privileged mode and not the full capability set
// unless asked for. Mounts are read from outside the adapter: as the
// backend stored them (Config.StoredMounts) and in the container's own
// /proc/self/mountinfo.
func testNoSocketHostMountOrPrivilege(t *testing.T, s *suite) {
	ctx := testContext(t)
	spec := s.spec(t)
	spec.Tmpfs = map[string]string{"/scratch": ""}
	s.run(t, ctx, spec)

	c, err := s.rt.Inspect(ctx, spec.Name)
	require.NoError(t, err)
	assert.False(t, c.Privileged, "inspect reports privileged")

	// The mounts as the backend stored them, not as the adapter reports
	// them: binds are what would bring a host path in.
	stored, err := s.cfg.StoredMounts(ctx, c.ID)
	require.NoError(t, err, "the backend's stored mounts")
	require.True(t, slices.ContainsFunc(stored, func(m runtime.Mount) bool { return m.Destination == "/scratch" && m.Type == "tmpfs" }),
		"control: the stored mounts %+v hold the tmpfs /scratch asked for", stored)
	for _, m := range stored {
		assert.NotEqual(t, "bind", m.Type, "stored mount %+v: a host path", m)
		assert.Contains(t, []string{"tmpfs", "volume", "proc", "sysfs", "devpts", "mqueue", "cgroup", "cgroup2"}, m.Type, "stored mount %+v", m)
		assert.NotContains(t, m.Source, ".sock", "stored mount %+v", m)
		assert.NotContains(t, m.Destination, ".sock", "stored mount %+v", m)
	}

	// And as the kernel has them inside the container: nothing from a
	// host filesystem but the runtime's own files for this container.
	mountinfo := testkit.ParseMountinfo(t, s.readFile(t, ctx, spec.Name, "/proc/self/mountinfo"))
	require.True(t, slices.ContainsFunc(mountinfo, func(m testkit.MountInfo) bool { return m.Point == "/scratch" && m.FSType == "tmpfs" }),
		"control: /proc/self/mountinfo shows the tmpfs /scratch")
	var own []string
	if s.cfg.OwnIDs != nil {
		own, err = s.cfg.OwnIDs(ctx, c.ID)
		require.NoError(t, err, "the backend's own IDs of %s", c.ID)
	}
	assert.Empty(t, testkit.HostPathMounts(mountinfo, c.ID, own...), "host filesystems mounted inside the container (/proc/self/mountinfo)")

	for _, sock := range runtimeSockets {
		assert.False(t, s.fileExists(t, ctx, spec.Name, sock), "%s exists inside the container", sock)
	}
	sockets := s.sh(t, ctx, spec.Name, `find / \( -path /proc -o -path /sys \) -prune -o -type s -print`)
	assert.Empty(t, strings.TrimSpace(sockets), "unix sockets inside the container")

	lastCap := strings.TrimSpace(readHostFile(t, "/proc/sys/kernel/cap_last_cap"))
	n, err := strconv.Atoi(lastCap)
	require.NoError(t, err, "cap_last_cap %q", lastCap)
	full := uint64(1)<<(n+1) - 1
	for _, proc := range []string{"1", "self"} {
		t.Run("capabilities of "+proc, func(t *testing.T) {
			eff := capEff(t, s.readFile(t, ctx, spec.Name, "/proc/"+proc+"/status"))
			assert.NotEqual(t, full, eff, "CapEff is the full capability set %#x", full)
			assert.Zero(t, eff&(1<<capSysAdmin), "CapEff %#x has CAP_SYS_ADMIN", eff)
		})
	}
}

// capEff extracts CapEff from /proc/<pid>/status.
func capEff(t testing.TB, status string) uint64 {
	t.Helper()
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			require.NoError(t, err, "CapEff %q", v)
			return n
		}
	}
	t.Fatalf("no CapEff in status:\n%s", status)
	return 0
}

// readHostFile reads a file of the host (the test's own machine).
func readHostFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// testRemoveDeletesAnonymousVolumes: a container of an image that declares
// a VOLUME gets one new volume, and removing the container deletes it.
func testRemoveDeletesAnonymousVolumes(t *testing.T, s *suite) {
	ctx := testContext(t)
	spec := s.spec(t)
	_, ours := s.runWithVolume(t, ctx, spec)
	require.NoError(t, s.rt.Remove(ctx, spec.Name), "remove")
	s.waitVolumeGone(t, ctx, ours)
}

// runWithVolume runs spec on the fixture image with VOLUME /data and
// returns the container and the name of the anonymous volume the backend
// made for it.
func (s *suite) runWithVolume(t *testing.T, ctx context.Context, spec runtime.RunSpec) (runtime.Container, string) {
	t.Helper()
	require.NotNil(t, s.cfg.Volumes, "Config.Volumes lists the backend's volumes")
	before, err := s.cfg.Volumes(ctx)
	require.NoError(t, err, "volumes before")

	spec.Image = s.cfg.Fixtures.BusyboxVolume
	ran := s.run(t, ctx, spec)

	during, err := s.cfg.Volumes(ctx)
	require.NoError(t, err, "volumes while the container lives")
	added := difference(during, before)

	// Other users of the backend may create volumes meanwhile: when inspect
	// tells which volume backs /data, only that one is ours.
	c, err := s.rt.Inspect(ctx, spec.Name)
	require.NoError(t, err)
	if i := slices.IndexFunc(c.Mounts, func(m runtime.Mount) bool { return m.Destination == "/data" }); i >= 0 {
		m := c.Mounts[i]
		assert.Equal(t, "volume", m.Type, "/data, the image's VOLUME, is an anonymous volume")
		added = slices.DeleteFunc(added, func(v string) bool { return !strings.Contains(m.Source, v) })
	}
	require.Len(t, added, 1, "the image's VOLUME /data gives one new volume (before %q, during %q)", before, during)
	return ran, added[0]
}

// waitVolumeGone waits until the backend no longer lists the volume ours.
// The deadline is generous: on a cluster the kubelet removes a deleted
// pod's volume directories in a housekeeping pass of its own, after the
// pod is gone from the API, and on a loaded node that pass runs late.
func (s *suite) waitVolumeGone(t *testing.T, ctx context.Context, ours string) {
	t.Helper()
	poll(t, "volume "+ours+" deleted with its container", 30*time.Second, func() error {
		after, err := s.cfg.Volumes(ctx)
		if err != nil {
			return err
		}
		if slices.Contains(after, ours) {
			return errors.New("still listed")
		}
		return nil
	})
}

// difference returns the elements of a that are not in b.
func difference(a, b []string) []string {
	var out []string
	for _, v := range a {
		if !slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	return out
}

// onTmpfs reports whether the directory path is on a tmpfs (statfs(2)).
func onTmpfs(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.TMPFS_MAGIC
}
