package podman

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProcLimits(t *testing.T) {
	const limits = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max file size             unlimited            unlimited            bytes     
Max stack size            8388608              unlimited            bytes     
Max core file size        0                    unlimited            bytes     
Max processes             32768                32768                processes 
Max open files            1024                 20000                files     
Max locked memory         8388608              8388608              bytes     
Max file locks            unlimited            unlimited            locks     
Max pending signals       96365                96365                signals   
Max realtime priority     0                    0                    
Max realtime timeout      unlimited            unlimited            us        
`
	got, err := parseProcLimits(strings.NewReader(limits))
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{
		"nproc":      32768,
		"nofile":     20000,
		"memlock":    8388608,
		"sigpending": 96365,
		"rtprio":     0,
	}, got, "hard limits by rlimit name; unlimited ones are left out")

	_, err = parseProcLimits(strings.NewReader("nothing here\n"))
	assert.Error(t, err)
}

func TestParseVersion(t *testing.T) {
	cases := []struct {
		in           string
		major, minor int
		wantErr      bool
	}{
		{in: "4.3.1", major: 4, minor: 3},
		{in: "5.0.0-dev", major: 5, minor: 0},
		{in: "v6.0", major: 6, minor: 0},
		{in: "4", wantErr: true},
		{in: "x.y", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			major, minor, err := parseVersion(tc.in)
			if tc.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []int{tc.major, tc.minor}, []int{major, minor})
		})
	}
}
