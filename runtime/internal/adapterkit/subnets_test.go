package adapterkit

import (
	"errors"
	"net/netip"
	"testing"
)

func TestSubnetPoolFromTheEnvironment(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == SubnetPoolEnv {
				return v
			}
			return ""
		}
	}
	p, err := SubnetPool(env(""))
	if err != nil || p != DefaultSubnetPool {
		t.Fatalf("unset: %v, %v", p, err)
	}
	p, err = SubnetPool(env("10.50.3.4/20"))
	if err != nil || p != netip.MustParsePrefix("10.50.0.0/20") {
		t.Fatalf("10.50.3.4/20: %v, %v", p, err)
	}
	for _, bad := range []string{"nonsense", "fd00::/64", "10.0.0.0/27", "10.0.0.0/4"} {
		if _, err := SubnetPool(env(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFreeSubnetSkipsWhatIsTaken(t *testing.T) {
	pool := netip.MustParsePrefix("10.9.0.0/24") // four /26s
	var taken []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for range 4 {
		s, err := FreeSubnet(pool, "owner-a", taken)
		if err != nil {
			t.Fatal(err)
		}
		if s.Bits() != SubnetBits || !pool.Contains(s.Addr()) || seen[s] {
			t.Fatalf("got %v (seen before: %v)", s, seen[s])
		}
		seen[s] = true
		taken = append(taken, s)
	}
	if _, err := FreeSubnet(pool, "owner-a", taken); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("full pool: %v", err)
	}
	// A host route that covers part of the pool takes its subnets too.
	s, err := FreeSubnet(pool, "x", []netip.Prefix{netip.MustParsePrefix("10.9.0.0/25")})
	if err != nil || s.Addr().As4()[3] < 128 {
		t.Fatalf("route 10.9.0.0/25: got %v, %v", s, err)
	}
	if g := Gateway(netip.MustParsePrefix("10.9.0.64/26")); g != netip.MustParseAddr("10.9.0.65") {
		t.Fatalf("gateway %v", g)
	}
}
