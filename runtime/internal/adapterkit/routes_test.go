package adapterkit

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseRoutes(t *testing.T) {
	table := `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	00000000	010200C0	0003	0	0	0	00000000	0	0	0
eth0	000200C0	00000000	0001	0	0	0	00FFFFFF	0	0	0
docker0	000011AC	00000000	0001	0	0	0	0000FFFF	0	0	0
podman1	00C8D50A	00000000	0001	0	0	0	C0FFFFFF	0	0	0
`
	assert.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("192.0.2.0/24"),
		netip.MustParsePrefix("172.17.0.0/16"),
		netip.MustParsePrefix("10.213.200.0/26"),
	}, parseRoutes(table), "the default route is left out")
}
