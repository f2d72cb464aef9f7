package containerd

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// testLabel marks every container these tests make.
const testLabel = "sandboxer.containerd.test"

func randHex(n int) string { return testkit.RandomHex(n) }

func testContext(t *testing.T) context.Context { return testkit.Context(t, 2*time.Minute) }

// track removes the named container when the test ends.
func track(t *testing.T, r *Runtime, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, r.Remove(ctx, name), "cleanup: remove %s", name)
	})
}

// testRegistry serves an in-memory registry on 127.0.0.1 and returns its
// host:port.
func testRegistry(t *testing.T) string {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// pushImage pushes a one-layer image of files, declaring volumes, to the
// registry and returns its ref; the pulled copy is deleted from containerd
// when the test ends.
func pushImage(t *testing.T, r *Runtime, host string, files map[string]string, volumes ...string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for p, content := range files {
		if dir := filepath.Dir(p); dir != "." && !dirs[dir] {
			dirs[dir] = true
			require.NoError(t, tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o750, Uid: 123, Gid: 456}))
		}
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o640, Size: int64(len(content)), Uid: 123, Gid: 456}))
		_, err := tw.Write([]byte(content))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	require.NoError(t, err)
	img, err := mutate.AppendLayers(empty.Image, layer)
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", goruntime.GOARCH
	cfg.Config.Cmd = []string{"/none"}
	cfg.Config.Volumes = map[string]struct{}{}
	for _, v := range volumes {
		cfg.Config.Volumes[v] = struct{}{}
	}
	img, err = mutate.ConfigFile(img, cfg)
	require.NoError(t, err)

	ref := host + "/sandboxer/test-" + randHex(4) + ":v1"
	dst, err := name.ParseReference(ref, name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(dst, img), "push %s", ref)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if n, err := normalizeRef(ref); err == nil {
			_ = r.client.ImageService().Delete(r.ctx(ctx), n)
		}
	})
	return ref
}

// TestPullFromLoopbackRegistry: a registry on 127.0.0.1 is spoken to over
// plain HTTP; the pull reports progress and unpacks; a ref it does not have
// is ErrImageNotFound naming the ref, and so is a registry that is gone.
func TestPullFromLoopbackRegistry(t *testing.T) {
	r := newTestRuntime(t)
	ctx := testContext(t)
	host := testRegistry(t)
	ref := pushImage(t, r, host, map[string]string{"etc/hello": "hi"})

	exists, err := r.ImageExists(ctx, ref)
	require.NoError(t, err)
	require.False(t, exists, "not pulled yet")

	var events atomic.Int64
	var layers atomic.Int64
	require.NoError(t, r.PullImage(ctx, ref, func(p runtime.PullProgress) {
		events.Add(1)
		assert.Equal(t, ref, p.Ref)
		if p.Status == "Download complete" && strings.Contains(p.Layer, "layer") {
			layers.Add(1)
		}
	}))
	assert.Positive(t, events.Load(), "progress events")
	assert.Equal(t, int64(1), layers.Load(), "one layer downloaded")

	exists, err = r.ImageExists(ctx, ref)
	require.NoError(t, err)
	assert.True(t, exists, "present after the pull")

	missing := host + "/sandboxer/absent-" + randHex(4) + ":none"
	err = r.PullImage(ctx, missing, nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, runtime.ErrImageNotFound)
	assert.Contains(t, err.Error(), missing)

	gone := testRegistryGone(t) + "/sandboxer/x:y"
	err = r.PullImage(ctx, gone, nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, runtime.ErrImageNotFound, "an unreachable registry: the image cannot be had")
	assert.NotErrorIs(t, err, runtime.ErrUnavailable, "the daemon is fine")
}

// testRegistryGone is the address of a registry that no longer listens.
func testRegistryGone(t *testing.T) string {
	srv := httptest.NewServer(registry.New())
	host := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	return host
}

// TestAnonymousVolumeSeededAndRemoved: an image's VOLUME becomes a volume
// snapshot holding the image's content at that path (owner and mode
// kept), reported as a volume mount; a tmpfs on the same path replaces it;
// Remove deletes it.
func TestAnonymousVolumeSeededAndRemoved(t *testing.T) {
	r := newTestRuntime(t)
	ctx := testContext(t)
	ref := pushImage(t, r, testRegistry(t), map[string]string{"data/seed": "from the image"}, "/data", "/empty")
	require.NoError(t, r.PullImage(ctx, ref, nil))

	name := "sbx-test-" + randHex(4)
	track(t, r, name)
	c, err := r.Create(ctx, runtime.RunSpec{Name: name, Image: ref, Labels: map[string]string{testLabel: "1"}})
	require.NoError(t, err)
	require.Len(t, c.Mounts, 2, "one volume per VOLUME: %+v", c.Mounts)
	byDest := map[string]runtime.Mount{}
	for _, m := range c.Mounts {
		assert.Equal(t, "volume", m.Type)
		byDest[m.Destination] = m
	}
	require.Contains(t, byDest, "/data")
	require.Contains(t, byDest, "/empty")

	vols, err := r.Volumes(ctx)
	require.NoError(t, err)
	assert.Contains(t, vols, byDest["/data"].Source)
	assert.Contains(t, vols, byDest["/empty"].Source)

	dir := volumeDir(t, r, byDest["/data"].Source)
	b, err := os.ReadFile(filepath.Join(dir, "seed"))
	require.NoError(t, err, "the volume is seeded from the image")
	assert.Equal(t, "from the image", string(b))
	st, err := os.Stat(filepath.Join(dir, "seed"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), st.Mode().Perm(), "mode kept")
	if sys, ok := st.Sys().(*syscall.Stat_t); assert.True(t, ok) {
		assert.Equal(t, [2]uint32{123, 456}, [2]uint32{sys.Uid, sys.Gid}, "owner kept")
	}

	require.NoError(t, r.Remove(ctx, name))
	vols, err = r.Volumes(ctx)
	require.NoError(t, err)
	assert.NotContains(t, vols, byDest["/data"].Source, "removed with the container")
	assert.NotContains(t, vols, byDest["/empty"].Source, "removed with the container")

	t.Run("a tmpfs on the path replaces the volume", func(t *testing.T) {
		name := "sbx-test-" + randHex(4)
		track(t, r, name)
		c, err := r.Create(ctx, runtime.RunSpec{Name: name, Image: ref, Tmpfs: map[string]string{"/data": ""}, Labels: map[string]string{testLabel: "1"}})
		require.NoError(t, err)
		assert.ElementsMatch(t, []runtime.Mount{
			{Type: "tmpfs", Source: "tmpfs", Destination: "/data"},
			{Type: "volume", Source: c.Mounts[1].Source, Destination: "/empty"},
		}, c.Mounts)
	})
}

// volumeDir is where a volume snapshot's files are on the host.
func volumeDir(t *testing.T, r *Runtime, key string) string {
	t.Helper()
	ms, err := r.client.SnapshotService(r.snapshotter).Mounts(r.ctx(context.Background()), key)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	return ms[0].Source
}

// TestRunFailureLeavesNothing: a run that fails at any step leaves no
// container, no volume and no IP allocation behind, with the right kind.
func TestRunFailureLeavesNothing(t *testing.T) {
	r := newTestRuntime(t)
	busybox := testenv.Image(t, Name, "busybox")
	ctx := testContext(t)
	cases := []struct {
		name     string
		spec     func(spec runtime.RunSpec) runtime.RunSpec
		wantKind error
	}{
		{name: "command not in the image", spec: func(s runtime.RunSpec) runtime.RunSpec { s.Command = []string{"/no/such/binary"}; return s }},
		{name: "unknown network", wantKind: runtime.ErrNotFound, spec: func(s runtime.RunSpec) runtime.RunSpec { s.Network = "sbx-test-absent-" + randHex(4); return s }},
		{name: "unknown ulimit", wantKind: runtime.ErrInvalid, spec: func(s runtime.RunSpec) runtime.RunSpec {
			s.Ulimits = []runtime.Ulimit{{Name: "bogus", Soft: 1, Hard: 1}}
			return s
		}},
		{name: "absent image", wantKind: runtime.ErrImageNotFound, spec: func(s runtime.RunSpec) runtime.RunSpec { s.Image = "sandboxer-test/absent:none"; return s }},
		{name: "invalid name", spec: func(s runtime.RunSpec) runtime.RunSpec { s.Name = "no spaces allowed"; return s }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec(runtime.RunSpec{
				Name:    "sbx-test-" + randHex(4),
				Image:   busybox,
				Command: []string{"sleep", "60"},
				Labels:  map[string]string{testLabel: "1"},
			})
			_, err := r.Run(ctx, spec)
			require.Error(t, err)
			if tc.wantKind != nil {
				assert.ErrorIs(t, err, tc.wantKind)
			}
			assert.Contains(t, err.Error(), Name)
			_, err = r.Inspect(ctx, spec.Name)
			assert.ErrorIs(t, err, runtime.ErrNotFound, "no container left")
			if id := idOf(t, r, spec.Name); id != "" { // else it failed before a container was made
				assert.Empty(t, allocationsOf(t, r, id), "no IP left allocated to it")
				assert.NoFileExists(t, r.reservationFile(r.namespace, id), "no host port left reserved for it")
			}
		})
	}
}

// allocationsOf lists host-local's allocations, on any network, that
// belong to the container id (an allocation's file holds the container ID
// on its first line): other tests allocate on the same networks at the
// same time, so only these say anything about this container.
func allocationsOf(t *testing.T, r *Runtime, id string) []string {
	files, err := filepath.Glob(filepath.Join(r.ipamDir(), "*", "*"))
	require.NoError(t, err)
	var ips []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue // released meanwhile
		}
		require.NoError(t, err)
		if owner, _, _ := strings.Cut(string(b), "\n"); strings.TrimSpace(owner) == id {
			ips = append(ips, filepath.Base(f))
		}
	}
	return ips
}

// reservedIPs lists host-local's allocations on a network.
func reservedIPs(t *testing.T, r *Runtime, network string) []string {
	return testkit.HostLocalAddresses(t, filepath.Join(r.ipamDir(), network))
}

// TestAnotherInstanceSeesAndRemoves: what one adapter instance created,
// another (as another process would) inspects with its address and ports,
// and removes without leaving firewall or port-forwarding rules.
func TestAnotherInstanceSeesAndRemoves(t *testing.T) {
	first := newTestRuntime(t)
	second := newTestRuntime(t)
	busybox := testenv.Image(t, Name, "busybox")
	ctx := testContext(t)

	network := "sbx-test-" + randHex(4)
	_, err := first.CreateNetwork(ctx, runtime.NetworkSpec{Name: network})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, second.RemoveNetwork(context.Background(), network)) })

	name := "sbx-test-" + randHex(4)
	track(t, second, name)
	ran, err := first.Run(ctx, runtime.RunSpec{
		Name: name, Image: busybox, Command: []string{"sleep", "600"}, Network: network,
		Ports:  []runtime.PortSpec{{ContainerPort: 8080}},
		Labels: map[string]string{testLabel: "1"},
	})
	require.NoError(t, err)
	ip := ran.Networks[network]
	require.NotEmpty(t, ip)
	require.Len(t, ran.Ports, 1)

	got, err := second.Inspect(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, ran.Networks, got.Networks, "addresses, as recorded")
	assert.Equal(t, ran.Ports, got.Ports, "published ports, as recorded")
	assert.Contains(t, iptablesRules(t), ip, "the firewall lets the container's traffic through")

	err = second.RemoveNetwork(ctx, network)
	assert.Error(t, err, "a network in use is not removed")

	require.NoError(t, second.Remove(ctx, name))
	assert.NotContains(t, iptablesRules(t), ip, "no rule about the container survives its removal")
	assert.NotContains(t, iptablesRules(t), name, "no rule about the container survives its removal")
	assert.Empty(t, reservedIPs(t, second, network), "its IP is released")
}

// iptablesRules dumps the host's IPv4 rules.
func iptablesRules(t *testing.T) string {
	out, err := exec.Command("iptables-save").Output()
	require.NoError(t, err)
	return string(out)
}

// TestContainerHardening: like Docker's defaults, a container runs under a
// seccomp filter, with no_new_privs, and with its name as hostname.
func TestContainerHardening(t *testing.T) {
	r := newTestRuntime(t)
	busybox := testenv.Image(t, Name, "busybox")
	ctx := testContext(t)
	name := "sbx-test-" + randHex(4)
	track(t, r, name)
	_, err := r.Run(ctx, runtime.RunSpec{Name: name, Image: busybox, Command: []string{"sleep", "600"}, Labels: map[string]string{testLabel: "1"}})
	require.NoError(t, err)

	res, err := r.Exec(ctx, name, runtime.ExecSpec{Cmd: []string{"sh", "-c", "grep -E '^(Seccomp|NoNewPrivs):' /proc/1/status; hostname"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	out := string(res.Stdout)
	assert.Regexp(t, `(?m)^Seccomp:\s+2$`, out, "a seccomp filter is in force")
	assert.Regexp(t, `(?m)^NoNewPrivs:\s+1$`, out)
	assert.Regexp(t, `(?m)^`+name+`$`, out, "hostname")
}

// TestRemoveOfAnImpossibleNameIsNoError: no container can be named so, so
// there is nothing to remove.
func TestRemoveOfAnImpossibleNameIsNoError(t *testing.T) {
	r := newTestRuntime(t)
	assert.NoError(t, r.Remove(testContext(t), "no spaces allowed"))
}
