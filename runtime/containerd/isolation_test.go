package containerd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// isoPort is where every container of the isolation test serves its own
// files over HTTP (busybox httpd), so that a fetch of /etc/hostname says
// which container answered.
const isoPort = 8080

// TestNetworksIsolatedFromANeighboursSide: containers of a plain network,
// of an internal network and of the adapter's default network each reach
// the members of their own network and nothing of the others, in both
// directions, as seen from inside the containers and from a neighbour
// that ctr itself makes in the default network's namespace (and from
// Docker's default bridge when Docker is on the host); an internal
// network's containers do not reach the host; afterwards the host's
// iptables, links, IPAM files and libcni's cache hold nothing of either
// network.
func TestNetworksIsolatedFromANeighboursSide(t *testing.T) {
	r := newTestRuntime(t)
	busybox := testenv.Image(t, Name, "busybox")
	ctx := testContext(t)
	require.NoError(t, r.PullImage(ctx, busybox, nil))

	tag := randHex(4)
	plain, internal := "sbx-test-plain-"+tag, "sbx-test-int-"+tag
	labels := func(kind string) map[string]string {
		return map[string]string{testLabel: tag, "kind": kind}
	}
	var defs []*networkDef
	for _, n := range []struct {
		name     string
		internal bool
	}{{plain, false}, {internal, true}} {
		got, err := r.CreateNetwork(ctx, runtime.NetworkSpec{Name: n.name, Labels: labels(n.name), Internal: n.internal})
		require.NoError(t, err)
		t.Cleanup(func() {
			assert.NoError(t, r.RemoveNetwork(context.Background(), n.name), "cleanup: remove network %s", n.name)
		})
		assert.Equal(t, n.internal, got.Internal)
		assert.Equal(t, adapterkit.SubnetBits, got.Subnet.Bits())
		assert.True(t, SubnetPool().Contains(got.Subnet.Addr()), "%s from the pool %s", got.Subnet, SubnetPool())
		def, err := r.readNetwork(n.name)
		require.NoError(t, err)
		defs = append(defs, def)
		// The host's routes say the subnet is taken (other adapters read
		// them) from the creation on, before any container joins.
		route, err := exec.Command("ip", "-4", "route", "show", got.Subnet.String()).Output()
		require.NoError(t, err)
		assert.Contains(t, string(route), "dev "+def.Bridge, "ip route: the bridge holds %s", got.Subnet)
	}
	_, err := r.CreateNetwork(ctx, runtime.NetworkSpec{Name: plain})
	assert.ErrorIs(t, err, runtime.ErrAlreadyExists)

	listed, err := r.ListNetworks(ctx, map[string]string{testLabel: tag})
	require.NoError(t, err)
	byName := map[string]runtime.Network{}
	for _, n := range listed {
		byName[n.Name] = n
	}
	require.Len(t, byName, 2, "%+v", listed)
	assert.Equal(t, labels(plain), byName[plain].Labels)
	assert.False(t, byName[plain].Internal)
	assert.True(t, byName[internal].Internal)
	assert.Equal(t, defs[1].Subnet, byName[internal].Subnet.String())
	only, err := r.ListNetworks(ctx, map[string]string{testLabel: tag, "kind": internal})
	require.NoError(t, err)
	require.Len(t, only, 1)
	assert.Equal(t, internal, only[0].Name)

	// Published ports on an internal network: refused before anything is made.
	refused := "sbx-test-" + randHex(4)
	_, err = r.Run(ctx, runtime.RunSpec{Name: refused, Image: busybox, Command: []string{"sleep", "600"}, Network: internal,
		Ports: []runtime.PortSpec{{ContainerPort: isoPort}}, Labels: map[string]string{testLabel: tag}})
	assert.ErrorIs(t, err, runtime.ErrInvalid)
	_, err = r.Inspect(ctx, refused)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "nothing was made")

	// Two servers on each network, one on the default network.
	addr := map[string]string{}
	serve := func(name, network string) {
		track(t, r, name)
		ran, err := r.Run(ctx, runtime.RunSpec{
			Name: name, Image: busybox, Network: network, Labels: map[string]string{testLabel: tag},
			Command: []string{"sh", "-c", "mkdir -p /www && hostname > /www/who && exec httpd -f -p " + strconv.Itoa(isoPort) + " -h /www"},
		})
		require.NoError(t, err)
		n := network
		if n == "" {
			n = DefaultNetwork
		}
		addr[name] = ran.Networks[n]
		require.NotEmpty(t, addr[name], "%s's address on %s", name, n)
	}
	p1, p2, i1, i2, d1 := "sbx-test-p1-"+tag, "sbx-test-p2-"+tag, "sbx-test-i1-"+tag, "sbx-test-i2-"+tag, "sbx-test-d1-"+tag
	serve(p1, plain)
	serve(p2, plain)
	serve(i1, internal)
	serve(i2, internal)
	serve(d1, "")

	// The adapter's containers have a route to their own subnet only, so
	// that a reply to another subnet's address would not even leave them.
	// Give p1, i1 and d1 a default route through their gateway (as
	// another runtime's containers have, or one holding NET_ADMIN makes),
	// with a privileged container ctr makes in their network namespace:
	// then the host's forwarding, the adapter's isolation rules, decides.
	gateways := map[string]string{p1: defs[0].Gateway, i1: defs[1].Gateway}
	{
		def, err := r.readNetwork(DefaultNetwork)
		require.NoError(t, err)
		require.NotNil(t, def)
		gateways[d1] = def.Gateway
	}
	for name, gw := range gateways {
		out, err := ctrRun(ctx, t, r, taskPid(t, r, idOf(t, r, name)), busybox, true, "ip route replace default via "+gw)
		require.NoError(t, err, "give %s a default route: %s", name, out)
	}

	// fetch asks, from inside container from, who to is (its hostname,
	// which it serves): whether to answered. (busybox's wget of the
	// stand-in image crashes; its nc does the HTTP.)
	fetch := func(from, to string, wait int) bool {
		res, err := r.Exec(ctx, from, runtime.ExecSpec{Cmd: httpGet(addr[to], isoPort, "/who", wait)})
		require.NoError(t, err)
		return strings.Contains(string(res.Stdout), "\r\n\r\n"+to)
	}
	// Members of one network reach each other (generous deadline: the
	// reach is what is checked, not its speed) ...
	for _, pair := range [][2]string{{p1, p2}, {p2, p1}, {i1, i2}, {i2, i1}} {
		assert.True(t, fetch(pair[0], pair[1], 30), "%s reaches %s on their network", pair[0], pair[1])
	}
	// ... and nothing of another network, in either direction.
	for _, pair := range [][2]string{{p1, i1}, {i1, p1}, {p1, d1}, {d1, p1}, {i1, d1}, {d1, i1}} {
		assert.False(t, fetch(pair[0], pair[1], 3), "%s does not reach %s", pair[0], pair[1])
	}

	// A neighbour ctr makes in the default network (in d1's network
	// namespace, which the adapter's default network gave it).
	pid := taskPid(t, r, idOf(t, r, d1))
	ctrFetch := func(netnsPid string, to string, wait int) bool {
		out, err := ctrRun(ctx, t, r, netnsPid, busybox, false, httpGet(addr[to], isoPort, "/who", wait)[2])
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("ctr run: %v: %s", err, out)
		}
		t.Logf("ctr neighbour in %s's network namespace -> %s: %v %q", netnsPid, to, err, out)
		return strings.Contains(string(out), "\r\n\r\n"+to)
	}
	assert.True(t, ctrFetch(pid, d1, 30), "the ctr neighbour is on the default network: it reaches d1")
	assert.False(t, ctrFetch(pid, p1, 3), "the ctr neighbour on the default network does not reach the plain network")
	assert.False(t, ctrFetch(pid, i1, 3), "the ctr neighbour on the default network does not reach the internal network")

	// Docker's default bridge, when Docker is on this host.
	if exec.Command("docker", "info").Run() == nil {
		for _, to := range []string{p1, i1} {
			dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			out, err := exec.CommandContext(dctx, "docker", append([]string{"run", "--rm", busybox}, httpGet(addr[to], isoPort, "/who", 3)...)...).CombinedOutput()
			cancel()
			t.Logf("docker neighbour -> %s: %v %q", to, err, out)
			assert.NotContains(t, string(out), "\r\n\r\n"+to, "a container on docker0 does not reach %s", to)
			assert.Contains(t, string(out), "nc: ", "docker ran the neighbour, which tried")
		}
	} else {
		t.Log("no Docker on this host: the docker0 neighbour is not tried")
	}

	// The host: a plain network's containers reach it through their
	// gateway (as before), an internal network's do not.
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "host") }), ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	hostPort := ln.Addr().(*net.TCPAddr).Port
	toHost := func(from, gateway string, wait int) bool {
		res, err := r.Exec(ctx, from, runtime.ExecSpec{Cmd: httpGet(gateway, hostPort, "/", wait)})
		require.NoError(t, err)
		return strings.Contains(string(res.Stdout), "\r\n\r\nhost")
	}
	assert.True(t, toHost(p1, defs[0].Gateway, 30), "a plain network's container reaches the host through its gateway")
	assert.False(t, toHost(i1, defs[1].Gateway, 3), "an internal network's container does not reach the host's gateway address")
	assert.False(t, toHost(i1, defs[0].Gateway, 3), "nor another of the host's addresses")

	// In use: refused, unchanged.
	err = r.RemoveNetwork(ctx, plain)
	assert.ErrorIs(t, err, runtime.ErrInUse)
	still, err := r.readNetwork(plain)
	require.NoError(t, err)
	assert.NotNil(t, still, "a network in use stays")
	ok, err := isolated(ctx, defs[0])
	require.NoError(t, err)
	assert.True(t, ok, "with its rules")

	// Stopped is still in use: the container would join it again.
	require.NoError(t, r.Stop(ctx, p1, 5*time.Second))
	require.NoError(t, r.Remove(ctx, p2))
	assert.ErrorIs(t, r.RemoveNetwork(ctx, plain), runtime.ErrInUse, "a stopped container still names the network")

	// Gone: nothing of either network is left on the host.
	for _, name := range []string{p1, i1, i2} {
		require.NoError(t, r.Remove(ctx, name))
	}
	ids := []string{p1, p2, i1, i2}
	for _, def := range defs {
		require.NoError(t, r.RemoveNetwork(ctx, def.Name))
		require.NoError(t, r.RemoveNetwork(ctx, def.Name), "absent: no error")
		assertNothingLeftOf(t, r, def, ids)
	}
	after, err := r.ListNetworks(ctx, map[string]string{testLabel: tag})
	require.NoError(t, err)
	assert.Empty(t, after)
}

// ctrRun runs a shell command in a container ctr makes (privileged if
// asked) in the network namespace of process pid, and returns its output.
func ctrRun(ctx context.Context, t *testing.T, r *Runtime, pid, image string, privileged bool, script string) ([]byte, error) {
	t.Helper()
	id := "sbx-test-ctr-" + randHex(4)
	t.Cleanup(func() {
		_ = exec.Command("ctr", "-a", r.Endpoint(), "-n", r.Namespace(), "task", "kill", "-s", "KILL", id).Run()
		_ = exec.Command("ctr", "-a", r.Endpoint(), "-n", r.Namespace(), "container", "rm", id).Run()
	})
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	args := []string{"-a", r.Endpoint(), "-n", r.Namespace(), "run", "--rm"}
	if privileged {
		args = append(args, "--privileged")
	}
	args = append(args, "--with-ns", "network:/proc/"+pid+"/ns/net", image, id, "sh", "-c", script)
	return exec.CommandContext(ctx, "ctr", args...).CombinedOutput()
}

// httpGet is a command that GETs path from addr:port with busybox's nc,
// waiting at most wait seconds, and prints the response.
func httpGet(addr string, port int, path string, wait int) []string {
	return []string{"sh", "-c", fmt.Sprintf(`printf 'GET %s HTTP/1.0\r\n\r\n' | nc -w %d %s %d`, path, wait, addr, port)}
}

// assertNothingLeftOf reads the host with its own tools: no iptables rule
// (any table) names the network's bridge, subnet or name, no link is
// named after its bridge, no host-local IPAM file and no libcni result of
// its containers is left.
func assertNothingLeftOf(t *testing.T, r *Runtime, def *networkDef, ids []string) {
	t.Helper()
	subnet := netip.MustParsePrefix(def.Subnet)
	out, err := exec.Command("iptables-save").Output()
	require.NoError(t, err)
	for _, line := range strings.Split(string(out), "\n") {
		assert.NotContains(t, line, def.Bridge, "iptables-save")
		assert.NotContains(t, line, "sandboxer network "+def.Name+"\"", "iptables-save")
		for _, a := range ipv4Re.FindAllString(line, -1) {
			if ip, err := netip.ParseAddr(a); err == nil {
				assert.False(t, subnet.Contains(ip), "iptables-save: %s", line)
			}
		}
	}
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	require.NoError(t, err)
	assert.NotContains(t, string(links), def.Bridge+":", "ip link")
	_, err = os.Stat(filepath.Join(r.ipamDir(), def.Name))
	assert.ErrorIs(t, err, os.ErrNotExist, "host-local's IPAM directory of %s", def.Name)
	entries, err := os.ReadDir(filepath.Join(libcni.CacheDir, "results"))
	if !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
	}
	for _, e := range entries {
		for _, id := range ids {
			assert.NotContains(t, e.Name(), "-"+id+"-", "libcni's cached result")
		}
		assert.False(t, strings.HasPrefix(e.Name(), def.Name+"-"), "libcni's cached result %s", e.Name())
	}
}
