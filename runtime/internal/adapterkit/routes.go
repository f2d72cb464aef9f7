package adapterkit

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"os"
	"strings"
)

// HostRoutes returns the destinations of the host's IPv4 routes, from
// /proc/net/route of the calling process's network namespace, leaving out
// the default route: the subnets a local runtime's new network must not
// overlap (another runtime's bridges, VPNs, the host's own links), for
// FreeSubnet's taken. An unreadable table gives none.
func HostRoutes() []netip.Prefix {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil
	}
	return parseRoutes(string(b))
}

// parseRoutes reads the destination and mask columns of a /proc/net/route
// table (each a little-endian hex word).
func parseRoutes(table string) []netip.Prefix {
	var out []netip.Prefix
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		dst, ok1 := routeWord(f[1])
		mask, ok2 := routeWord(f[7])
		if !ok1 || !ok2 {
			continue
		}
		ones := 0
		for m := binary.BigEndian.Uint32(mask[:]); m&(1<<31) != 0; m <<= 1 {
			ones++
		}
		if ones == 0 {
			continue // the default route overlaps everything
		}
		out = append(out, netip.PrefixFrom(netip.AddrFrom4(dst), ones).Masked())
	}
	return out
}

// routeWord decodes one address word of /proc/net/route.
func routeWord(s string) ([4]byte, bool) {
	var a [4]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 4 {
		return a, false
	}
	for i := range 4 {
		a[i] = b[3-i]
	}
	return a, true
}
