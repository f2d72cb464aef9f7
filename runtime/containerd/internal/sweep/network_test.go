package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

func TestOwnLinksPicksTheAdapterBridgesAndTheVethsOnThem(t *testing.T) {
	attrs := func(name string, index, master int) netlink.LinkAttrs {
		return netlink.LinkAttrs{Name: name, Index: index, MasterIndex: master}
	}
	links := []netlink.Link{
		&netlink.Device{LinkAttrs: attrs("lo", 1, 0)},
		&netlink.Bridge{LinkAttrs: attrs("docker0", 5, 0)},
		&netlink.Bridge{LinkAttrs: attrs("sbx-29526a3c", 28, 0)},
		&netlink.Bridge{LinkAttrs: attrs("podman0", 30, 0)},
		&netlink.Veth{LinkAttrs: attrs("veth1", 40, 28)},
		&netlink.Veth{LinkAttrs: attrs("veth2", 41, 5)},
		&netlink.Veth{LinkAttrs: attrs("veth3", 42, 30)},
		&netlink.Veth{LinkAttrs: attrs("veth4", 43, 0)},
		&netlink.Dummy{LinkAttrs: attrs("sbx-dummy", 44, 0)},
		&netlink.Veth{LinkAttrs: attrs("veth5", 45, 28)},
	}
	names := func(ls []netlink.Link) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.Attrs().Name)
		}
		return out
	}
	veths, bridges := ownLinks(links, testOwner().ownsBridge)
	assert.Equal(t, []string{"veth1", "veth5"}, names(veths))
	assert.Equal(t, []string{"sbx-29526a3c"}, names(bridges))
}

// Cached results as libcni writes them (cniCacheV1), trimmed of their
// base64 configuration.
const (
	resultEth0     = `{"kind":"cniCacheV1","containerId":"sbx-conf-270f6d8c-89a0e594","config":"","ifName":"eth0","networkName":"sandboxer","netns":"/proc/13009/ns/net","result":{"cniVersion":"1.0.0","interfaces":[{"name":"sbx-29526a3c","mac":"52:4b:19:b6:40:92"},{"name":"eth0","mac":"2a:1c:3e:50:77:01","sandbox":"/proc/13009/ns/net"}],"ips":[{"interface":1,"address":"10.213.0.124/24","gateway":"10.213.0.1"}],"dns":{}}}`
	resultLoopback = `{"kind":"cniCacheV1","containerId":"sbx-conf-270f6d8c-89a0e594","config":"","ifName":"lo","networkName":"cni-loopback","netns":"/proc/13009/ns/net","capabilityArgs":{"portMappings":[]},"result":{"cniVersion":"0.3.1","dns":{},"interfaces":[{"mac":"00:00:00:00:00:00","name":"lo","sandbox":"/proc/13009/ns/net"}],"ips":[{"address":"127.0.0.1/8","interface":0,"version":""},{"address":"::1/128","interface":0,"version":""}]}}`
	resultPodman   = `{"kind":"cniCacheV1","containerId":"0a42bf49","config":"","ifName":"eth0","networkName":"podman","result":{"cniVersion":"1.0.0","ips":[{"address":"10.88.0.7/16","gateway":"10.88.0.1"}]}}`
)

func TestOwnsResult(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result string
		owner  owner
		want   bool
	}{
		{"AnAddressOfThePool", resultEth0, testOwner(), true},
		{"TheLoopbackOfALeftoverContainer", resultLoopback, testOwner("sbx-conf-270f6d8c-89a0e594"), true},
		{"TheLoopbackOfAContainerNotKnownLeftOver", resultLoopback, testOwner("sbx-conf-other"), false},
		{"SomeoneElsesAddress", resultPodman, testOwner("sbx-conf-270f6d8c-89a0e594"), false},
		{"NoResultLibcniWrote", `10.213.0.5`, testOwner(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.owner.ownsResult([]byte(tc.result)))
		})
	}
}

// newTestHost is a hostNetwork on temporary dirs whose commands go to run.
func newTestHost(t *testing.T, o owner, run runner) (*hostNetwork, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	return &hostNetwork{
		owner:       o,
		tables:      []string{"filter", "nat", "mangle"},
		cniCacheDir: t.TempDir(),
		stateDir:    filepath.Join(t.TempDir(), "containerd-adapter"),
		run:         run,
		out:         &out,
		warn:        &out,
	}, &out
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestSweepResultsRemovesOnlyTheAdaptersResults(t *testing.T) {
	for _, dry := range []bool{false, true} {
		name := map[bool]string{false: "Removes", true: "DryRunRemovesNothing"}[dry]
		t.Run(name, func(t *testing.T) {
			h, out := newTestHost(t, testOwner("sbx-conf-270f6d8c-89a0e594"), nil)
			h.dryRun = dry
			dir := filepath.Join(h.cniCacheDir, "results")
			all := map[string]string{
				"sandboxer-sbx-conf-270f6d8c-89a0e594-eth0":  resultEth0,
				"cni-loopback-sbx-conf-270f6d8c-89a0e594-lo": resultLoopback,
				"podman-0a42bf49-eth0":                       resultPodman,
				"not-a-result":                               "10.213.0.5",
			}
			writeFiles(t, dir, all)
			require.NoError(t, h.sweepResults())
			if dry {
				assert.Len(t, dirNames(t, dir), len(all))
			} else {
				assert.ElementsMatch(t, []string{"podman-0a42bf49-eth0", "not-a-result"}, dirNames(t, dir))
			}
			assert.Equal(t, 2, strings.Count(out.String(), "remove "+dir+"/"), out.String())
		})
	}
}

func TestSweepResultsWithoutACacheIsNoError(t *testing.T) {
	h, out := newTestHost(t, testOwner(), nil)
	require.NoError(t, h.sweepResults())
	assert.Empty(t, out.String())
}

func TestSweepStateDir(t *testing.T) {
	h, out := newTestHost(t, testOwner(), nil)
	writeFiles(t, filepath.Join(h.stateDir, "networks"), map[string]string{"sandboxer.json": "{}"})

	h.dryRun = true
	require.NoError(t, h.sweepStateDir())
	assert.DirExists(t, h.stateDir)

	h.dryRun = false
	require.NoError(t, h.sweepStateDir())
	assert.NoDirExists(t, h.stateDir)
	require.NoError(t, h.sweepStateDir(), "an absent state dir is no error")
	assert.Equal(t, 2, strings.Count(out.String(), "remove "+h.stateDir), out.String())
}

// fakeIPTables answers `iptables -w -t T -S` with listings[T] (a missing
// table fails, as with a kernel that lacks it), records every other
// command, and fails those in failing.
type fakeIPTables struct {
	listings map[string]string
	failing  []string
	ran      []string
}

func (f *fakeIPTables) run(_ context.Context, name string, args ...string) ([]byte, error) {
	if name != "iptables" || len(args) < 4 || args[0] != "-w" || args[1] != "-t" {
		return nil, errors.New("unexpected command " + name + " " + strings.Join(args, " "))
	}
	if args[3] == "-S" {
		l, ok := f.listings[args[2]]
		if !ok {
			return nil, errors.New("iptables: table " + args[2] + " does not exist")
		}
		return []byte(l), nil
	}
	line := strings.Join(args[2:], " ")
	f.ran = append(f.ran, line)
	if slices.Contains(f.failing, line) {
		return nil, errors.New("iptables: " + line + ": Bad rule")
	}
	return nil, nil
}

func TestSweepIPTablesRunsEachTablesPlan(t *testing.T) {
	ipt := &fakeIPTables{
		listings: map[string]string{
			"filter": readRules(t, "filter.rules"),
			"nat":    readRules(t, "nat.rules"),
		},
		failing: []string{"filter -X CNI-ADMIN"},
	}
	h, out := newTestHost(t, testOwner(), ipt.run)

	err := h.sweepIPTables(context.Background())

	require.Error(t, err, "a failed command is reported")
	assert.Contains(t, err.Error(), "-X CNI-ADMIN")
	assert.Len(t, ipt.ran, 6+13, "every command runs, past a failure")
	assert.Equal(t, "filter -D CNI-FORWARD -d 10.213.0.100/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", ipt.ran[0])
	assert.Equal(t, "nat -X CNI-HOSTPORT-SETMARK", ipt.ran[len(ipt.ran)-1])
	assert.Contains(t, out.String(), "table mangle not swept", "a table that cannot be listed is skipped")
	assert.Contains(t, out.String(), `iptables -w -t nat -D CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"sandboxer\" id: \"sbx-conf-8a4c5428-0a42bf49\"" -m multiport`)
}

func TestSweepIPTablesDryRunRunsOnlyTheListings(t *testing.T) {
	ipt := &fakeIPTables{listings: map[string]string{"nat": readRules(t, "nat.rules")}}
	h, out := newTestHost(t, testOwner(), ipt.run)
	h.dryRun = true
	require.NoError(t, h.sweepIPTables(context.Background()))
	assert.Empty(t, ipt.ran)
	assert.Equal(t, 13, strings.Count(out.String(), "iptables -w -t nat "), out.String())
}
