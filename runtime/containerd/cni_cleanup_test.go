package containerd

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/runtime"
)

// footprint is what a container's CNI networking leaves on the host, read
// with the host's own tools (iptables, the host-local IPAM directory,
// sysfs, libcni's cache), not through the adapter's record. The daemons
// and the host are shared with other tests that add rules of their own
// meanwhile, so only what names this container, its network's subnet or
// bridge, or portmap's DNAT chain for it is kept: all of it that can be
// this container's.
type footprint struct {
	NAT        []string // iptables -t nat -S
	Filter     []string // iptables-save -t filter
	IPs        []string // host-local's allocation files of the network
	Veths      []string // the interfaces on the network's bridge
	CNIResults []string // libcni's cached ADD results of the container
}

func (f footprint) empty() bool {
	return len(f.NAT)+len(f.Filter)+len(f.IPs)+len(f.Veths)+len(f.CNIResults) == 0
}

// ipv4Re finds the IPv4 addresses of a line.
var ipv4Re = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`)

// dnatChain is portmap's DNAT chain of a container on a network
// (utils.FormatChainName("DN-", network, id) of the CNI plugins: "CNI-DN-"
// and the SHA-512 of network+id, cut to iptables' 28 characters).
func dnatChain(network, id string) string {
	sum := sha512.Sum512([]byte(network + id))
	return ("CNI-DN-" + hex.EncodeToString(sum[:]))[:28]
}

// footprintOf reads the footprint of container id on network def.
func footprintOf(t *testing.T, r *Runtime, def *networkDef, id string) footprint {
	t.Helper()
	subnet := netip.MustParsePrefix(def.Subnet)
	inSubnet := func(line string) bool {
		for _, a := range ipv4Re.FindAllString(line, -1) {
			if addr, err := netip.ParseAddr(a); err == nil && subnet.Contains(addr) {
				return true
			}
		}
		return false
	}
	mine := func(line string) bool {
		return strings.Contains(line, `"`+id+`"`) || inSubnet(line) ||
			strings.Contains(line, def.Bridge) || strings.Contains(line, dnatChain(def.Name, id))
	}
	rules := func(args ...string) []string {
		out, err := exec.Command(args[0], args[1:]...).Output()
		require.NoError(t, err, "%s", strings.Join(args, " "))
		return slices.DeleteFunc(strings.Split(string(out), "\n"), func(l string) bool { return !mine(l) })
	}
	var results []string
	entries, err := os.ReadDir(filepath.Join(libcni.CacheDir, "results"))
	if !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), "-"+id+"-") {
			results = append(results, e.Name())
		}
	}
	return footprint{
		NAT:        orNil(rules("iptables", "-w", "-t", "nat", "-S")),
		Filter:     orNil(rules("iptables-save", "-t", "filter")),
		IPs:        orNil(reservedIPs(t, r, def.Name)),
		Veths:      orNil(bridgePorts(def.Bridge)),
		CNIResults: orNil(results),
	}
}

// orNil makes an empty list nil, so that footprints compare by content.
func orNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// testNetwork creates a network of the test's own (so that its subnet and
// bridge are the test's alone), removed when the test ends.
func testNetwork(t *testing.T, r *Runtime) *networkDef {
	t.Helper()
	ctx := testContext(t)
	name := "sbx-test-" + randHex(4)
	_, err := r.CreateNetwork(ctx, runtime.NetworkSpec{Name: name})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, r.RemoveNetwork(context.Background(), name), "cleanup: remove network %s", name)
	})
	def, err := r.readNetwork(name)
	require.NoError(t, err)
	require.NotNil(t, def)
	return def
}

// freshContainer makes a network of the test's own and picks a container
// name, which is removed (through r) if it exists when the test ends: a
// pair with no footprint yet, which the test checks and returns as the
// state to come back to.
func freshContainer(t *testing.T, r *Runtime) (*networkDef, string, footprint) {
	t.Helper()
	def := testNetwork(t, r)
	name := "sbx-test-" + randHex(4)
	t.Cleanup(func() { _ = r.Remove(context.Background(), name) })
	before := footprintOf(t, r, def, name)
	require.True(t, before.empty(), "a new network and a new name have no footprint: %+v", before)
	return def, name, before
}

// TestFailedNetworkJoinLeavesNothing: a CNI ADD that fails part-way (the
// bridge plugin made the veth and took an address, then portmap or firewall
// failed, or the run's context ended while firewall ran) is undone before
// Run returns: no IP allocation, no portmap DNAT chain or rule, no firewall
// rule, no veth, no cached result, no lease; the container is gone.
func TestFailedNetworkJoinLeavesNothing(t *testing.T) {
	busybox := testenv.Image(t, Name, "busybox")
	cases := []struct {
		name string
		// plugin, script: the plugin that misbehaves, and how.
		plugin, script string
		// cancelWhile, when set, is a file the script creates once it runs:
		// the test then cancels the run's context and lets the plugin go
		// on (it waits for the file go beside it).
		cancelWhile bool
		wantErr     error
	}{
		{name: "firewall ADD fails", plugin: "firewall", script: testkit.CNIFailOn("ADD")},
		{name: "portmap ADD fails", plugin: "portmap", script: testkit.CNIFailOn("ADD")},
		{name: "the run's context ends during the firewall ADD", plugin: "firewall", cancelWhile: true, wantErr: context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			signals := t.TempDir()
			script := tc.script
			if tc.cancelWhile {
				script = fmt.Sprintf(`if [ "$CNI_COMMAND" = ADD ]; then touch %[1]s/started; i=0; while [ ! -e %[1]s/go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; fi`, signals)
			}
			r := newTestRuntime(t, WithCNIPluginDirs(testkit.CNIPluginDirWith(t, DefaultCNIPluginDirs, tc.plugin, script)))
			def, name, before := freshContainer(t, r)

			ctx, cancel := context.WithCancel(testContext(t))
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := r.Run(ctx, runtime.RunSpec{
					Name: name, Image: busybox, Command: []string{"sleep", "600"}, Network: def.Name,
					Ports:  []runtime.PortSpec{{ContainerPort: 8080}},
					Labels: map[string]string{testLabel: "1"},
				})
				errc <- err
			}()
			if tc.cancelWhile {
				testkit.Poll(t, time.Minute, 20*time.Millisecond, func() error {
					_, err := os.Stat(filepath.Join(signals, "started"))
					return err
				}, "the firewall plugin's ADD starts")
				during := footprintOf(t, r, def, idOf(t, r, name))
				assert.NotEmpty(t, during.IPs, "control: the bridge plugin took an address before firewall ran")
				assert.NotEmpty(t, during.Veths, "control: the bridge plugin made a veth before firewall ran")
				assert.NotEmpty(t, during.NAT, "control: portmap wrote its DNAT rules before firewall ran")
				cancel()
				require.NoError(t, os.WriteFile(filepath.Join(signals, "go"), nil, 0o600))
			}
			var err error
			select {
			case err = <-errc:
			case <-time.After(2 * time.Minute):
				t.Fatal("Run did not return")
			}
			require.Error(t, err, "the run fails")
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
			}
			_, ierr := r.Inspect(testContext(t), name)
			assert.ErrorIs(t, ierr, runtime.ErrNotFound, "no container left")
			id := idOf(t, r, name)
			require.NotEmpty(t, id, "the run made a container")
			assert.Equal(t, before, footprintOf(t, r, def, id), "the host's network state is as before")
			assert.NoFileExists(t, r.leaseFile(r.namespace, id), "no network lease left")
			assert.NoFileExists(t, r.reservationFile(r.namespace, id), "no host port left reserved")
		})
	}
}

// chainRaceMsg is what the firewall plugin says when a concurrent ADD
// created its chain first (seen under make ci: 20 owners at once).
const chainRaceMsg = "running [/usr/sbin/iptables -t filter -N CNI-FORWARD --wait]: exit status 4: iptables v1.8.9 (nf_tables):  CHAIN_USER_ADD failed (File exists): chain CNI-FORWARD"

// TestNetworkJoinRetriesALostChainRace: an ADD whose firewall plugin lost
// the race to create its iptables chain is undone and tried again, so the
// run succeeds and, once removed, leaves the host as it was; a plugin that
// keeps losing fails the run after maxAddAttempts, with nothing left.
func TestNetworkJoinRetriesALostChainRace(t *testing.T) {
	busybox := testenv.Image(t, Name, "busybox")
	for _, tc := range []struct {
		name   string
		losses int // ADDs that lose the race before the real plugin runs
		wantOK bool
	}{
		{name: "once", losses: 1, wantOK: true},
		{name: "every time", losses: maxAddAttempts, wantOK: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			script := fmt.Sprintf(`if [ "$CNI_COMMAND" = ADD ] && [ "$(ls %[1]s | wc -l)" -lt %[2]d ]; then mktemp -p %[1]s >/dev/null; echo '{"cniVersion":"1.0.0","code":999,"msg":"%[3]s"}'; exit 1; fi`, state, tc.losses, chainRaceMsg)
			r := newTestRuntime(t, WithCNIPluginDirs(testkit.CNIPluginDirWith(t, DefaultCNIPluginDirs, "firewall", script)))
			def, name, before := freshContainer(t, r)

			ctx := testContext(t)
			c, err := r.Run(ctx, runtime.RunSpec{
				Name: name, Image: busybox, Command: []string{"sleep", "600"}, Network: def.Name,
				Ports:  []runtime.PortSpec{{ContainerPort: 8080}},
				Labels: map[string]string{testLabel: "1"},
			})
			lost, rerr := os.ReadDir(state)
			require.NoError(t, rerr)
			assert.Len(t, lost, tc.losses, "ADDs that lost the race")
			if tc.wantOK {
				require.NoError(t, err, "the ADD tried again succeeds")
				assert.NotEmpty(t, c.Networks[def.Name], "an address on the network")
				require.NoError(t, r.Remove(ctx, name))
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "File exists", "the plugin's last error")
			}
			_, ierr := r.Inspect(ctx, name)
			assert.ErrorIs(t, ierr, runtime.ErrNotFound, "no container left")
			id := idOf(t, r, name)
			require.NotEmpty(t, id, "the run made a container")
			assert.Equal(t, before, footprintOf(t, r, def, id), "the host's network state is as before")
			assert.NoFileExists(t, r.leaseFile(r.namespace, id), "no network lease left")
		})
	}
}

// crashChildEnv tells the test binary, run again as a child, to run one
// container and SIGKILL itself once the container joined its network and
// before that is recorded: "<name> <network>".
const crashChildEnv = "SANDBOXER_TEST_CRASH_AFTER_JOIN"

func TestMain(m *testing.M) {
	testHookCreated = func(name, id string) { createdIDs.Store(name, id) }
	if v := os.Getenv(crashChildEnv); v != "" {
		crashAfterJoin(v)
		return
	}
	os.Exit(m.Run())
}

// createdIDs maps the name of each container this test process made to
// its ID (the last one made under the name).
var createdIDs sync.Map

// idOf is the ID of the last container made under name by this process,
// or, failing that, of the container of that name (one another process
// made); "" when there is none.
func idOf(t *testing.T, r *Runtime, name string) string {
	t.Helper()
	if id, ok := createdIDs.Load(name); ok {
		return id.(string)
	}
	c, err := r.Inspect(testContext(t), name)
	if err != nil {
		return ""
	}
	return c.ID
}

// crashAfterJoin is the child of TestCrashAfterJoinIsReconciled. It exits
// 3 if it outlives its Run (which must not happen).
func crashAfterJoin(arg string) {
	name, network, _ := strings.Cut(arg, " ")
	r, err := New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	testHookAttached = func(string) { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = r.Run(ctx, runtime.RunSpec{
		Name: name, Image: os.Getenv("SANDBOXER_IMAGE_BUSYBOX"), Command: []string{"sleep", "600"}, Network: network,
		Ports:  []runtime.PortSpec{{ContainerPort: 8080}},
		Labels: map[string]string{testLabel: "1"},
	})
	fmt.Fprintln(os.Stderr, "crash child: Run returned:", err)
	os.Exit(3)
}

// crashAfterJoin runs the child and checks it died of SIGKILL, leaving the
// container with CNI state that its record does not mention; it returns
// the container's ID.
func runCrashChild(t *testing.T, r *Runtime, def *networkDef, name string) string {
	t.Helper()
	ctx := testContext(t)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+name+" "+def.Name, "SANDBOXER_IMAGE_BUSYBOX="+testenv.Image(t, Name, "busybox"))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child is killed: %s", out)
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the child dies of SIGKILL, not %v: %s", err, out)

	id := idOf(t, r, name)
	require.NotEmpty(t, id, "the container outlives the process")
	c, err := r.client.LoadContainer(r.ctx(ctx), id)
	require.NoError(t, err, "the container outlives the process")
	info, err := c.Info(r.ctx(ctx))
	require.NoError(t, err)
	rec, err := recordOf(info)
	require.NoError(t, err)
	require.Empty(t, rec.Attached, "the join was not recorded")
	left := footprintOf(t, r, def, id)
	require.NotEmpty(t, left.IPs, "control: the killed process left an IP allocation")
	require.NotEmpty(t, left.NAT, "control: the killed process left portmap's rules")
	require.FileExists(t, r.leaseFile(r.namespace, id), "the lease names what the record does not")
	return id
}

// deleteBehindTheBack removes a container the way ctr would (kill and
// delete its task, delete it with its snapshot), without the adapter.
func deleteBehindTheBack(t *testing.T, r *Runtime, id string) {
	t.Helper()
	ctx := r.ctx(testContext(t))
	c, err := r.client.LoadContainer(ctx, id)
	require.NoError(t, err)
	if task, err := c.Task(ctx, nil); err == nil {
		_, err = task.Delete(ctx, client.WithProcessKill)
		require.NoError(t, err, "ctr task rm -f")
	}
	require.NoError(t, c.Delete(ctx, client.WithSnapshotCleanup), "ctr container rm")
}

// TestCrashAfterJoinIsReconciled: a process SIGKILLed between its CNI ADD
// and recording it leaves a container whose network state only its lease
// names. Removing the container through the adapter removes that state; so
// does the next Run once the container was removed behind the adapter's
// back (the allocation and the rules name a container that no longer
// exists). Afterwards iptables and the IPAM directory are as before.
func TestCrashAfterJoinIsReconciled(t *testing.T) {
	r := newTestRuntime(t)
	busybox := testenv.Image(t, Name, "busybox")
	cases := []struct {
		name  string
		after func(t *testing.T, name, id string)
	}{
		{name: "Remove through the adapter", after: func(t *testing.T, name, _ string) {
			require.NoError(t, r.Remove(testContext(t), name))
		}},
		{name: "removed behind its back, then the next Run", after: func(t *testing.T, _, id string) {
			deleteBehindTheBack(t, r, id)
			next := "sbx-test-" + randHex(4)
			track(t, r, next)
			_, err := r.Run(testContext(t), runtime.RunSpec{Name: next, Image: busybox, Command: []string{"sleep", "600"}, Labels: map[string]string{testLabel: "1"}})
			require.NoError(t, err)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			def, name, before := freshContainer(t, r)

			id := runCrashChild(t, r, def, name)
			tc.after(t, name, id)

			_, err := r.Inspect(testContext(t), name)
			assert.ErrorIs(t, err, runtime.ErrNotFound, "the crashed container is gone")
			assert.Equal(t, before, footprintOf(t, r, def, id), "the host's network state is as before")
			assert.NoFileExists(t, r.leaseFile(r.namespace, id), "no network lease left")
		})
	}
}

// TestFailedLeaveIsReconciled: a Remove whose CNI DEL fails (the firewall
// plugin's DEL fails, and libcni stops the list's DEL there) still removes
// the container and leaves a lease; Reconcile then removes the network
// state, whether called as such (what `sweep containers`, so make env-down,
// does), by the next Run, or by a janitor sweep (gc).
func TestFailedLeaveIsReconciled(t *testing.T) {
	r := newTestRuntime(t)
	broken := newTestRuntime(t, WithCNIPluginDirs(testkit.CNIPluginDirWith(t, DefaultCNIPluginDirs, "firewall", testkit.CNIFailOn("DEL"))))
	busybox := testenv.Image(t, Name, "busybox")
	cases := []struct {
		name      string
		reconcile func(t *testing.T, ctx context.Context, name, network string)
	}{
		{name: "Reconcile", reconcile: func(t *testing.T, ctx context.Context, _, _ string) {
			require.NoError(t, r.Reconcile(ctx))
		}},
		{name: "the next Run", reconcile: func(t *testing.T, ctx context.Context, _, _ string) {
			next := "sbx-test-" + randHex(4)
			track(t, r, next)
			_, err := r.Run(ctx, runtime.RunSpec{Name: next, Image: busybox, Command: []string{"sleep", "600"}, Labels: map[string]string{testLabel: "1"}})
			require.NoError(t, err)
		}},
		{name: "a janitor sweep (gc)", reconcile: func(t *testing.T, ctx context.Context, _, _ string) {
			// A label prefix of its own: the sweep has no sandbox to judge.
			j, err := janitor.New(r, janitor.Options{Prefix: "sbxt" + randHex(4)})
			require.NoError(t, err)
			_, err = j.Sweep(ctx)
			require.NoError(t, err)
		}},
		{name: "a new container of the same name", reconcile: func(t *testing.T, ctx context.Context, name, network string) {
			// It gets an ID of its own, so the old lease is not its
			// business: its Run's reconcile undoes it, as any Run's does.
			old := idOf(t, r, name)
			c, err := r.Run(ctx, runtime.RunSpec{Name: name, Image: busybox, Command: []string{"sleep", "600"}, Network: network,
				Ports: []runtime.PortSpec{{ContainerPort: 8080}}, Labels: map[string]string{testLabel: "1"}})
			require.NoError(t, err, "the name runs again")
			require.NotEqual(t, old, c.ID, "under an ID of its own")
			require.NoError(t, r.Remove(ctx, name))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			def, name, before := freshContainer(t, r)

			c, err := r.Run(ctx, runtime.RunSpec{
				Name: name, Image: busybox, Command: []string{"sleep", "600"}, Network: def.Name,
				Ports:  []runtime.PortSpec{{ContainerPort: 8080}},
				Labels: map[string]string{testLabel: "1"},
			})
			require.NoError(t, err)
			id := c.ID
			require.NoFileExists(t, r.leaseFile(r.namespace, id), "a recorded join holds no lease")

			require.NoError(t, broken.Remove(ctx, name), "Remove goes on past a failed DEL")
			_, err = r.Inspect(ctx, name)
			require.ErrorIs(t, err, runtime.ErrNotFound)
			left := footprintOf(t, r, def, id)
			require.NotEmpty(t, left.IPs, "control: the failed DEL left the IP allocation")
			require.NotEmpty(t, left.NAT, "control: the failed DEL left portmap's rules")
			require.FileExists(t, r.leaseFile(r.namespace, id), "the failed DEL left a lease")

			tc.reconcile(t, ctx, name, def.Name)
			assert.Equal(t, before, footprintOf(t, r, def, id), "the host's network state is as before")
			assert.NoFileExists(t, r.leaseFile(r.namespace, id), "no network lease left")
		})
	}
}

// setHook sets one of the adapter's test hooks until the test ends.
func setHook[F any](t *testing.T, hook *F, f F) {
	t.Helper()
	*hook = f
	t.Cleanup(func() { var zero F; *hook = zero })
}

// TestReconcileDuringAJoinLeavesTheNewContainer: a reconcile that found
// the container of a leftover lease gone (an older container of the name,
// whose DEL failed) and then goes on while a newer container of that name
// joins the network undoes the older container's state only: the newer
// one keeps its address (in its network namespace and in host-local's
// allocations) and its published port, which answers through the host's
// DNAT rules; once removed, nothing of either is left. The reconcile is
// held (a test hook) just after it found the container gone, while the
// newer container runs, and let go as soon as the join waits for the
// leases lock, or else once the join is done and not yet recorded: the
// window in which a reconcile that does not share the join's lock reads
// the new lease and DELs the new container's network.
func TestReconcileDuringAJoinLeavesTheNewContainer(t *testing.T) {
	r := newTestRuntime(t)
	broken := newTestRuntime(t, WithCNIPluginDirs(testkit.CNIPluginDirWith(t, DefaultCNIPluginDirs, "firewall", testkit.CNIFailOn("DEL"))))
	busybox := testenv.Image(t, Name, "busybox")
	ctx := testContext(t)
	def, name, before := freshContainer(t, r)
	spec := runtime.RunSpec{
		Name: name, Image: busybox, Network: def.Name,
		Command: []string{"sh", "-c", "mkdir -p /tmp/www && echo " + name + " > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"},
		Ports:   []runtime.PortSpec{{ContainerPort: 8080}},
		Labels:  map[string]string{testLabel: "1"},
	}

	// The older container of the name: its removal's DEL fails, and
	// leaves a lease.
	older, err := r.Run(ctx, spec)
	require.NoError(t, err)
	require.NoError(t, broken.Remove(ctx, name))
	require.FileExists(t, r.leaseFile(r.namespace, older.ID), "control: the failed DEL left a lease")

	// A reconcile finds that container gone, and is held there.
	orphaned, resume, reconciled := make(chan struct{}), make(chan struct{}), make(chan struct{})
	resumeOnce := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(resumeOnce)
	setHook(t, &testHookLeaseOrphaned, func(_, id string) {
		if id == older.ID {
			close(orphaned)
			<-resume
		}
	})
	var rerr error
	go func() { defer close(reconciled); rerr = r.Reconcile(ctx) }()
	select {
	case <-orphaned:
	case <-ctx.Done():
		t.Fatal("the reconcile never reached the lease")
	}

	// The newer container of the name runs meanwhile.
	setHook(t, &testHookLockWait, func(dir string) {
		if dir == r.leasesDir() {
			resumeOnce() // the join waits for the reconcile
		}
	})
	setHook(t, &testHookAttached, func(id string) {
		if id != older.ID {
			resumeOnce() // joined, not recorded: the reconcile goes on now
			<-reconciled
		}
	})
	c, err := r.Run(ctx, spec)
	require.NoError(t, err, "the newer container runs")
	select {
	case <-reconciled:
	case <-ctx.Done():
		t.Fatal("the reconcile did not end")
	}
	require.NoError(t, rerr, "the reconcile")

	addr := c.Networks[def.Name]
	require.NotEmpty(t, addr, "an address on the network")
	require.Len(t, c.Ports, 1)
	require.NotEqual(t, older.ID, c.ID, "the newer container has an ID of its own")
	pid := taskPid(t, r, c.ID)
	out, err := exec.CommandContext(ctx, "nsenter", "-t", pid, "-n", "ip", "-4", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
	require.NoError(t, err, "nsenter: %s", out)
	assert.Contains(t, string(out), " "+addr+"/", "eth0 in the container's network namespace has its address")
	assert.Contains(t, reservedIPs(t, r, def.Name), addr, "host-local still holds the newer container's address")
	assert.Equal(t, name+"\n", answers(t, c.Ports[0].HostPort), "the published port reaches the newer container")
	assert.NoFileExists(t, r.leaseFile(r.namespace, c.ID), "the join is recorded: no lease")

	require.NoError(t, r.Remove(ctx, name))
	assert.Equal(t, before, footprintOf(t, r, def, older.ID), "the older container left no network state")
	assert.Equal(t, before, footprintOf(t, r, def, c.ID), "nor did the newer")
}

// taskPid is the pid of a container's task (by ID), as ctr lists it.
func taskPid(t *testing.T, r *Runtime, name string) string {
	t.Helper()
	lines, err := testkit.CLILines(testContext(t), "ctr", "--address", r.address, "-n", r.namespace, "task", "ls")
	require.NoError(t, err)
	for _, l := range lines {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == name {
			_, err := strconv.Atoi(f[1])
			require.NoError(t, err, "ctr task ls: %q", l)
			return f[1]
		}
	}
	t.Fatalf("ctr task ls has no task %s: %q", name, lines)
	return ""
}
