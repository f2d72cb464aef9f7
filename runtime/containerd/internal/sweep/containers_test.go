package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/containerd"
)

// TestSweepContainersReconcilesNetworkLeases: `sweep containers` (the first
// step of make env-down) removes its namespace's containers through the
// adapter and then reconciles the adapter's network leases: a container
// whose CNI DEL failed during its removal (the firewall plugin's DEL
// failed, so libcni never ran portmap's and bridge's) left its host-local
// address and portmap's DNAT rules, and the sweep removes them. It works in
// a containerd namespace of its own, so that it removes no one else's
// containers on the shared daemon.
func TestSweepContainersReconcilesNetworkLeases(t *testing.T) {
	testkit.RequireRuntime(t) // -short touches no runtime; otherwise a missing daemon fails below
	testenv.Load()
	ns := "sbx-sweep-test-" + testkit.RandomHex(4)
	t.Setenv(containerd.EnvNamespace, ns)
	image := testenv.Image(t, containerd.Name, "busybox")
	connect := func(opts ...containerd.Option) *containerd.Runtime {
		r, err := containerd.New(opts...)
		if err != nil {
			testenv.Unavailable(t, containerd.Name, "%v", err)
		}
		t.Cleanup(func() { _ = r.Close() })
		ctx := testkit.Context(t, 10*time.Second)
		if _, err := r.Version(ctx); err != nil {
			testenv.Unavailable(t, containerd.Name, "%v (run `make env`)", err)
		}
		return r
	}
	r := connect()
	broken := connect(containerd.WithCNIPluginDirs(testkit.CNIPluginDirWith(t, containerd.DefaultCNIPluginDirs, "firewall", testkit.CNIFailOn("DEL"))))
	ctx := testkit.Context(t, 3*time.Minute)

	require.NoError(t, testkit.Store(t, r).PullImage(ctx, image, nil), "pull into namespace %s", ns)
	t.Cleanup(func() { dropNamespace(t, r.Endpoint(), ns, image) })
	network := "sbx-test-" + testkit.RandomHex(4)
	_, err := r.CreateNetwork(ctx, runtime.NetworkSpec{Name: network})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.RemoveNetwork(context.Background(), network)) })

	name := "sbx-test-" + testkit.RandomHex(4)
	t.Cleanup(func() { _ = r.Remove(context.Background(), name) })
	c, err := r.Run(ctx, runtime.RunSpec{
		Name: name, Image: image, Command: []string{"sleep", "600"}, Network: network,
		Ports: []runtime.PortSpec{{ContainerPort: 8080}},
	})
	require.NoError(t, err)
	require.NoError(t, broken.Remove(ctx, name), "Remove goes on past a failed DEL")
	// The lease and the rules name the container's ID.
	lease := filepath.Join(containerd.DefaultStateDir, "leases", ns, c.ID+".json")
	require.FileExists(t, lease, "the failed DEL left a lease")
	require.NotEmpty(t, natRulesNaming(t, c.ID), "control: the failed DEL left portmap's rules")
	require.NotEmpty(t, allocations(t, network), "control: the failed DEL left the IP allocation")

	var out, logs bytes.Buffer
	require.NoError(t, sweepContainers(ctx, &out, &logs), "logs:\n%s", logs.String())
	assert.Empty(t, strings.TrimSpace(out.String()), "no container was left to remove")
	assert.Empty(t, natRulesNaming(t, c.ID), "iptables -t nat: no rule names the container")
	assert.Empty(t, allocations(t, network), "host-local: no address left allocated")
	assert.NoFileExists(t, lease, "the lease is gone")
}

// natRulesNaming lists the rules of `iptables -t nat -S` whose comment names
// the container (portmap's "dnat name: ... id: ..."), as CNI writes them.
func natRulesNaming(t *testing.T, id string) []string {
	out, err := exec.Command("iptables", "-w", "-t", "nat", "-S").Output()
	require.NoError(t, err)
	var rules []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, `\"`+id+`\"`) {
			rules = append(rules, l)
		}
	}
	return rules
}

// allocations lists host-local's addresses on a network.
func allocations(t *testing.T, network string) []string {
	return testkit.HostLocalAddresses(t, filepath.Join(containerd.DefaultStateDir, "ipam", network))
}

// dropNamespace removes the test's image and then its namespace from the
// daemon with ctr, waiting for the garbage collector to empty it.
func dropNamespace(t *testing.T, address, ns, image string) {
	ctr := func(args ...string) error {
		out, err := exec.Command("ctr", append([]string{"--address", address, "--namespace", ns}, args...)...).CombinedOutput()
		if err != nil {
			return errors.New(strings.TrimSpace(string(out)))
		}
		return nil
	}
	assert.NoError(t, ctr("images", "rm", "--sync", image), "ctr images rm")
	testkit.Poll(t, time.Minute, 200*time.Millisecond, func() error {
		return ctr("namespaces", "rm", ns)
	}, "ctr namespaces rm %s", ns)
	// The adapter's per-namespace dirs, empty by now (os.Remove keeps a
	// dir that is not).
	for _, dir := range []string{"leases", "ports", "logs"} {
		if err := os.Remove(filepath.Join(containerd.DefaultStateDir, dir, ns)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remove the namespace's %s dir: %v", dir, err)
		}
	}
}
