package faults

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/docker"
)

// privateDockerd is a second Docker daemon that a test starts for itself,
// so that it can restart it without disturbing the shared daemon other
// packages' tests use: its own containerd, socket, data root, exec root
// and pid file under a temporary directory, and as its default network a
// bridge of its own (created here, on a /24 that overlaps nothing on the
// host); no iptables rules, no sysctl changes. t.Cleanup stops it and
// removes everything it made.
//
// Two dockerd settings are deliberately absent, because dockerd 20.10
// deletes the host's "docker0" link (the shared daemon's bridge, by that
// hard-coded name) when it starts with them: --bridge=none, and
// --default-address-pool together with a default bridge network left from
// a previous run (which a restart finds). Without an address pool, a
// user-defined network would take the first of Docker's predefined subnets,
// 172.17.0.0/16, which docker0 already routes; so the tests use host mode
// on the private bridge and create no network. checkDocker0 guards this.
type privateDockerd struct {
	t      *testing.T
	dir    string
	host   string // unix://<dir>/docker.sock
	args   []string
	bridge string // the default network's Linux bridge
	// docker0 reports whether the host had a docker0 link before the
	// private daemon started: it must still have it afterwards.
	docker0 bool

	dockerd *exec.Cmd
	exited  chan struct{} // closed when the current dockerd has exited
	ctrd    *exec.Cmd
	ctrdEnd chan struct{}
}

// startPrivateDockerd starts the daemon, or ends the test through
// testenv.Unavailable when this host cannot run one (not root, no dockerd
// or containerd binary).
func startPrivateDockerd(t *testing.T) *privateDockerd {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, docker.Name, "a private dockerd needs root")
	}
	for _, bin := range []string{"dockerd", "containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Unavailable(t, docker.Name, "a private dockerd needs %s: %v", bin, err)
		}
	}
	// Short: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "sbxd")
	require.NoError(t, err)
	d := &privateDockerd{t: t, dir: dir, host: "unix://" + filepath.Join(dir, "docker.sock")}
	_, err = net.InterfaceByName("docker0")
	d.docker0 = err == nil
	t.Cleanup(d.stop)

	// The default network's bridge: dockerd only uses a bridge of another
	// name than docker0 if it exists.
	subnet := freeSubnet(t)
	d.bridge = "sbxd" + testkit.RandomHex(4)
	gw := subnet.IP.To4()
	gw = net.IPv4(gw[0], gw[1], gw[2], 1)
	ones, _ := subnet.Mask.Size()
	for _, args := range [][]string{
		{"link", "add", "name", d.bridge, "type", "bridge"},
		{"addr", "add", fmt.Sprintf("%s/%d", gw, ones), "dev", d.bridge},
		{"link", "set", d.bridge, "up"},
	} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %v: %s", args, out)
	}

	ctrdSock := filepath.Join(dir, "containerd.sock")
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = ""
[metrics]
  address = ""
`, filepath.Join(dir, "containerd-root"), filepath.Join(dir, "containerd-state"), ctrdSock, ctrdSock+".ttrpc")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "containerd.toml"), []byte(cfg), 0o600))
	d.ctrd, d.ctrdEnd = d.spawn("containerd.log", "containerd", "--config", filepath.Join(dir, "containerd.toml"), "--log-level", "warn")
	testkit.Poll(t, 30*time.Second, 50*time.Millisecond, func() error {
		select {
		case <-d.ctrdEnd:
			require.Fail(t, "containerd exited", "log:\n%s", d.logTail("containerd.log"))
		default:
		}
		c, err := net.Dial("unix", ctrdSock)
		if err != nil {
			return err
		}
		return c.Close()
	}, "private containerd did not come up")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "daemon.json"), []byte("{}\n"), 0o600))
	d.args = []string{
		"--host", d.host,
		"--data-root", filepath.Join(dir, "data"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "docker.pid"),
		"--containerd", ctrdSock,
		"--config-file", filepath.Join(dir, "daemon.json"),
		"--bridge", d.bridge,
		"--iptables=false",
		"--ip-masq=false",
		"--ip-forward=false",
		"--shutdown-timeout", "5",
		"--log-level", "warn",
	}
	d.start()
	t.Logf("private dockerd at %s (bridge %s, %s)", d.host, d.bridge, subnet)
	return d
}

// spawn starts a daemon process with its output in logName under d.dir;
// the returned channel is closed when it exits.
func (d *privateDockerd) spawn(logName, name string, args ...string) (*exec.Cmd, chan struct{}) {
	d.t.Helper()
	logf, err := os.OpenFile(filepath.Join(d.dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(d.t, err)
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a signal meant for the test never reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(d.t, cmd.Start(), "start %s", name)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	return cmd, done
}

// start starts dockerd and waits until it answers.
func (d *privateDockerd) start() {
	d.t.Helper()
	d.dockerd, d.exited = d.spawn("dockerd.log", "dockerd", d.args...)
	testkit.Poll(d.t, time.Minute, 100*time.Millisecond, func() error {
		select {
		case <-d.exited:
			require.Fail(d.t, "private dockerd exited", "log:\n%s", d.logTail("dockerd.log"))
		default:
		}
		rt, err := docker.New(docker.WithHost(d.host))
		if err != nil {
			return err
		}
		defer rt.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = rt.Version(ctx)
		return err
	}, "private dockerd did not answer")
	d.checkDocker0()
}

// checkDocker0 fails the test at once if the host lost its docker0 link
// (see privateDockerd).
func (d *privateDockerd) checkDocker0() {
	d.t.Helper()
	if !d.docker0 {
		return
	}
	_, err := net.InterfaceByName("docker0")
	require.NoError(d.t, err, "the private dockerd removed the host's docker0: the shared daemon's bridge network is broken")
}

// restart sends sig to dockerd, waits for it to exit (SIGKILL after a
// minute) and starts it again with the same directories.
func (d *privateDockerd) restart(sig syscall.Signal) {
	d.t.Helper()
	require.NoError(d.t, d.dockerd.Process.Signal(sig))
	select {
	case <-d.exited:
	case <-time.After(time.Minute):
		_ = d.dockerd.Process.Kill()
		<-d.exited
	}
	d.start()
}

// stop removes every container and network of the private daemon, stops
// it and its containerd, unmounts what they left under d.dir and removes
// d.dir.
func (d *privateDockerd) stop() {
	t := d.t
	if d.dockerd != nil && !closed(d.exited) {
		if rt, err := docker.New(docker.WithHost(d.host)); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if cs, err := rt.List(ctx, nil); err == nil {
				for _, c := range cs {
					if err := rt.Remove(ctx, c.ID); err != nil {
						t.Logf("private dockerd cleanup: %v", err)
					}
				}
			}
			cancel()
			rt.Close()
		}
	}
	stopProcess(d.dockerd, d.exited)
	// A container whose start a dockerd crash interrupted can keep a task
	// (and its shim) in containerd that the restarted dockerd removes the
	// container without: delete every task and container of the private
	// containerd before stopping it, then end any shim of ours left.
	if !closed(d.ctrdEnd) {
		for _, id := range strings.Fields(d.ctr("containers", "ls", "-q")) {
			d.ctr("tasks", "delete", "--force", id)
			d.ctr("containers", "delete", id)
		}
	}
	stopProcess(d.ctrd, d.ctrdEnd)
	killShims(t, filepath.Join(d.dir, "containerd.sock"))
	if d.bridge != "" {
		if _, err := net.InterfaceByName(d.bridge); err == nil {
			if out, err := exec.Command("ip", "link", "del", d.bridge).CombinedOutput(); err != nil {
				t.Logf("private dockerd cleanup: ip link del %s: %v: %s", d.bridge, err, out)
			}
		}
	}
	unmountUnder(t, d.dir)
	if err := os.RemoveAll(d.dir); err != nil {
		t.Logf("private dockerd cleanup: %v", err)
	}
}

// ctr runs ctr against the private containerd, in dockerd's namespace, and
// returns its output (errors are only logged: this is clean-up).
func (d *privateDockerd) ctr(args ...string) string {
	sock := filepath.Join(d.dir, "containerd.sock")
	out, err := exec.Command("ctr", append([]string{"--address", sock, "--namespace", "moby"}, args...)...).CombinedOutput()
	if err != nil {
		d.t.Logf("private containerd cleanup: ctr %v: %v: %s", args, err, out)
	}
	return string(out)
}

// stopProcess ends a daemon this test started: SIGTERM, then SIGKILL after
// 30 s.
func stopProcess(cmd *exec.Cmd, done chan struct{}) {
	if cmd == nil || closed(done) {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// killShims kills the containerd shims (and what runs under them) that
// serve the containerd at sock: only ours, since sock is in our temporary
// directory.
func killShims(t *testing.T, sock string) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") || !slices.Contains(args, sock) {
			continue
		}
		t.Logf("private containerd cleanup: killing leftover shim %d (%s)", pid, strings.Join(args, " "))
		// The shim's process group holds what it runs.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func closed(ch chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// logTail returns the end of one of the daemon's logs.
func (d *privateDockerd) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(d.dir, name))
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// pull pulls refs into the private daemon (from the loopback registry of
// build/images.env).
func (d *privateDockerd) pull(ctx context.Context, rt runtime.ContainerRuntime, refs ...string) {
	d.t.Helper()
	for _, ref := range refs {
		start := time.Now()
		require.NoError(d.t, testkit.Store(d.t, rt).PullImage(ctx, ref, nil), "pull %s into the private dockerd", ref)
		d.t.Logf("pulled %s in %s", ref, time.Since(start).Round(time.Millisecond))
	}
}

// unmountUnder lazily unmounts every mount point below dir, deepest first
// (what a killed daemon may leave behind).
func unmountUnder(t *testing.T, dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, fields[4])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			t.Logf("unmount %s: %v", p, err)
		}
	}
}

// freeSubnet picks a 10.x.y.0/24 that overlaps no address or route of
// this host, for the private daemon's bridge.
func freeSubnet(t *testing.T) *net.IPNet {
	t.Helper()
	var used []*net.IPNet
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				used = append(used, ipn)
			}
		}
	}
	used = append(used, routes()...)
	for range 1000 {
		_, cand, _ := net.ParseCIDR(fmt.Sprintf("10.%d.%d.0/24", 100+rand.IntN(150), rand.IntN(256)))
		if !slices.ContainsFunc(used, func(u *net.IPNet) bool { return u.Contains(cand.IP) || cand.Contains(u.IP) }) {
			return cand
		}
	}
	require.Fail(t, "no free 10.x.y.0/24 for the private dockerd")
	return nil
}

// routes reads the host's IPv4 routes (other than the default route).
func routes() []*net.IPNet {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil
	}
	var out []*net.IPNet
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		dst, err1 := hex.DecodeString(f[1])
		mask, err2 := hex.DecodeString(f[7])
		if err1 != nil || err2 != nil || len(dst) != 4 || len(mask) != 4 {
			continue
		}
		// /proc/net/route is little-endian.
		ip := make(net.IP, 4)
		binary.BigEndian.PutUint32(ip, binary.LittleEndian.Uint32(dst))
		m := make(net.IPMask, 4)
		binary.BigEndian.PutUint32(m, binary.LittleEndian.Uint32(mask))
		if ones, _ := m.Size(); ones == 0 {
			continue
		}
		out = append(out, &net.IPNet{IP: ip, Mask: m})
	}
	return out
}

// errAny reports whether err matches any of kinds.
func errAny(err error, kinds ...error) bool {
	return slices.ContainsFunc(kinds, func(k error) bool { return errors.Is(err, k) })
}
