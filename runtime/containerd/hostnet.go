package containerd

import (
	"net/netip"
	"strings"

	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// SubnetPool is the IPv4 range every network of the adapter takes its
// subnet from: sandboxer's one pool (adapterkit.SubnetPool, set by
// SANDBOXER_SUBNET_POOL; its default when the variable does not parse,
// which CreateNetwork refuses). It is how a clean-up outside the adapter
// (internal/sweep, once the daemon has stopped) tells the adapter's
// addresses from anyone else's in iptables rules and in CNI's result
// cache; it is the pool the adapter allocates from, so that the two
// cannot drift apart.
func SubnetPool() netip.Prefix {
	p, err := adapterkit.SubnetPool(nil)
	if err != nil {
		return adapterkit.DefaultSubnetPool
	}
	return p
}

// OwnsBridge tells whether a network interface is one of the bridges the
// adapter creates (BridgePrefix and a hash of the network's name).
func OwnsBridge(name string) bool {
	return len(name) > len(BridgePrefix) && strings.HasPrefix(name, BridgePrefix)
}
