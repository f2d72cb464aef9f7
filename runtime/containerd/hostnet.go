package containerd

import (
	"net/netip"
	"strings"
)

// SubnetPool is the IPv4 range every network of the adapter takes its /24
// from. It is how a clean-up outside the adapter (internal/sweep, once the
// daemon has stopped) tells the adapter's addresses from anyone else's in
// iptables rules and in CNI's result cache; it is derived from the pool
// the adapter allocates from, so that the two cannot drift apart.
func SubnetPool() netip.Prefix {
	addr, _ := netip.AddrFromSlice(subnetPool)
	return netip.PrefixFrom(addr, 16)
}

// OwnsBridge tells whether a network interface is one of the bridges the
// adapter creates (BridgePrefix and a hash of the network's name).
func OwnsBridge(name string) bool {
	return len(name) > len(BridgePrefix) && strings.HasPrefix(name, BridgePrefix)
}
