package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime/containerd"
)

// testdata/nat.rules and testdata/filter.rules are `iptables -S` of a host
// running Docker, Podman (netavark) and the adapter's conformance tests,
// taken while one adapter container had a published port.

func TestSplitRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		line string
		want []string
	}{
		{
			name: "PortmapJumpWithEscapedQuotesInTheComment",
			line: `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"sandboxer\" id: \"sbx-conf-8a4c5428-0a42bf49\"" -m multiport --dports 61739 -j CNI-DN-bdaaf04c2c43f863325b4`,
			want: []string{"-A", "CNI-HOSTPORT-DNAT", "-p", "tcp", "-m", "comment", "--comment", `dnat name: "sandboxer" id: "sbx-conf-8a4c5428-0a42bf49"`, "-m", "multiport", "--dports", "61739", "-j", "CNI-DN-bdaaf04c2c43f863325b4"},
		},
		{
			name: "CommentWithBlanks",
			line: `-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD`,
			want: []string{"-A", "FORWARD", "-m", "comment", "--comment", "CNI firewall plugin rules", "-j", "CNI-FORWARD"},
		},
		{
			name: "EscapedSingleQuoteAndBackslash",
			line: `-A X -m comment --comment "it\'s a \\ back" -j ACCEPT`,
			want: []string{"-A", "X", "-m", "comment", "--comment", `it's a \ back`, "-j", "ACCEPT"},
		},
		{
			// iptables writes interface names bare: # is no comment here.
			name: "HashStartingAnUnquotedArgumentIsLiteral",
			line: `-A X -i #x -j ACCEPT`,
			want: []string{"-A", "X", "-i", "#x", "-j", "ACCEPT"},
		},
		{
			name: "EmptyQuotedArgumentIsKept",
			line: `-A X -m comment --comment "" -j ACCEPT`,
			want: []string{"-A", "X", "-m", "comment", "--comment", "", "-j", "ACCEPT"},
		},
		{
			name: "NegationAndDNATDestination",
			line: `-A DOCKER -d 127.0.0.1/32 ! -i docker0 -p tcp -m tcp --dport 33123 -j DNAT --to-destination 172.17.0.3:5432`,
			want: []string{"-A", "DOCKER", "-d", "127.0.0.1/32", "!", "-i", "docker0", "-p", "tcp", "-m", "tcp", "--dport", "33123", "-j", "DNAT", "--to-destination", "172.17.0.3:5432"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := splitRule(tc.line)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestSplitRuleRejectsAnUnterminatedQuote(t *testing.T) {
	for _, line := range []string{`-A X --comment "open`, `-A X --comment "ends in \`} {
		_, err := splitRule(line)
		assert.Error(t, err, line)
	}
}

func TestQuoteArgIsReadBackBySplitRule(t *testing.T) {
	args := []string{"-A", "X", "plain", "", "two words", `dnat name: "n" id: "i"`, `it's`, `back\slash`, "#x", "sbx-+"}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = quoteArg(a)
	}
	got, err := splitRule(strings.Join(quoted, " "))
	require.NoError(t, err)
	assert.Equal(t, args, got)
}

// testOwner is the owner `sweep network` builds, with leftover ids.
func testOwner(ids ...string) owner {
	return owner{pool: containerd.SubnetPool(), ownsBridge: containerd.OwnsBridge, ids: ids}
}

func TestOwnerOwns(t *testing.T) {
	for _, tc := range []struct {
		name string
		line string
		want bool
	}{
		{"ContainerSourceInThePool", `-A CNI-FORWARD -s 10.213.0.100/32 -j ACCEPT`, true},
		{"ContainerDestinationInThePool", `-A CNI-FORWARD -d 10.213.0.100/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`, true},
		{"SubnetOfThePool", `-A CNI-DN-1 -s 10.213.0.0/24 -d 127.0.0.1/32 -p tcp -m tcp --dport 61739 -j CNI-HOSTPORT-SETMARK`, true},
		{"DNATToAContainerOfThePool", `-A CNI-DN-1 -d 127.0.0.1/32 -p tcp -m tcp --dport 61739 -j DNAT --to-destination 10.213.0.124:8080`, true},
		{"InputFromAnAdapterBridge", `-A FORWARD -i sbx-29526a3c -j ACCEPT`, true},
		{"NegatedOutputToAnAdapterBridge", `-A POSTROUTING ! -o sbx-29526a3c -j MASQUERADE`, true},
		{"CommentNamingALeftoverContainer", `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"sandboxer\" id: \"sbx-conf-8a4c5428-0a42bf49\"" -m multiport --dports 61739 -j CNI-DN-1`, true},
		{"CommentNamingAnotherContainer", `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"podman\" id: \"0a42bf49\"" -m multiport --dports 8080 -j CNI-DN-2`, false},
		{"ContainerIDWithoutAComment", `-A X -m comment --comment "sbx-conf-8a4c5428-0a42bf49" -j ACCEPT`, false},
		{"AWiderRangeThatHoldsThePool", `-A FORWARD -d 10.0.0.0/8 -j ACCEPT`, false},
		{"AnAddressThatOnlyEndsLikeThePool", `-A FORWARD -d 110.213.0.1/32 -j ACCEPT`, false},
		{"PodmansPool", `-A NETAVARK_FORWARD -s 10.88.0.0/16 -j ACCEPT`, false},
		{"DockersBridge", `-A FORWARD -i docker0 ! -o docker0 -j ACCEPT`, false},
		{"AWildcardIsNoBridgeOfTheAdapter", `-A FORWARD -o sbx-+ -j ACCEPT`, false},
		{"TheBridgePrefixOutsideAnInterfaceOption", `-A X -m comment --comment sbx-29526a3c -j ACCEPT`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, err := splitRule(tc.line)
			require.NoError(t, err)
			r := rule{chain: args[1], args: args[2:]}
			assert.Equal(t, tc.want, testOwner("sbx-conf-8a4c5428-0a42bf49").owns(r))
		})
	}
}

// planLines renders a table's plan the way `sweep network` prints it.
func planLines(t *testing.T, name, listing string, o owner) []string {
	t.Helper()
	tbl, err := parseTable(name, listing)
	require.NoError(t, err)
	var lines []string
	for _, op := range tbl.plan(o) {
		q := make([]string, len(op))
		for i, a := range op {
			q[i] = quoteArg(a)
		}
		lines = append(lines, strings.Join(q, " "))
	}
	return lines
}

func readRules(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return string(b)
}

func TestPlan(t *testing.T) {
	const dn = "CNI-DN-bdaaf04c2c43f863325b4"
	natPlan := []string{
		"-D " + dn + " -s 10.213.0.0/24 -d 127.0.0.1/32 -p tcp -m tcp --dport 61739 -j CNI-HOSTPORT-SETMARK",
		"-D " + dn + " -d 127.0.0.1/32 -p tcp -m tcp --dport 61739 -j DNAT --to-destination 10.213.0.124:8080",
		`-D CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"sandboxer\" id: \"sbx-conf-8a4c5428-0a42bf49\"" -m multiport --dports 61739 -j ` + dn,
		"-F " + dn,
		"-X " + dn,
		"-D PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
		"-D OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
		"-X CNI-HOSTPORT-DNAT",
		`-D POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ`,
		"-F CNI-HOSTPORT-MASQ",
		"-X CNI-HOSTPORT-MASQ",
		"-F CNI-HOSTPORT-SETMARK",
		"-X CNI-HOSTPORT-SETMARK",
	}
	for _, tc := range []struct {
		name    string
		table   string
		listing string
		owner   owner
		want    []string
	}{
		{
			// The hairpin rule (127.0.0.1 to 127.0.0.1) names no address
			// of the pool: the DNAT to the pool makes the chain ours.
			name:    "NatWithoutLeftoverIDsRemovesThePortmapChainAndItsPlumbing",
			table:   "nat",
			listing: readRules(t, "nat.rules"),
			owner:   testOwner(),
			want:    natPlan,
		},
		{
			name:    "NatWithTheLeftoverIDRemovesTheSame",
			table:   "nat",
			listing: readRules(t, "nat.rules"),
			owner:   testOwner("sbx-conf-8a4c5428-0a42bf49"),
			want:    natPlan,
		},
		{
			name:    "FilterRemovesTheFirewallPluginsRulesAndChains",
			table:   "filter",
			listing: readRules(t, "filter.rules"),
			owner:   testOwner(),
			want: []string{
				"-D CNI-FORWARD -d 10.213.0.100/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
				"-D CNI-FORWARD -s 10.213.0.100/32 -j ACCEPT",
				`-D CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN`,
				"-X CNI-ADMIN",
				`-D FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD`,
				"-X CNI-FORWARD",
			},
		},
		{
			name:  "ACNIChainHoldingSomeoneElsesRuleStays",
			table: "filter",
			listing: `-P FORWARD DROP
-N CNI-ADMIN
-N CNI-FORWARD
-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD
-A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN
-A CNI-FORWARD -s 10.213.0.7/32 -j ACCEPT
-A CNI-FORWARD -s 10.88.0.7/32 -j ACCEPT
`,
			owner: testOwner(),
			want: []string{
				"-D CNI-FORWARD -s 10.213.0.7/32 -j ACCEPT",
				`-D CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN`,
				"-X CNI-ADMIN",
			},
		},
		{
			name:  "PortmapPlumbingStaysWhileSomeoneElsesDNATRemains",
			table: "nat",
			listing: `-P PREROUTING ACCEPT
-N CNI-DN-1
-N CNI-DN-2
-N CNI-HOSTPORT-DNAT
-N CNI-HOSTPORT-MASQ
-N CNI-HOSTPORT-SETMARK
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ
-A CNI-DN-1 -d 127.0.0.1/32 -p tcp -m tcp --dport 61000 -j DNAT --to-destination 10.213.0.5:80
-A CNI-DN-2 -d 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.88.0.5:80
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"sandboxer\" id: \"a\"" -m multiport --dports 61000 -j CNI-DN-1
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"podman\" id: \"b\"" -m multiport --dports 8080 -j CNI-DN-2
-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE
-A CNI-HOSTPORT-SETMARK -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000
`,
			owner: testOwner(),
			want: []string{
				"-D CNI-DN-1 -d 127.0.0.1/32 -p tcp -m tcp --dport 61000 -j DNAT --to-destination 10.213.0.5:80",
				`-D CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"sandboxer\" id: \"a\"" -m multiport --dports 61000 -j CNI-DN-1`,
				"-X CNI-DN-1",
			},
		},
		{
			name:  "ADNATChainNothingJumpsToGoesWhoeverItPointsAt",
			table: "nat",
			listing: `-N CNI-DN-3
-N CNI-HOSTPORT-DNAT
-A CNI-DN-3 -d 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.88.0.9:80
-A CNI-HOSTPORT-DNAT -s 10.88.0.0/16 -j RETURN
`,
			owner: testOwner(),
			want:  []string{"-F CNI-DN-3", "-X CNI-DN-3"},
		},
		{
			name:  "MangleRemovesTheAdaptersIsolationRulesAndChains",
			table: "mangle",
			listing: `-P FORWARD ACCEPT
-N SBX-ISOLATION-FWD
-N SBX-ISOLATION-IN
-N KUBE-KUBELET-CANARY
-A INPUT -j SBX-ISOLATION-IN
-A FORWARD -j SBX-ISOLATION-FWD
-A SBX-ISOLATION-FWD ! -i sbx-29526a3c -o sbx-29526a3c -m conntrack ! --ctstate RELATED,ESTABLISHED -m comment --comment "sandboxer network sandboxer" -j DROP
-A SBX-ISOLATION-FWD -i sbx-0a1b2c3d ! -o sbx-0a1b2c3d -m comment --comment "sandboxer network x" -j DROP
-A SBX-ISOLATION-IN -i sbx-0a1b2c3d -m conntrack ! --ctstate RELATED,ESTABLISHED -m comment --comment "sandboxer network x" -j DROP
`,
			owner: testOwner(),
			want: []string{
				`-D SBX-ISOLATION-FWD ! -i sbx-29526a3c -o sbx-29526a3c -m conntrack ! --ctstate RELATED,ESTABLISHED -m comment --comment "sandboxer network sandboxer" -j DROP`,
				`-D SBX-ISOLATION-FWD -i sbx-0a1b2c3d ! -o sbx-0a1b2c3d -m comment --comment "sandboxer network x" -j DROP`,
				`-D SBX-ISOLATION-IN -i sbx-0a1b2c3d -m conntrack ! --ctstate RELATED,ESTABLISHED -m comment --comment "sandboxer network x" -j DROP`,
				"-D FORWARD -j SBX-ISOLATION-FWD",
				"-X SBX-ISOLATION-FWD",
				"-D INPUT -j SBX-ISOLATION-IN",
				"-X SBX-ISOLATION-IN",
			},
		},
		{
			name:  "NothingOfOursLeavesTheTableAlone",
			table: "nat",
			listing: `-P PREROUTING ACCEPT
-N DOCKER
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A DOCKER -d 127.0.0.1/32 ! -i docker0 -p tcp -m tcp --dport 33123 -j DNAT --to-destination 172.17.0.3:5432
`,
			owner: testOwner("sbx-conf-1"),
			want:  nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, planLines(t, tc.table, tc.listing, tc.owner))
		})
	}
}

func TestParseTableRejectsWhatIsNoListing(t *testing.T) {
	for _, listing := range []string{"*nat\n", ":PREROUTING ACCEPT [0:0]\n", "-A\n", `-A X --comment "open` + "\n"} {
		_, err := parseTable("nat", listing)
		assert.Error(t, err, listing)
	}
}
