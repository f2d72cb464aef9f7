package containerd

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSubnetPoolHoldsEverySubnetTheAdapterPicks(t *testing.T) {
	pool := SubnetPool()
	assert.Equal(t, "10.213.0.0/16", pool.String())

	subnet, gateway, err := freeSubnet(nil)
	require.NoError(t, err)
	s, err := netip.ParsePrefix(subnet.String())
	require.NoError(t, err)
	assert.True(t, pool.Overlaps(s) && s.Bits() >= pool.Bits(), "subnet %s outside the pool %s", s, pool)
	assert.True(t, pool.Contains(netip.MustParseAddr(gateway.String())), "gateway %s outside the pool %s", gateway, pool)
}

func TestOwnsBridge(t *testing.T) {
	for name, want := range map[string]bool{
		bridgeName(DefaultNetwork): true,
		bridgeName("other-net"):    true,
		"sbx-":                     false,
		"docker0":                  false,
		"podman0":                  false,
		"xsbx-1234":                false,
	} {
		assert.Equal(t, want, OwnsBridge(name), name)
	}
}
