package conformance

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

const (
	// httpPort is where the suite's web servers listen inside containers.
	httpPort = 8080
	// reachTimeout bounds how long a server may take to answer.
	reachTimeout = 30 * time.Second
)

// serverSpec is a busybox web server that serves token at / on httpPort.
func (s *suite) serverSpec(t testing.TB, token string) runtime.RunSpec {
	spec := s.spec(t)
	spec.Env = map[string]string{"SBX_CONF_TOKEN": token}
	// Under /tmp: the container's root has no capability, and Podman
	// keeps the image's mode of / (0555), which root may then not write.
	spec.Command = []string{"sh", "-c", fmt.Sprintf(
		`mkdir -p /tmp/www && printf %%s "$SBX_CONF_TOKEN" > /tmp/www/index.html && exec httpd -f -p %d -h /tmp/www`, httpPort)}
	return spec
}

// testSiblingReachability: a container joined to a network is reachable
// from another container on that network, at the address inspect reports,
// on the container port.
func testSiblingReachability(t *testing.T, s *suite) {
	ctx := testContext(t)
	network := s.network(t, ctx)
	token := randomHex(8)

	server := s.serverSpec(t, token)
	server.Network = network
	s.run(t, ctx, server)

	client := s.spec(t)
	client.Network = network
	s.run(t, ctx, client)

	c, err := s.rt.Inspect(ctx, server.Name)
	require.NoError(t, err)
	addr, ok := c.Networks[network]
	require.True(t, ok, "inspect reports no address on %s: %v", network, c.Networks)
	ip := net.ParseIP(addr)
	require.NotNil(t, ip, "address %q on %s", addr, network)
	require.NotNil(t, ip.To4(), "address %q on %s is IPv4", addr, network)

	cc, err := s.rt.Inspect(ctx, client.Name)
	require.NoError(t, err)
	assert.Contains(t, cc.Networks, network, "the client's networks")

	url := fmt.Sprintf("http://%s/", net.JoinHostPort(addr, strconv.Itoa(httpPort)))
	poll(t, "the client reaches "+url, reachTimeout, func() error {
		// timeout(1), not wget -T: Debian's static busybox wget crashes on -T.
		res, err := s.rt.Exec(ctx, client.Name, runtime.ExecSpec{Cmd: []string{"timeout", "5", "wget", "-q", "-O", "-", url}})
		switch {
		case err != nil:
			return err
		case res.ExitCode != 0:
			return fmt.Errorf("wget exit code %d: %s", res.ExitCode, clip(res.Stderr))
		case string(res.Stdout) != token:
			return fmt.Errorf("got %q, want the token %q", clip(res.Stdout), token)
		}
		return nil
	})
}

// testPublishedPortLoopbackOnly: a port published without a host IP or host
// port is bound on 127.0.0.1 at an ephemeral port, inspect says so, the
// host reaches the server there; and, seen from outside the adapter,
// nothing listens on that port on any other address, every DNAT rule of
// the host's nat table for it matches destination 127.0.0.1 only, and the
// host's bridge addresses refuse it.
func testPublishedPortLoopbackOnly(t *testing.T, s *suite) {
	ctx := testContext(t)
	token := randomHex(8)
	spec := s.serverSpec(t, token)
	spec.Ports = []runtime.PortSpec{{ContainerPort: httpPort}}
	if s.forms.NoHostPorts {
		testPodAddressInsteadOfPorts(t, s, ctx, spec, token)
		return
	}
	s.run(t, ctx, spec)

	c, err := s.rt.Inspect(ctx, spec.Name)
	require.NoError(t, err)
	require.NotEmpty(t, c.Ports, "inspect reports no published port")
	hostPort := 0
	for _, p := range c.Ports {
		assert.Equal(t, runtime.DefaultHostIP, p.HostIP, "published port %+v: host IP", p)
		assert.Equal(t, httpPort, p.ContainerPort, "published port %+v: container port", p)
		assert.Equal(t, "tcp", p.Protocol, "published port %+v: protocol", p)
		assert.NotZero(t, p.HostPort, "published port %+v: host port", p)
		if p.HostIP == runtime.DefaultHostIP && p.ContainerPort == httpPort && p.HostPort != 0 {
			hostPort = p.HostPort
		}
	}
	require.NotZero(t, hostPort, "no binding of %d on %s", httpPort, runtime.DefaultHostIP)

	url := fmt.Sprintf("http://%s/", net.JoinHostPort(runtime.DefaultHostIP, strconv.Itoa(hostPort)))
	client := &http.Client{Timeout: 2 * time.Second}
	poll(t, "the host reaches "+url, reachTimeout, func() error {
		res, body, err := get(ctx, client, url)
		if err != nil {
			return err
		}
		if res.StatusCode != http.StatusOK || string(body) != token {
			return fmt.Errorf("%s: %q, want the token %q", res.Status, clip(body), token)
		}
		return nil
	})

	// From outside the adapter: how the host publishes the port. A proxy
	// (docker-proxy, conmon, rootlessport) holds a listening socket; a
	// DNAT rule (Docker, netavark, CNI's portmap: containerd has nothing
	// else) forwards it. Each must be loopback only, and one of them must
	// be there, or these checks would pass having seen nothing.
	published := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		listeners, err := listeningOn(table, hostPort)
		require.NoError(t, err)
		published += len(listeners)
		for _, ip := range listeners {
			assert.True(t, ip.IsLoopback(), "%s: port %d listens on %s, not only on loopback", table, hostPort, ip)
		}
	}
	if s.info.Rootless {
		t.Log("rootless: no nat table of the host's to read; the listener (rootlessport) publishes the port")
	} else {
		rules := testkit.DNATRules(t, hostPort)
		t.Logf("iptables -t nat: DNAT rules for port %d: %q", hostPort, rules)
		published += len(rules)
		for _, rule := range rules {
			assert.True(t, testkit.DNATMatchesLoopbackOnly(rule), "iptables -t nat: %q forwards port %d from more than 127.0.0.1", rule, hostPort)
		}
	}
	require.Positive(t, published, "neither a listening socket nor a DNAT rule publishes port %d", hostPort)

	// The bridges (docker0, podman0, the CNI bridges) are the host's
	// addresses a sandbox's neighbours reach: each refuses the port.
	bridges := testkit.BridgeAddresses(t)
	require.NotEmpty(t, bridges, "the host has no bridge: the environment's runtimes make some")
	t.Logf("bridge addresses checked for refusal: %v", bridges)
	for _, ip := range bridges {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(hostPort)), 2*time.Second)
		if !assert.Error(t, err, "port %d published on 127.0.0.1 answers on bridge address %s", hostPort, ip) {
			conn.Close()
		}
	}
}

// tcpListen is the state of a listening socket in /proc/net/tcp*.
const tcpListen = "0A"

// listeningOn returns the local addresses of the sockets that listen on
// port, according to a /proc/net/tcp or /proc/net/tcp6 table of the test's
// network namespace. An absent table (no IPv6) lists nothing.
func listeningOn(table string, port int) ([]net.IP, error) {
	b, err := os.ReadFile(table)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ips []net.IP
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != tcpListen {
			continue
		}
		hexIP, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			return nil, fmt.Errorf("%s: malformed local address %q", table, f[1])
		}
		p, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("%s: port of %q: %w", table, f[1], err)
		}
		if int(p) != port {
			continue
		}
		ip, err := procNetIP(hexIP)
		if err != nil {
			return nil, fmt.Errorf("%s: address of %q: %w", table, f[1], err)
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

// procNetIP decodes an address of /proc/net/tcp*: the address in 32-bit
// words, each in host (little-endian) byte order.
func procNetIP(s string) (net.IP, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, err
	}
	if len(b) != net.IPv4len && len(b) != net.IPv6len {
		return nil, fmt.Errorf("%d bytes", len(b))
	}
	ip := make(net.IP, len(b))
	for w := 0; w < len(b); w += 4 {
		for i := range 4 {
			ip[w+i] = b[w+3-i]
		}
	}
	return ip, nil
}

// testCreateNetworkDuplicateIsAlreadyExists: a network name is unique; a
// second create under it is ErrAlreadyExists, naming runtime and network.
func testCreateNetworkDuplicateIsAlreadyExists(t *testing.T, s *suite) {
	ctx := testContext(t)
	name := s.network(t, ctx)

	_, err := s.rt.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: s.labels(t, nil)})
	require.Error(t, err, "second create of network %s", name)
	assert.ErrorIs(t, err, runtime.ErrAlreadyExists)
	assertErrorNames(t, err, s.rt.Name(), name)
}

// testRemoveNetworkAbsentIsNoError: removing a network that does not
// exist, or no longer does, succeeds.
func testRemoveNetworkAbsentIsNoError(t *testing.T, s *suite) {
	cases := []struct {
		name   string
		absent func(t *testing.T, ctx context.Context) string
	}{
		{name: "never created", absent: func(*testing.T, context.Context) string { return s.newName() }},
		{name: "already removed", absent: func(t *testing.T, ctx context.Context) string {
			name := s.network(t, ctx)
			require.NoError(t, s.rt.RemoveNetwork(ctx, name), "first remove of network %s", name)
			return name
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			name := tc.absent(t, ctx)
			assert.NoError(t, s.rt.RemoveNetwork(ctx, name), "remove of absent network %s", name)
		})
	}
}

// testPodAddressInsteadOfPorts is the form of PublishedPortLoopbackOnly on
// a backend that cannot publish on the host (runtime.Forms.NoHostPorts: a
// pod): a spec with a port is refused as ErrUnsupported, leaving nothing,
// and the same server without it is reached from the host at the address
// inspect reports, on the container port.
func testPodAddressInsteadOfPorts(t *testing.T, s *suite, ctx context.Context, spec runtime.RunSpec, token string) {
	s.assertRefused(t, ctx, spec, "run with a published port")
	spec.Name, spec.Ports = s.newName(), nil
	s.run(t, ctx, spec)
	c, err := s.rt.Inspect(ctx, spec.Name)
	require.NoError(t, err)
	assert.Empty(t, c.Ports, "nothing is published")
	require.NotEmpty(t, c.Networks, "inspect reports the container's address")
	for network, addr := range c.Networks {
		url := fmt.Sprintf("http://%s/", net.JoinHostPort(addr, strconv.Itoa(httpPort)))
		client := &http.Client{Timeout: 2 * time.Second}
		poll(t, "the host reaches "+url+" (network "+network+")", reachTimeout, func() error {
			res, body, err := get(ctx, client, url)
			if err != nil {
				return err
			}
			if string(body) != token {
				return fmt.Errorf("%s: %q, want the token %q", res.Status, clip(body), token)
			}
			return nil
		})
	}
}

// get fetches url with client and returns the response and its whole body.
func get(ctx context.Context, client *http.Client, url string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res, body, err
}
