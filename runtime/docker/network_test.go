package docker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// The network contract is proven for every backend by the conformance
// suite; these tests prove it from the side of Docker's own tools (a
// neighbour made with `docker run`, the daemon's inspect, the host's
// kernel) and what is particular to this adapter (the bridge without an
// address of an internal network, the retry on an overlapping pool).

// webServer is a busybox command serving token on port 8080.
func webServer(token string) []string {
	return []string{"sh", "-c", `mkdir -p /tmp/www && printf %s "` + token + `" > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www`}
}

// dockerCLI runs the docker CLI against the adapter's daemon.
func dockerCLI(ctx context.Context, r *Runtime, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", append([]string{"-H", r.endpoint}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// neighbourFetch runs a one-off busybox container made with `docker run`
// (not the adapter) on network ("": the daemon's default bridge) that
// fetches url within 5 s: nil when it got token.
func neighbourFetch(t *testing.T, ctx context.Context, r *Runtime, img, network, url, token string) error {
	t.Helper()
	name := "sandboxer-test-neighbour-" + testkit.RandomHex(4)
	t.Cleanup(func() { _, _ = dockerCLI(context.Background(), r, "rm", "-f", name) })
	args := []string{"run", "--rm", "--name", name, "--label", adaptertest.Label + "=neighbour"}
	if network != "" {
		args = append(args, "--network", network)
	}
	// Not timeout(1) as PID 1: busybox's leaves the command PID 1, which
	// ignores the TERM; a shell that waits for it stays PID 1 instead.
	args = append(args, img, "sh", "-c", `timeout 5 wget -q -O - "$0"; e=$?; exit $e`, url)
	out, err := dockerCLI(ctx, r, args...)
	switch {
	case err != nil:
		return fmt.Errorf("docker run on %q: %w: %s", network, err, out)
	case out != token:
		return fmt.Errorf("docker run on %q: got %q, want %q", network, out, token)
	}
	return nil
}

// adapterFetch fetches url from inside the adapter's container within 5 s.
func adapterFetch(ctx context.Context, r *Runtime, container, url, token string) error {
	res, err := r.Exec(ctx, container, runtime.ExecSpec{Cmd: []string{"timeout", "5", "wget", "-q", "-O", "-", url}})
	switch {
	case err != nil:
		return err
	case res.ExitCode != 0:
		return fmt.Errorf("wget exit code %d: %s", res.ExitCode, res.Stderr)
	case string(res.Stdout) != token:
		return fmt.Errorf("got %q, want %q", res.Stdout, token)
	}
	return nil
}

// serve runs a web server through the adapter on network and returns its
// URL there.
func serve(t *testing.T, ctx context.Context, r *Runtime, img, network string, labels map[string]string, token string) (name, url string) {
	t.Helper()
	spec := adaptertest.Sleeper(img, "sandboxer-test-srv-"+testkit.RandomHex(4), labels)
	spec.Command = webServer(token)
	spec.Network = network
	c, err := r.Run(ctx, spec)
	require.NoError(t, err)
	addr := c.Networks[network]
	require.NotEmpty(t, addr, "address on %s: %v", network, c.Networks)
	return spec.Name, "http://" + net.JoinHostPort(addr, "8080") + "/"
}

func TestNetworkAsTheDaemonStoresIt(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	pool, err := adapterkit.SubnetPool(nil)
	require.NoError(t, err)
	for _, internal := range []bool{false, true} {
		t.Run(fmt.Sprintf("internal=%v", internal), func(t *testing.T) {
			name := "sandboxer-test-net-" + testkit.RandomHex(4)
			t.Cleanup(func() { assert.NoError(t, r.RemoveNetwork(context.Background(), name), "cleanup") })
			n, err := r.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: map[string]string{adaptertest.Label: "stored"}, Internal: internal})
			require.NoError(t, err)

			raw, err := r.cli.NetworkInspect(ctx, name, network.InspectOptions{})
			require.NoError(t, err)
			assert.Equal(t, "bridge", raw.Driver)
			assert.Equal(t, internal, raw.Internal, "Docker's Internal")
			require.Len(t, raw.IPAM.Config, 1, "one explicit IPAM subnet")
			subnet := netip.MustParsePrefix(raw.IPAM.Config[0].Subnet)
			assert.Equal(t, n.Subnet, subnet, "the subnet CreateNetwork reported")
			assert.True(t, pool.Contains(subnet.Addr()) && subnet.Bits() == adapterkit.SubnetBits, "%s is a /%d of %s", subnet, adapterkit.SubnetBits, pool)
			assert.Equal(t, adapterkit.Gateway(subnet).String(), raw.IPAM.Config[0].Gateway)

			// The host's kernel: the bridge holds the gateway on a plain
			// network, and no IPv4 address at all on an internal one.
			bridge := "br-" + raw.ID[:12]
			out, err := exec.CommandContext(ctx, "ip", "-4", "-o", "addr", "show", "dev", bridge).CombinedOutput()
			require.NoError(t, err, "ip addr show %s: %s", bridge, out)
			if internal {
				assert.Equal(t, "true", raw.Options[inhibitIPv4])
				assert.Empty(t, strings.TrimSpace(string(out)), "the internal network's bridge %s has an IPv4 address", bridge)
			} else {
				assert.NotContains(t, raw.Options, inhibitIPv4)
				assert.Contains(t, string(out), adapterkit.Gateway(subnet).String()+"/26", "bridge %s holds the gateway", bridge)
			}
		})
	}
}

// TestNeighbourOnTheDefaultBridgeCannotConnect: Docker's own isolation
// (DOCKER-ISOLATION chains) keeps a container made with a plain `docker
// run` on the default bridge from a container on one of the adapter's
// networks, both ways; a `docker run` neighbour on that network reaches
// it (so the refusal is the isolation's, not a server that is down).
func TestNeighbourOnTheDefaultBridgeCannotConnect(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	img := testkit.Image(t, r, "busybox")
	labels := adaptertest.Labels(t, r)
	netName := adaptertest.Network(t, r, labels)
	token := testkit.RandomHex(4)
	srv, url := serve(t, ctx, r, img, netName, labels, token)

	testkit.Poll(t, 30*time.Second, 200*time.Millisecond, func() error { return neighbourFetch(t, ctx, r, img, netName, url, token) },
		"a docker run neighbour on the same network reaches the server")
	assert.Error(t, neighbourFetch(t, ctx, r, img, "", url, token), "a docker run neighbour on the default bridge reaches %s", url)

	// The other way: a server made with the CLI on the default bridge.
	other := "sandboxer-test-bridge-srv-" + testkit.RandomHex(4)
	t.Cleanup(func() { _, _ = dockerCLI(context.Background(), r, "rm", "-f", other) })
	otherToken := testkit.RandomHex(4)
	out, err := dockerCLI(ctx, r, append([]string{"run", "-d", "--name", other, "--label", adaptertest.Label + "=neighbour", img}, webServer(otherToken)...)...)
	require.NoError(t, err, "docker run: %s", out)
	addr, err := dockerCLI(ctx, r, "inspect", "-f", "{{.NetworkSettings.IPAddress}}", other)
	require.NoError(t, err, "docker inspect: %s", addr)
	otherURL := "http://" + net.JoinHostPort(addr, "8080") + "/"
	testkit.Poll(t, 30*time.Second, 200*time.Millisecond, func() error { return neighbourFetch(t, ctx, r, img, "", otherURL, otherToken) },
		"a docker run neighbour on the default bridge reaches the default bridge's server")
	assert.Error(t, adapterFetch(ctx, r, srv, otherURL, otherToken), "the adapter's container reaches %s on the default bridge", otherURL)
}

// TestInternalNetworkCannotReachTheHost: Docker 20.10's Internal drops
// forwarded traffic only; the host answers on the bridge's own address,
// and, through it, on every address of the host. The adapter leaves the
// internal network's bridge without an address, so a listener of the
// host is reached from a plain network's container (the control: this
// host would answer) and from no container on an internal network,
// whether the adapter or `docker run` made it.
func TestInternalNetworkCannotReachTheHost(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	img := testkit.Image(t, r, "busybox")
	labels := adaptertest.Labels(t, r)

	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	require.NoError(t, err)
	token := testkit.RandomHex(4)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(token)) }), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	plain := adaptertest.Network(t, r, labels)
	pn, err := r.cli.NetworkInspect(ctx, plain, network.InspectOptions{})
	require.NoError(t, err)
	gw := pn.IPAM.Config[0].Gateway
	plainURL := "http://" + net.JoinHostPort(gw, port) + "/"
	testkit.Poll(t, 30*time.Second, 200*time.Millisecond, func() error { return neighbourFetch(t, ctx, r, img, plain, plainURL, token) },
		"control: a container on a plain network reaches the host's listener at its gateway")

	in := adaptertest.NetworkOf(t, r, runtime.NetworkSpec{Labels: labels, Internal: true})
	internal := in.Name
	spec := adaptertest.Sleeper(img, "sandboxer-test-int-"+testkit.RandomHex(4), labels)
	spec.Network = internal
	_, err = r.Run(ctx, spec)
	require.NoError(t, err)

	targets := append([]string{adapterkit.Gateway(in.Subnet).String(), gw}, testkit.BridgeAddresses(t)...)
	slices.Sort(targets)
	targets = slices.Compact(targets)
	for _, a := range targets {
		url := "http://" + net.JoinHostPort(a, port) + "/"
		assert.Error(t, adapterFetch(ctx, r, spec.Name, url, token), "the adapter's container on internal %s reaches the host at %s", internal, url)
	}
	assert.Error(t, neighbourFetch(t, ctx, r, img, internal, plainURL, token), "a docker run neighbour on internal %s reaches the host at %s", internal, plainURL)
}

// TestCreateNetworkRetriesAnOverlappingSubnet: a network that takes the
// picked subnet between the list and the create (made here with the
// CLI) makes the daemon refuse the pool; the adapter takes the next.
func TestCreateNetworkRetriesAnOverlappingSubnet(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	foreign := "sandboxer-test-foreign-" + testkit.RandomHex(4)
	t.Cleanup(func() {
		if out, err := dockerCLI(context.Background(), r, "network", "rm", foreign); err != nil {
			t.Errorf("cleanup: docker network rm %s: %v: %s", foreign, err, out)
		}
	})
	var tried []netip.Prefix
	r.beforeNetworkCreate = func(ctx context.Context, subnet netip.Prefix) {
		tried = append(tried, subnet)
		if len(tried) == 1 {
			out, err := dockerCLI(ctx, r, "network", "create", "--label", adaptertest.Label+"=foreign", "--subnet", subnet.String(), foreign)
			require.NoError(t, err, "docker network create: %s", out)
		}
	}
	name := "sandboxer-test-net-" + testkit.RandomHex(4)
	t.Cleanup(func() { assert.NoError(t, r.RemoveNetwork(context.Background(), name), "cleanup") })
	n, err := r.CreateNetwork(ctx, runtime.NetworkSpec{Name: name})
	require.NoError(t, err)
	require.Len(t, tried, 2, "one retry after the overlap")
	assert.Equal(t, tried[1], n.Subnet)
	assert.False(t, tried[0].Overlaps(n.Subnet), "the network got another subnet than the foreign one's %s", tried[0])
}

// TestRunRefusesPortsOnAnInternalNetwork: the refusal comes before the
// daemon is asked to create anything; the same spec on a plain network
// runs.
func TestRunRefusesPortsOnAnInternalNetwork(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	img := testkit.Image(t, r, "busybox")
	labels := adaptertest.Labels(t, r)
	internal := adaptertest.NetworkOf(t, r, runtime.NetworkSpec{Labels: labels, Internal: true}).Name

	spec := adaptertest.Sleeper(img, "sandboxer-test-int-"+testkit.RandomHex(4), labels)
	spec.Network = internal
	spec.Ports = []runtime.PortSpec{{ContainerPort: 8080}}
	_, err := r.Run(ctx, spec)
	require.ErrorIs(t, err, runtime.ErrInvalid)
	assert.Contains(t, err.Error(), internal)
	out, err := dockerCLI(ctx, r, "ps", "-aq", "--filter", "name=^/"+spec.Name+"$")
	require.NoError(t, err, out)
	assert.Empty(t, out, "docker ps lists the refused container")

	spec.Network = adaptertest.Network(t, r, labels)
	_, err = r.Run(ctx, spec)
	require.NoError(t, err, "the same spec on a plain network")
}

// TestConcurrentCreatesOfOneNameLeaveOneNetwork: eight creates of one
// name at once, through two runtimes (two agents of one owner starting
// together, in one process or two) leave exactly
// one network of that name, as docker network ls shows it; the create
// that succeeded reports that network's ID, and every other one is
// ErrAlreadyExists. Daemons before API 1.44 check duplicate names only
// best-effort, and made two networks of one name without the adapter's
// settling.
func TestConcurrentCreatesOfOneNameLeaveOneNetwork(t *testing.T) {
	r := newTestRuntime(t)
	// Two runtimes, as two processes would be: one's creates of a name
	// take turns (NameLocks), the two's are settled after the fact.
	rs := []*Runtime{r, newTestRuntime(t)}
	ctx := adaptertest.Ctx(t)
	labels := adaptertest.Labels(t, r)
	for round := range 3 {
		name := fmt.Sprintf("sandboxer-test-same-%d-%s", round, testkit.RandomHex(4))
		t.Cleanup(func() {
			// Every network of the name, should a duplicate survive.
			out, _ := dockerCLI(context.Background(), r, "network", "ls", "-q", "--filter", "name=^"+name+"$")
			for _, id := range strings.Fields(out) {
				if out, err := dockerCLI(context.Background(), r, "network", "rm", id); err != nil {
					t.Errorf("cleanup: docker network rm %s: %v: %s", id, err, out)
				}
			}
		})
		const creators = 8
		type result struct {
			n   runtime.Network
			err error
		}
		results := make(chan result, creators)
		start := make(chan struct{})
		for i := range creators {
			go func() {
				<-start
				n, err := rs[i%len(rs)].CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: labels})
				results <- result{n, err}
			}()
		}
		close(start)
		var won []string
		for range creators {
			res := <-results
			if res.err != nil {
				assert.ErrorIs(t, res.err, runtime.ErrAlreadyExists, "a create that lost the name")
				continue
			}
			won = append(won, res.n.ID)
		}
		require.Len(t, won, 1, "round %d: creates of %s that succeeded", round, name)
		out, err := dockerCLI(ctx, r, "network", "ls", "-q", "--no-trunc", "--filter", "name=^"+name+"$")
		require.NoError(t, err, out)
		assert.Equal(t, won, strings.Fields(out), "round %d: docker network ls lists the one network of name %s, the one the winning create reported", round, name)
	}
}
