package adapterkit

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
)

// SubnetPoolEnv names the environment variable that sets the IPv4 range
// the local adapters (docker, podman, containerd) carve their networks'
// subnets from, as a CIDR.
const SubnetPoolEnv = "SANDBOXER_SUBNET_POOL"

// DefaultSubnetPool is the pool when SANDBOXER_SUBNET_POOL is unset: a
// range none of the runtimes uses by default (Docker 172.17.0.0/16 and
// 172.18–31 and 192.168.0.0/16 in /20s, Podman 10.88.0.0/16 and
// 10.89.0.0/16 onwards, Kubernetes' usual 10.244.0.0/16 and
// 10.96.0.0/12).
var DefaultSubnetPool = netip.MustParsePrefix("10.213.0.0/16")

// SubnetBits is the size of each network's subnet: a /26 holds 62
// addresses (an owner's few sandboxes and its agents), so the default
// pool holds 1024 networks.
const SubnetBits = 26

// ErrPoolExhausted is returned by FreeSubnet when every subnet of the pool
// is taken.
var ErrPoolExhausted = errors.New("no free subnet left in the pool")

// SubnetPool is the pool from SANDBOXER_SUBNET_POOL (getenv nil: os.Getenv),
// else DefaultSubnetPool. A value that is not an IPv4 CIDR of /8 to
// /SubnetBits is an error naming the variable.
func SubnetPool(getenv func(string) string) (netip.Prefix, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	v := getenv(SubnetPoolEnv)
	if v == "" {
		return DefaultSubnetPool, nil
	}
	p, err := netip.ParsePrefix(v)
	if err != nil || !p.Addr().Is4() || p.Bits() < 8 || p.Bits() > SubnetBits {
		return netip.Prefix{}, fmt.Errorf("%s=%q: want an IPv4 CIDR from /8 to /%d", SubnetPoolEnv, v, SubnetBits)
	}
	return p.Masked(), nil
}

// FreeSubnet picks a /SubnetBits subnet of pool that overlaps none of
// taken (the runtime's networks' subnets and the host's routes, as the
// adapter knows them). It starts at a place derived from name, so that
// concurrent creates of different networks seldom pick the same subnet;
// an adapter whose create still collides (the runtime says the pool
// overlaps) adds the subnet to taken and asks again.
func FreeSubnet(pool netip.Prefix, name string, taken []netip.Prefix) (netip.Prefix, error) {
	pool = pool.Masked()
	if !pool.Addr().Is4() || pool.Bits() > SubnetBits {
		return netip.Prefix{}, fmt.Errorf("subnet pool %s: want an IPv4 CIDR of /%d or larger", pool, SubnetBits)
	}
	n := uint32(1) << (SubnetBits - pool.Bits())
	h := fnv.New32a()
	h.Write([]byte(name))
	start := h.Sum32() % n
	base := pool.Addr().As4()
	b := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	for i := range n {
		off := ((start + i) % n) << (32 - SubnetBits)
		v := b + off
		cand := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), SubnetBits)
		free := true
		for _, t := range taken {
			if t.IsValid() && t.Overlaps(cand) {
				free = false
				break
			}
		}
		if free {
			return cand, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("subnet pool %s (%s): %w", pool, SubnetPoolEnv, ErrPoolExhausted)
}

// Gateway is the first host address of subnet, which the local adapters
// give the bridge.
func Gateway(subnet netip.Prefix) netip.Addr { return subnet.Masked().Addr().Next() }
