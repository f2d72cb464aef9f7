package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/runtime/containerd"
)

// foreignRules are someone else's: Docker's, netavark's, and a CNI chain
// of another network (10.88.0.0/16) that holds its own rule, with
// iptables' oddities (a bare "#" interface, an empty comment).
const foreignRules = `*filter
:DOCKER - [0:0]
:DOCKER-USER - [0:0]
:NETAVARK_FORWARD - [0:0]
:CNI-FORWARD - [0:0]
-A FORWARD -j DOCKER-USER
-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD
-A FORWARD -m comment --comment "netavark firewall plugin rules" -j NETAVARK_FORWARD
-A FORWARD -o docker0 -j DOCKER
-A FORWARD -i #x -m comment --comment "" -j ACCEPT
-A FORWARD -d 10.0.0.0/8 -j ACCEPT
-A CNI-FORWARD -s 10.88.0.7/32 -j ACCEPT
-A DOCKER-USER -j RETURN
-A NETAVARK_FORWARD -s 10.88.0.0/16 -j ACCEPT
COMMIT
*nat
:DOCKER - [0:0]
:CNI-f00 - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE
-A POSTROUTING -s 10.88.0.0/16 -m comment --comment "name: \"podman\" id: \"0a42bf49\"" -j CNI-f00
-A CNI-f00 -d 10.88.0.0/16 -j ACCEPT
-A DOCKER -d 127.0.0.1/32 ! -i docker0 -p tcp -m tcp --dport 33123 -j DNAT --to-destination 172.17.0.3:5432
COMMIT
`

// ourRules are what the adapter's CNI plugins leave for one container of
// the pool with a published port (portmap, firewall), plus a rule on one of
// its bridges with a comment that needs every kind of quoting.
const ourRules = `*filter
:CNI-ADMIN - [0:0]
-A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN
-A CNI-FORWARD -d 10.213.0.124/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A CNI-FORWARD -s 10.213.0.124/32 -j ACCEPT
-A FORWARD -i sbx-7e57b0d9 -m comment --comment "it's \"ours\" \\ too" -j ACCEPT
COMMIT
*nat
:CNI-DN-bdaaf04c2c43f863325b4 - [0:0]
:CNI-HOSTPORT-DNAT - [0:0]
:CNI-HOSTPORT-MASQ - [0:0]
:CNI-HOSTPORT-SETMARK - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ
-A CNI-DN-bdaaf04c2c43f863325b4 -s 10.213.0.0/24 -d 127.0.0.1/32 -p tcp -m tcp --dport 61739 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-bdaaf04c2c43f863325b4 -s 127.0.0.1/32 -d 127.0.0.1/32 -p tcp -m tcp --dport 61739 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-bdaaf04c2c43f863325b4 -d 127.0.0.1/32 -p tcp -m tcp --dport 61739 -j DNAT --to-destination 10.213.0.124:8080
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"sandboxer\" id: \"sbx-conf-8a4c5428\"" -m multiport --dports 61739 -j CNI-DN-bdaaf04c2c43f863325b4
-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE
-A CNI-HOSTPORT-SETMARK -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000
COMMIT
*mangle
-A PREROUTING -i sbx-7e57b0d9 -j ACCEPT
COMMIT
`

// TestSweepNetworkInAFreshNetworkNamespace builds someone else's
// networking and then the adapter's leftovers in a network namespace of
// its own (so that the host's is never touched), sweeps, and checks that
// exactly the leftovers went: iptables as listed before the leftovers were
// added, someone else's bridge and veth still there. It needs root and
// iptables, as the containerd adapter itself does: without them it fails
// where containerd is required (make ci) and skips elsewhere; -short skips
// it.
func TestSweepNetworkInAFreshNetworkNamespace(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no network namespace")
	}
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, containerd.Name, "the host clean-up needs root for a network namespace")
	}
	if _, err := exec.LookPath("iptables-restore"); err != nil {
		testenv.Unavailable(t, containerd.Name, "the host clean-up needs iptables: %v", err)
	}
	t.Run("OnlyTheLeftoversGo", func(t *testing.T) {
		// This goroutine's thread moves to the new namespace and never
		// comes back: it is never unlocked, so the Go runtime ends the
		// thread, and the namespace with it, when the subtest returns.
		// Commands started from this goroutine inherit the namespace.
		goruntime.LockOSThread()
		ns, err := netns.New()
		require.NoError(t, err)
		defer ns.Close()
		ctx := context.Background()

		restore := func(rules string) {
			t.Helper()
			cmd := exec.CommandContext(ctx, "iptables-restore", "-w", "--noflush")
			cmd.Stdin = strings.NewReader(rules)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
		}
		listing := func() string {
			t.Helper()
			var all bytes.Buffer
			for _, table := range []string{"filter", "nat", "mangle"} {
				out, err := execRunner(ctx, "iptables", "-w", "-t", table, "-S")
				require.NoError(t, err)
				all.WriteString("# " + table + "\n")
				all.Write(out)
			}
			return all.String()
		}
		bridgeWithVeth := func(bridge, veth string) {
			t.Helper()
			br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridge}}
			require.NoError(t, netlink.LinkAdd(br))
			v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: veth}, PeerName: veth + "p"}
			require.NoError(t, netlink.LinkAdd(v))
			require.NoError(t, netlink.LinkSetMaster(v, br))
		}

		restore(foreignRules)
		bridgeWithVeth("keep0", "vkeep")
		theirs := listing()
		restore(ourRules)
		bridgeWithVeth("sbx-7e57b0d9", "vsbx")
		require.NotEqual(t, theirs, listing())

		h, out := newTestHost(t, testOwner("sbx-conf-8a4c5428"), execRunner)
		writeFiles(t, filepath.Join(h.cniCacheDir, "results"), map[string]string{
			"sandboxer-sbx-conf-270f6d8c-89a0e594-eth0": resultEth0,
			"podman-0a42bf49-eth0":                      resultPodman,
		})
		writeFiles(t, filepath.Join(h.stateDir, "networks"), map[string]string{"sandboxer.json": "{}"})

		require.NoError(t, h.sweep(ctx), "sweep printed:\n%s", out)

		assert.Equal(t, theirs, listing(), "iptables after the sweep")
		for _, gone := range []string{"sbx-7e57b0d9", "vsbx", "vsbxp"} {
			_, err := netlink.LinkByName(gone)
			assert.Error(t, err, "%s is still there", gone)
		}
		for _, kept := range []string{"keep0", "vkeep", "vkeepp"} {
			_, err := netlink.LinkByName(kept)
			assert.NoError(t, err, "%s is gone", kept)
		}
		assert.Equal(t, []string{"podman-0a42bf49-eth0"}, dirNames(t, filepath.Join(h.cniCacheDir, "results")))
		assert.NoDirExists(t, h.stateDir)

		out.Reset()
		require.NoError(t, h.sweep(ctx))
		assert.Empty(t, out.String(), "a second sweep finds nothing")
	})
}
