package conformance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/runtime"
)

// The network contract of the port (runtime.ContainerRuntime.CreateNetwork):
// labels and kind round-trip through ListNetworks, a network in use is not
// removed, networks are isolated from each other and from the runtime's
// default network in both directions, an internal network has no route
// out, and many more networks fit than the runtime's default pools hold.
// Every reachability claim is tried from inside a container with a real
// client (busybox wget), at every address the runtime reports.

const (
	// subnetPoolEnv and defaultSubnetPool mirror runtime/internal/
	// adapterkit's SubnetPoolEnv and DefaultSubnetPool, which this package
	// cannot import: the pool the local adapters carve subnets from.
	subnetPoolEnv     = "SANDBOXER_SUBNET_POOL"
	defaultSubnetPool = "10.213.0.0/16"
	// kindLabel tells a semantic's networks apart in its selectors.
	kindLabel = "sandboxer.conformance.kind"
	// denyTimeout bounds one connection attempt that the contract forbids
	// (timeout(1) around wget): a dropped SYN hangs until then.
	denyTimeout = 5
	// manyNetworks is how many networks ManyNetworksFit creates: more than
	// Docker's default address pools hold (about 30).
	manyNetworks = 40
)

// createNetwork creates a network of spec (the suite's labels added to
// spec.Labels, a fresh name when spec.Name is empty) that is removed when
// the test ends, and returns it as CreateNetwork reported it.
func (s *suite) createNetwork(t testing.TB, ctx context.Context, spec runtime.NetworkSpec) runtime.Network {
	t.Helper()
	if spec.Name == "" {
		spec.Name = s.newName()
	}
	spec.Labels = s.labels(t, spec.Labels)
	s.trackNetwork(t, spec.Name)
	n, err := s.rt.CreateNetwork(ctx, spec)
	require.NoError(t, err, "create network %s (internal=%v)", spec.Name, spec.Internal)
	assert.Equal(t, spec.Name, n.Name, "created network's name")
	assert.NotEmpty(t, n.ID, "created network's id")
	return n
}

// subnetPool is the pool the adapters under test carve subnets from.
func subnetPool(t testing.TB) netip.Prefix {
	t.Helper()
	v := os.Getenv(subnetPoolEnv)
	if v == "" {
		v = defaultSubnetPool
	}
	p, err := netip.ParsePrefix(v)
	require.NoError(t, err, "%s=%q", subnetPoolEnv, v)
	return p.Masked()
}

// assertSubnetFromPool asserts that n's subnet is an IPv4 subnet inside
// the pool, or zero where the backend has no subnet per network
// (runtime.Forms.NoNetworkSubnets).
func (s *suite) assertSubnetFromPool(t testing.TB, n runtime.Network) {
	t.Helper()
	if s.forms.NoNetworkSubnets {
		assert.False(t, n.Subnet.IsValid(), "network %s: a backend without subnets reports none, got %s", n.Name, n.Subnet)
		return
	}
	pool := subnetPool(t)
	if assert.True(t, n.Subnet.IsValid(), "network %s reports no subnet", n.Name) {
		assert.True(t, n.Subnet.Addr().Is4(), "network %s: subnet %s is IPv4", n.Name, n.Subnet)
		assert.True(t, pool.Contains(n.Subnet.Addr()) && n.Subnet.Bits() >= pool.Bits(),
			"network %s: subnet %s lies inside the pool %s (%s)", n.Name, n.Subnet, pool, subnetPoolEnv)
	}
}

// listNetworks returns the networks selector matches, by name.
func (s *suite) listNetworks(t testing.TB, ctx context.Context, selector map[string]string) map[string]runtime.Network {
	t.Helper()
	ns, err := s.rt.ListNetworks(ctx, selector)
	require.NoError(t, err, "list networks %v", selector)
	out := map[string]runtime.Network{}
	for _, n := range ns {
		_, dup := out[n.Name]
		assert.False(t, dup, "list networks %v: %s listed twice", selector, n.Name)
		out[n.Name] = n
	}
	return out
}

// testSelector selects the networks (and containers) of the running test.
func (s *suite) testSelector(t testing.TB) map[string]string {
	return map[string]string{runLabel: s.runID, testLabel: t.Name()}
}

// defaultNetworks returns the names of the networks a container run
// without a network joins (the runtime's default network), from inspect.
func (s *suite) defaultNetworks(t testing.TB, ctx context.Context) []string {
	t.Helper()
	spec := s.spec(t)
	s.run(t, ctx, spec)
	c, err := s.rt.Inspect(ctx, spec.Name)
	require.NoError(t, err)
	require.NotEmpty(t, c.Networks, "a container without a network reports the default network")
	var names []string
	for name := range c.Networks {
		names = append(names, name)
	}
	return names
}

// testListNetworksRoundTripsLabels: ListNetworks returns the networks whose
// labels match every pair of the selector, and only those, with the labels
// they were created with (nothing added), the ID CreateNetwork reported,
// Internal as asked, and a subnet from sandboxer's pool; the runtime's
// default network is never listed.
func testListNetworksRoundTripsLabels(t *testing.T, s *suite) {
	ctx := testContext(t)
	plain := s.createNetwork(t, ctx, runtime.NetworkSpec{Labels: map[string]string{kindLabel: "plain", "sandboxer.conformance.extra": "a=b c"}})
	internal := s.createNetwork(t, ctx, runtime.NetworkSpec{Labels: map[string]string{kindLabel: "internal"}, Internal: true})
	// A network of the same run that another test's label marks: the
	// selector must leave it out.
	foreignName := s.newName()
	s.trackNetwork(t, foreignName)
	_, err := s.rt.CreateNetwork(ctx, runtime.NetworkSpec{Name: foreignName, Labels: map[string]string{runLabel: s.runID, testLabel: t.Name() + "-other", kindLabel: "plain"}})
	require.NoError(t, err, "create network %s", foreignName)

	want := map[string]runtime.NetworkSpec{
		plain.Name:    {Labels: s.labels(t, map[string]string{kindLabel: "plain", "sandboxer.conformance.extra": "a=b c"})},
		internal.Name: {Labels: s.labels(t, map[string]string{kindLabel: "internal"}), Internal: true},
	}
	created := map[string]runtime.Network{plain.Name: plain, internal.Name: internal}

	got := s.listNetworks(t, ctx, s.testSelector(t))
	assert.ElementsMatch(t, []string{plain.Name, internal.Name}, keys(got), "the networks the selector matches")
	for name, w := range want {
		n, ok := got[name]
		if !ok {
			continue
		}
		assert.Equal(t, w.Labels, n.Labels, "network %s: its labels as created, nothing added", name)
		assert.Equal(t, w.Internal, n.Internal, "network %s: Internal", name)
		assert.Equal(t, created[name].ID, n.ID, "network %s: the ID CreateNetwork reported", name)
		s.assertSubnetFromPool(t, n)
	}
	if !s.forms.NoNetworkSubnets && got[plain.Name].Subnet.IsValid() && got[internal.Name].Subnet.IsValid() {
		assert.False(t, got[plain.Name].Subnet.Overlaps(got[internal.Name].Subnet),
			"two networks share addresses: %s and %s", got[plain.Name].Subnet, got[internal.Name].Subnet)
	}

	only := s.listNetworks(t, ctx, map[string]string{runLabel: s.runID, testLabel: t.Name(), kindLabel: "internal"})
	assert.Equal(t, []string{internal.Name}, keys(only), "a selector of three pairs matches only the network with all three")

	none := s.listNetworks(t, ctx, map[string]string{runLabel: s.runID, testLabel: t.Name(), kindLabel: "absent"})
	assert.Empty(t, keys(none), "a selector no network matches")

	all := s.listNetworks(t, ctx, nil)
	assert.Subset(t, keys(all), []string{plain.Name, internal.Name, foreignName}, "an empty selector lists every network of the adapter's")
	for _, d := range s.defaultNetworks(t, ctx) {
		assert.NotContains(t, keys(all), d, "the runtime's default network %s is not one of the adapter's", d)
	}
}

// testRemoveNetworkInUseIsErrInUse: removing a network that a container is
// still on is ErrInUse, naming the runtime and the network, and leaves the
// network as it was (listed with the same ID, its containers still reach
// each other); once the containers are gone, the removal succeeds and the
// network is no longer listed.
func testRemoveNetworkInUseIsErrInUse(t *testing.T, s *suite) {
	ctx := testContext(t)
	n := s.createNetwork(t, ctx, runtime.NetworkSpec{})
	token := randomHex(8)
	server := s.serverSpec(t, token)
	server.Network = n.Name
	s.run(t, ctx, server)
	client := s.serverSpec(t, randomHex(8))
	client.Network = n.Name
	s.run(t, ctx, client)

	err := s.rt.RemoveNetwork(ctx, n.Name)
	require.Error(t, err, "remove network %s while %s is on it", n.Name, server.Name)
	assert.ErrorIs(t, err, runtime.ErrInUse)
	assertErrorNames(t, err, s.rt.Name(), n.Name)

	listed := s.listNetworks(t, ctx, s.testSelector(t))
	if assert.Contains(t, keys(listed), n.Name, "the network in use is still listed") {
		assert.Equal(t, n.ID, listed[n.Name].ID, "the network in use is the same network")
	}
	for _, url := range s.urls(t, ctx, server.Name) {
		s.reach(t, ctx, client.Name, url, token)
	}

	for _, c := range []string{client.Name, server.Name} {
		require.NoError(t, s.rt.Remove(ctx, c), "remove container %s", c)
	}
	// A backend may need a moment to let go of a removed container's
	// endpoint (a pod's deletion is seen by its watchers a little later).
	poll(t, "network "+n.Name+" removed once its containers are gone", reachTimeout, func() error {
		return s.rt.RemoveNetwork(ctx, n.Name)
	})
	assert.NotContains(t, keys(s.listNetworks(t, ctx, s.testSelector(t))), n.Name, "a removed network is not listed")
}

// testNetworksAreIsolated: a container on network N1 reaches its
// neighbour on N1, and no container that is not on N1 (one on N2, one on
// the runtime's default network) is reached from it or reaches it, at any
// address the runtime reports. Each server first answers itself at its
// own address, so a refusal is never a server that is not up yet.
func testNetworksAreIsolated(t *testing.T, s *suite) {
	ctx := testContext(t)
	n1 := s.createNetwork(t, ctx, runtime.NetworkSpec{})
	n2 := s.createNetwork(t, ctx, runtime.NetworkSpec{})
	a1 := s.startServer(t, ctx, n1.Name)
	a2 := s.startServer(t, ctx, n1.Name)
	b := s.startServer(t, ctx, n2.Name)
	d := s.startServer(t, ctx, "")

	t.Run("SameNetwork", func(t *testing.T) {
		for _, url := range a2.urls {
			s.reach(t, ctx, a1.name, url, a2.token)
		}
	})
	t.Run("NetworkToOtherNetwork", func(t *testing.T) { s.unreachable(t, ctx, a1, b) })
	t.Run("OtherNetworkToNetwork", func(t *testing.T) { s.unreachable(t, ctx, b, a2) })
	t.Run("NetworkToDefault", func(t *testing.T) { s.unreachable(t, ctx, a1, d) })
	t.Run("DefaultToNetwork", func(t *testing.T) { s.unreachable(t, ctx, d, a2) })
}

// testInternalNetworkHasNoRouteOut: a container on an internal network
// reaches its neighbour there, and nothing else: not the host, on any of
// its IPv4 addresses (a listener of the test's own on all of them; the
// default network's gateway is one of them), nor a container on the
// runtime's default network.
func testInternalNetworkHasNoRouteOut(t *testing.T, s *suite) {
	ctx := testContext(t)
	ni := s.createNetwork(t, ctx, runtime.NetworkSpec{Internal: true})
	server := s.startServer(t, ctx, ni.Name)
	client := s.startServer(t, ctx, ni.Name)
	d := s.startServer(t, ctx, "")

	t.Run("SameNetwork", func(t *testing.T) {
		for _, url := range server.urls {
			s.reach(t, ctx, client.name, url, server.token)
		}
	})
	t.Run("HostAddresses", func(t *testing.T) {
		host := hostListener(t)
		t.Logf("host listener on port %d, tried at %v", host.port, host.urls)
		s.unreachable(t, ctx, client, host.target)
		if _, gap := s.gap(t); !gap {
			assert.Zero(t, host.accepted.Load(), "the host listener accepted connections from the internal network's container")
		}
	})
	t.Run("DefaultNetwork", func(t *testing.T) { s.unreachable(t, ctx, client, d) })
}

// testInternalRefusesPublishedPorts: Run of a container on an internal
// network with a published port is ErrInvalid, naming the runtime and the
// container, and makes nothing: no container under its name, none that
// the selector lists, none new in the runtime's own list under that name.
// (Where the backend publishes no port at all, runtime.Forms.NoHostPorts,
// its ErrUnsupported is the refusal.)
func testInternalRefusesPublishedPorts(t *testing.T, s *suite) {
	ctx := testContext(t)
	require.NotNil(t, s.cfg.ContainerIDs, "Config.ContainerIDs lists the backend's containers")
	ni := s.createNetwork(t, ctx, runtime.NetworkSpec{Internal: true})
	spec := s.serverSpec(t, randomHex(8))
	spec.Network = ni.Name
	spec.Ports = []runtime.PortSpec{{ContainerPort: httpPort}}

	before, err := s.cfg.ContainerIDs(ctx)
	require.NoError(t, err, "the runtime's own container list")
	s.track(t, spec.Name)
	_, err = s.rt.Run(ctx, spec)
	require.Error(t, err, "run %s with a published port on internal network %s", spec.Name, ni.Name)
	if s.forms.NoHostPorts && errors.Is(err, runtime.ErrUnsupported) {
		t.Logf("%s publishes no port at all: refused as unsupported", s.rt.Name())
	} else {
		assert.ErrorIs(t, err, runtime.ErrInvalid, "a published port on an internal network")
	}
	assertErrorNames(t, err, s.rt.Name(), spec.Name, ni.Name)

	_, err = s.rt.Inspect(ctx, spec.Name)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "a refused run leaves no container under its name")
	left, err := s.rt.List(ctx, s.testSelector(t))
	require.NoError(t, err)
	assert.Empty(t, containerNames(left), "a refused run leaves nothing the selector lists")
	after, err := s.cfg.ContainerIDs(ctx)
	require.NoError(t, err, "the runtime's own container list")
	for _, id := range difference(after, before) {
		// Other users of the backend make containers meanwhile: only one
		// under the refused name would be ours.
		c, err := s.rt.Inspect(ctx, id)
		if err == nil {
			assert.NotEqual(t, spec.Name, c.Name, "the runtime lists a container %s under the refused name", id)
		}
	}

	// The same server without the port runs there: the refusal was the port's.
	spec.Name, spec.Ports = s.newName(), nil
	s.run(t, ctx, spec)
}

// testManyNetworksFit: more networks than Docker's default address pools
// hold are created, four at a time, each with a subnet of its own from
// sandboxer's pool; once removed, none is listed.
func testManyNetworksFit(t *testing.T, s *suite) {
	ctx := testContext(t)
	names := make([]string, manyNetworks)
	for i := range names {
		names[i] = s.newName()
		s.trackNetwork(t, names[i])
	}
	var mu sync.Mutex
	created := map[string]runtime.Network{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for _, name := range names {
		g.Go(func() error {
			n, err := s.rt.CreateNetwork(gctx, runtime.NetworkSpec{Name: name, Labels: s.labels(t, nil)})
			if err != nil {
				return fmt.Errorf("network %s: %w", name, err)
			}
			mu.Lock()
			created[name] = n
			mu.Unlock()
			return nil
		})
	}
	require.NoError(t, g.Wait(), "create %d networks", manyNetworks)

	listed := s.listNetworks(t, ctx, s.testSelector(t))
	assert.ElementsMatch(t, names, keys(listed), "every network is listed")
	if !s.forms.NoNetworkSubnets {
		var subnets []netip.Prefix
		for _, name := range names {
			n := listed[name]
			s.assertSubnetFromPool(t, n)
			for _, other := range subnets {
				assert.False(t, other.Overlaps(n.Subnet), "network %s: subnet %s overlaps another network's %s", name, n.Subnet, other)
			}
			subnets = append(subnets, n.Subnet)
		}
	}

	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(4)
	for _, name := range names {
		g.Go(func() error { return s.rt.RemoveNetwork(gctx, name) })
	}
	require.NoError(t, g.Wait(), "remove %d networks", manyNetworks)
	assert.Empty(t, keys(s.listNetworks(t, ctx, s.testSelector(t))), "networks left after removal")
}

// server is a running busybox web server (serverSpec) and how to reach it.
type server struct {
	name  string
	token string
	// network is the network it was started on ("": the default).
	network string
	// urls are http://<address>:<port>/ for every address the runtime
	// reports for it.
	urls []string
}

// startServer runs a web server on network ("": the default network) and
// waits until it answers itself at every address inspect reports, so that
// a refusal later is never a server that is not up yet.
func (s *suite) startServer(t testing.TB, ctx context.Context, network string) server {
	t.Helper()
	token := randomHex(8)
	spec := s.serverSpec(t, token)
	spec.Network = network
	s.run(t, ctx, spec)
	srv := server{name: spec.Name, token: token, network: network, urls: s.urls(t, ctx, spec.Name)}
	for _, url := range srv.urls {
		s.reach(t, ctx, srv.name, url, token)
	}
	return srv
}

// urls returns http://<address>:httpPort/ for every address inspect
// reports for the container.
func (s *suite) urls(t testing.TB, ctx context.Context, container string) []string {
	t.Helper()
	c, err := s.rt.Inspect(ctx, container)
	require.NoError(t, err)
	require.NotEmpty(t, c.Networks, "inspect reports no address of %s", container)
	var urls []string
	for network, addr := range c.Networks {
		ip := net.ParseIP(addr)
		require.NotNil(t, ip, "address %q of %s on %s", addr, container, network)
		urls = append(urls, fmt.Sprintf("http://%s/", net.JoinHostPort(addr, strconv.Itoa(httpPort))))
	}
	slices.Sort(urls)
	return urls
}

// fetch gets url with busybox wget inside container, bounded by
// denyTimeout: nil when the body is token.
func (s *suite) fetch(ctx context.Context, container, url, token string) error {
	// timeout(1), not wget -T: Debian's static busybox wget crashes on -T.
	res, err := s.rt.Exec(ctx, container, runtime.ExecSpec{Cmd: []string{"timeout", strconv.Itoa(denyTimeout), "wget", "-q", "-O", "-", url}})
	switch {
	case err != nil:
		return err
	case res.ExitCode != 0:
		return fmt.Errorf("wget exit code %d: %s", res.ExitCode, clip(res.Stderr))
	case string(res.Stdout) != token:
		return fmt.Errorf("got %q, want the token %q", clip(res.Stdout), token)
	}
	return nil
}

// reach polls until container gets token from url.
func (s *suite) reach(t testing.TB, ctx context.Context, container, url, token string) {
	t.Helper()
	poll(t, container+" reaches "+url, reachTimeout, func() error { return s.fetch(ctx, container, url, token) })
}

// unreachable asserts that from reaches target at none of its addresses.
// Where the row's Config.Gaps lists the running subtest, it asserts the
// gap instead: from does reach target at one of them (polled), and the
// reason is logged, so that the day the gap closes the entry must go.
func (s *suite) unreachable(t *testing.T, ctx context.Context, from, target server) {
	t.Helper()
	if reason, gap := s.gap(t); gap {
		t.Logf("known gap of %s: %s", s.rowName(), reason)
		poll(t, fmt.Sprintf("known gap (%s): %s still reaches %s at one of %v", reason, from.name, target.name, target.urls), reachTimeout, func() error {
			var errs []error
			for _, url := range target.urls {
				err := s.fetch(ctx, from.name, url, target.token)
				if err == nil {
					return nil
				}
				errs = append(errs, fmt.Errorf("%s: %w", url, err))
			}
			return errors.Join(errs...)
		})
		return
	}
	reason, lapses := s.lapse(t)
	for attempt := 1; ; attempt++ {
		reached := s.reachedAt(ctx, from, target)
		if len(reached) == 0 {
			return
		}
		if !lapses || attempt == maxLapses {
			for _, url := range reached {
				assert.Fail(t, "isolation", "%s reaches %s at %s, which the isolation contract forbids", from.name, target.name, url)
			}
			return
		}
		// The backend's known lapse (Config.Lapses): a container
		// started on from's network re-arms its isolation, and the
		// refusal must then hold.
		t.Logf("known lapse of %s (attempt %d of %d): %s reached %s at %v: %s; re-arming with a container on %q", s.rowName(), attempt, maxLapses, from.name, target.name, reached, reason, from.network)
		rearm := s.spec(t)
		rearm.Network = from.network
		s.run(t, ctx, rearm)
	}
}

// maxLapses bounds how often unreachable re-arms a lapsing backend's
// isolation (Config.Lapses) before the connection counts as allowed.
const maxLapses = 5

// reachedAt returns the urls of target's that from reaches, tried at once
// (a dropped connection takes denyTimeout to fail).
func (s *suite) reachedAt(ctx context.Context, from, target server) []string {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		reached []string
	)
	for _, url := range target.urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.fetch(ctx, from.name, url, target.token) == nil {
				mu.Lock()
				reached = append(reached, url)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(reached)
	return reached
}

// lapse returns the reason Config.Lapses gives for the running subtest.
func (s *suite) lapse(t testing.TB) (string, bool) { return entryOf(t, s.cfg.Lapses) }

// gap returns the reason Config.Gaps gives for the running subtest.
func (s *suite) gap(t testing.TB) (string, bool) { return entryOf(t, s.cfg.Gaps) }

// entryOf returns the entry of m (Config.Gaps, Config.Lapses) for the
// running subtest, keyed by its path below the row (e.g.
// "NetworksAreIsolated/DefaultToNetwork").
func entryOf(t testing.TB, m map[string]string) (string, bool) {
	parts := strings.SplitN(t.Name(), "/", 3)
	if len(parts) < 3 {
		return "", false
	}
	reason, ok := m[parts[2]]
	return reason, ok
}

// rowName is the row the suite runs as.
func (s *suite) rowName() string {
	if s.cfg.Row != "" {
		return s.cfg.Row
	}
	return s.cfg.Runtime
}

// checkGaps requires every Config.Gaps entry to name a semantic of the
// suite and give a reason, so that a misspelt entry cannot hide nothing.
func checkGaps(t testing.TB, gaps map[string]string) {
	t.Helper()
	for path, reason := range gaps {
		top, _, _ := strings.Cut(path, "/")
		known := slices.ContainsFunc(semantics, func(sem semantic) bool { return sem.name == top })
		require.True(t, known, "Config.Gaps: %q names no semantic of the suite", path)
		require.NotEmpty(t, strings.TrimSpace(reason), "Config.Gaps: %q gives no reason", path)
	}
}

// hostTarget is the test's own listener on every IPv4 address of the host.
type hostTarget struct {
	target   server
	port     int
	urls     []string
	accepted *atomic.Int64
}

// hostListener serves a token over HTTP on every IPv4 address of the host
// (one listener on 0.0.0.0), counting the connections it accepts, until
// the test ends; its urls name each non-loopback IPv4 address of the host
// (a container's loopback is its own).
func hostListener(t testing.TB) hostTarget {
	t.Helper()
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	require.NoError(t, err, "listen on the host")
	counted := &countingListener{Listener: ln, accepted: &atomic.Int64{}}
	token := randomHex(8)
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(token)) }),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = srv.Serve(counted) }()
	t.Cleanup(func() { _ = srv.Close() })

	port := ln.Addr().(*net.TCPAddr).Port
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err, "the host's addresses")
	var urls []string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() {
			continue
		}
		urls = append(urls, fmt.Sprintf("http://%s/", net.JoinHostPort(ipn.IP.String(), strconv.Itoa(port))))
	}
	require.NotEmpty(t, urls, "the host has no IPv4 address but loopback")
	slices.Sort(urls)
	return hostTarget{target: server{name: "the host", token: token, urls: urls}, port: port, urls: urls, accepted: counted.accepted}
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// keys returns m's keys, sorted.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
