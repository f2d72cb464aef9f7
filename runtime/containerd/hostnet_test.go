package containerd

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

func TestSubnetPoolIsSandboxersPool(t *testing.T) {
	t.Setenv(adapterkit.SubnetPoolEnv, "")
	assert.Equal(t, "10.213.0.0/16", SubnetPool().String())
	t.Setenv(adapterkit.SubnetPoolEnv, "10.99.16.0/20")
	assert.Equal(t, "10.99.16.0/20", SubnetPool().String(), "the one knob moves the sweep's pool too")
	t.Setenv(adapterkit.SubnetPoolEnv, "nonsense")
	assert.Equal(t, "10.213.0.0/16", SubnetPool().String())
}

func TestTakenSubnetsHoldTheHostsAddressesAndTheAdaptersNetworks(t *testing.T) {
	taken := takenSubnets([]*networkDef{{Subnet: "10.213.7.64/26"}})
	assert.Contains(t, taken, netip.MustParsePrefix("10.213.7.64/26"))
	assert.Contains(t, taken, netip.MustParsePrefix("127.0.0.1/32"), "the loopback address is the host's")
	sub, err := adapterkit.FreeSubnet(SubnetPool(), "x", taken)
	require.NoError(t, err)
	for _, p := range taken {
		assert.False(t, p.Overlaps(sub), "%s overlaps %s", sub, p)
	}
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
