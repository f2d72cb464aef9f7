package podman

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// TestNetworksFromTheHostsSide proves the rootful service's networks from
// the host's kernel and Podman's own CLI, not the adapter's record: an
// internal network's bridge has no IPv4 address of the host's while a
// plain one's has its gateway; a container that `podman run` puts on the
// default network does not reach a container on the internal network;
// and once the containers and networks are gone, neither the bridges nor
// a firewall rule naming their subnets is left.
func TestNetworksFromTheHostsSide(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	labels := adaptertest.Labels(t, r)
	image := testkit.Image(t, r, "busybox")
	cli := podmanCLI(r)
	host := func(ctx context.Context, argv ...string) string {
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		require.NoError(t, err, "%v: %s", argv, out)
		return string(out)
	}
	base := "sbx-host-" + testkit.RandomHex(4)
	internal, plain, neighbour := base+"-int", base+"-plain", base+"-neighbour"
	var removed bool
	t.Cleanup(func() {
		if removed {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = cli(ctx, "rm", "-f", "-t", "0", neighbour)
		for _, n := range []string{internal, plain} {
			_ = r.RemoveNetwork(ctx, n)
		}
	})
	nets := map[string]runtime.Network{}
	for _, spec := range []runtime.NetworkSpec{{Name: internal, Labels: labels, Internal: true}, {Name: plain, Labels: labels}} {
		n, err := r.CreateNetwork(ctx, spec)
		require.NoError(t, err)
		nets[spec.Name] = n
	}
	server := func(network string) (name, url string) {
		spec := adaptertest.Sleeper(image, network+"-server", labels)
		spec.Network = network
		spec.Command = []string{"sh", "-c", "mkdir -p /tmp/w && echo host > /tmp/w/index.html && exec httpd -f -p 8080 -h /tmp/w"}
		c, err := r.Run(ctx, spec)
		require.NoError(t, err)
		return c.Name, "http://" + c.Networks[network] + ":8080/"
	}
	intServer, intURL := server(internal)
	plainServer, _ := server(plain)
	fetch := func(from, url string) error {
		out, err := cli(ctx, "exec", from, "timeout", "5", "wget", "-q", "-O", "-", url)
		if err == nil && out != "host" {
			err = errors.New("got " + out)
		}
		return err
	}
	testkit.Poll(t, 60*time.Second, 500*time.Millisecond, func() error { return fetch(intServer, intURL) }, "the internal server answers itself")

	bridge := func(network string) string {
		b, err := cli(ctx, "network", "inspect", network, "--format", "{{.NetworkInterface}}")
		require.NoError(t, err)
		require.NotEmpty(t, b)
		return b
	}
	intBridge, plainBridge := bridge(internal), bridge(plain)
	assert.Empty(t, strings.TrimSpace(host(ctx, "ip", "-4", "-o", "addr", "show", "dev", intBridge)),
		"the host has an address on internal network %s's bridge %s", internal, intBridge)
	assert.Contains(t, host(ctx, "ip", "-4", "-o", "addr", "show", "dev", plainBridge), nets[plain].Subnet.Addr().Next().String()+"/26",
		"plain network %s's bridge %s holds its gateway", plain, plainBridge)

	_, err := cli(ctx, "run", "-d", "--name", neighbour, image, "sleep", "600")
	require.NoError(t, err)
	assert.Error(t, fetch(neighbour, intURL), "a `podman run` container on the default network reaches %s on internal network %s", intURL, internal)

	for _, c := range []string{intServer, plainServer} {
		require.NoError(t, r.Remove(ctx, c))
	}
	_, err = cli(ctx, "rm", "-f", "-t", "0", neighbour)
	require.NoError(t, err)
	for _, n := range []string{internal, plain} {
		require.NoError(t, r.RemoveNetwork(ctx, n))
	}
	removed = true
	links := host(ctx, "ip", "-o", "link", "show")
	rules := host(ctx, "iptables-save")
	// Other users of the service may create networks meanwhile, and
	// libpod hands out bridge names (and a subnet may come round again):
	// a bridge or subnet that a network of now claims is not a leftover.
	current, err := cli(ctx, "network", "ls", "--format", "{{.NetworkInterface}} {{range .Subnets}}{{.Subnet}} {{end}}")
	require.NoError(t, err)
	claimed := strings.Fields(current)
	for name, n := range nets {
		b := map[string]string{internal: intBridge, plain: plainBridge}[name]
		if strings.Contains(links, " "+b+":") {
			assert.Contains(t, claimed, b, "bridge %s of removed network %s is left", b, name)
		}
		if strings.Contains(rules, n.Subnet.String()) {
			assert.Contains(t, claimed, n.Subnet.String(), "a firewall rule names removed network %s's subnet %s", name, n.Subnet)
		}
	}
}

// TestDiagnoseForwardMatchesTheHost: Diagnose reports the FORWARD problem
// of internal networks exactly when, on this host, two containers that
// Podman's own CLI puts on an internal network cannot reach each other.
func TestDiagnoseForwardMatchesTheHost(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	findings := map[string]string{}
	for _, d := range r.Diagnose(ctx) {
		findings[d.Check] = d.Problem
	}
	t.Logf("findings: %v", findings)

	labels := adaptertest.Labels(t, r)
	name := "sbx-diag-" + testkit.RandomHex(4)
	_, err := r.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: labels, Internal: true})
	require.NoError(t, err)
	image := testkit.Image(t, r, "busybox")
	cli := podmanCLI(r)
	server, client := name+"-server", name+"-client"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = cli(ctx, "rm", "-f", "-t", "0", server, client)
		assert.NoError(t, r.RemoveNetwork(ctx, name))
	})
	_, err = cli(ctx, "run", "-d", "--name", server, "--network", name, image, "sh", "-c",
		"mkdir -p /tmp/w && echo diag > /tmp/w/index.html && exec httpd -f -p 8080 -h /tmp/w")
	require.NoError(t, err)
	_, err = cli(ctx, "run", "-d", "--name", client, "--network", name, image, "sleep", "600")
	require.NoError(t, err)
	addr, err := cli(ctx, "inspect", server, "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
	require.NoError(t, err)
	url := "http://" + addr + ":8080/"
	fetch := func(from string) error {
		out, err := cli(ctx, "exec", from, "timeout", "5", "wget", "-q", "-O", "-", url)
		if err == nil && out != "diag" {
			err = errors.New("got " + out)
		}
		return err
	}
	// The server answers itself first, so that a refusal below is never
	// a server that is not up yet.
	testkit.Poll(t, 60*time.Second, 500*time.Millisecond, func() error { return fetch(server) }, "the server answers at %s", url)
	if _, drops := findings["podman-internal-forward"]; drops {
		assert.Error(t, fetch(client), "Diagnose says FORWARD drops bridged frames, yet %s reaches %s", client, url)
	} else {
		testkit.Poll(t, 60*time.Second, 500*time.Millisecond, func() error { return fetch(client) },
			"no FORWARD finding, so %s reaches %s", client, url)
	}
}

// podmanCLI runs Podman's own CLI against r's service, for what a test
// proves from the other side than the adapter's: it returns the trimmed
// combined output.
func podmanCLI(r *Runtime) func(ctx context.Context, args ...string) (string, error) {
	return func(ctx context.Context, args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "podman", append([]string{"--url", r.Endpoint()}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
}
