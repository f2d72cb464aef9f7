package conformance

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The suite's verdicts rest on these parsers of kernel files: a parser that
// read nothing would make a semantic pass vacuously.

func TestProcNetIP(t *testing.T) {
	cases := []struct {
		name     string
		hex      string
		want     string
		loopback bool
	}{
		{name: "ipv4 loopback", hex: "0100007F", want: "127.0.0.1", loopback: true},
		{name: "ipv4 any", hex: "00000000", want: "0.0.0.0"},
		{name: "ipv4 private", hex: "0200A8C0", want: "192.168.0.2"},
		{name: "ipv6 loopback", hex: "00000000000000000000000001000000", want: "::1", loopback: true},
		{name: "ipv6 any", hex: "00000000000000000000000000000000", want: "::"},
		{name: "ipv4-mapped loopback", hex: "0000000000000000FFFF00000100007F", want: "127.0.0.1", loopback: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ip, err := procNetIP(tc.hex)
			require.NoError(t, err)
			assert.True(t, net.ParseIP(tc.want).Equal(ip), "got %s, want %s", ip, tc.want)
			assert.Equal(t, tc.loopback, ip.IsLoopback())
		})
	}
}

func TestListeningOn(t *testing.T) {
	table := filepath.Join(t.TempDir(), "tcp")
	content := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0
   2: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 100 0 0 10 0
   3: 00000000:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1 0 100 0 0 10 0
`
	require.NoError(t, os.WriteFile(table, []byte(content), 0o600))
	ips, err := listeningOn(table, 0x1F90)
	require.NoError(t, err)
	require.Len(t, ips, 2, "only the LISTEN entries on the port")
	assert.Equal(t, "127.0.0.1", ips[0].String())
	assert.Equal(t, "0.0.0.0", ips[1].String())

	none, err := listeningOn(filepath.Join(t.TempDir(), "absent"), 0x1F90)
	require.NoError(t, err, "an absent table (no IPv6) lists nothing")
	assert.Empty(t, none)
}

func TestParseLimits(t *testing.T) {
	text := `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max processes             300                  600                  processes 
Max open files            1000                 2000                 files     
`
	got := parseLimits(t, text)
	cases := []struct {
		row  string
		want [2]int64
	}{
		{row: "Max cpu time", want: [2]int64{-1, -1}},
		{row: "Max processes", want: [2]int64{300, 600}},
		{row: "Max open files", want: [2]int64{1000, 2000}},
	}
	for _, tc := range cases {
		t.Run(tc.row, func(t *testing.T) {
			assert.Equal(t, tc.want, got[tc.row])
		})
	}
}

func TestParseMounts(t *testing.T) {
	got := parseMounts(`overlay / overlay rw,relatime 0 0
tmpfs /scratch tmpfs rw,nosuid,nodev,noexec,relatime,size=16384k,mode=750 0 0
/dev/sda1 /scratch ext4 rw 0 0
`)
	assert.Equal(t, mount{fsType: "ext4", opts: []string{"rw"}}, got["/scratch"], "the last mount on a point hides the earlier")
	assert.Equal(t, "overlay", got["/"].fsType)
}

func TestCapEff(t *testing.T) {
	status := "Name:\tsh\nCapInh:\t0000000000000000\nCapEff:\t00000000a80425fb\nCapBnd:\t00000000a80425fb\n"
	eff := capEff(t, status)
	assert.Equal(t, uint64(0xa80425fb), eff)
	assert.Zero(t, eff&(1<<capSysAdmin), "Docker's default set has no CAP_SYS_ADMIN")
}

func TestDifference(t *testing.T) {
	assert.Equal(t, []string{"c"}, difference([]string{"a", "b", "c"}, []string{"b", "a", "z"}))
	assert.Empty(t, difference([]string{"a"}, []string{"a"}))
}
