package runtime_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// TestRunSpecNormalize: the port's input rules, the same for every adapter
// (each calls Normalize first in Run and Create).
func TestRunSpecNormalize(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		in := runtime.RunSpec{
			Image: "i",
			Ports: []runtime.PortSpec{
				{ContainerPort: 80},
				{ContainerPort: 53, Protocol: "UDP", HostIP: "0.0.0.0", HostPort: 5353},
			},
			Ulimits: []runtime.Ulimit{{Name: "RLIMIT_NOFILE", Soft: 1, Hard: 2}, {Name: "NPROC", Soft: -1, Hard: -1}},
		}
		got, err := in.Normalize()
		require.NoError(t, err)
		assert.Equal(t, []runtime.PortSpec{
			{ContainerPort: 80, Protocol: "tcp", HostIP: runtime.DefaultHostIP},
			{ContainerPort: 53, Protocol: "udp", HostIP: "0.0.0.0", HostPort: 5353},
		}, got.Ports, "tcp and 127.0.0.1 by default; protocol lower-cased")
		assert.Equal(t, []runtime.Ulimit{{Name: "nofile", Soft: 1, Hard: 2}, {Name: "nproc", Soft: -1, Hard: -1}}, got.Ulimits, "short names")
		assert.Equal(t, "UDP", in.Ports[1].Protocol, "the caller's slice is not modified")
		assert.Equal(t, "RLIMIT_NOFILE", in.Ulimits[0].Name, "the caller's slice is not modified")
	})
	t.Run("SizesAndCPUsInRange", func(t *testing.T) {
		_, err := runtime.RunSpec{Image: "i", CPUs: runtime.MaxCPUs, Tmpfs: map[string]string{
			"/a": "rw,size=16m,mode=1777", "/b": "size=8589934591G", "/c": "", "/d": "rw, size=4096",
		}}.Normalize()
		assert.NoError(t, err)
	})
	t.Run("ZeroLimitsAndNoPortsAreValid", func(t *testing.T) {
		got, err := runtime.RunSpec{Image: "i"}.Normalize()
		require.NoError(t, err)
		assert.Nil(t, got.Ports)
		assert.Nil(t, got.Ulimits)
	})

	bad := []struct {
		name    string
		spec    runtime.RunSpec
		wantErr string
	}{
		{"NoImage", runtime.RunSpec{Name: "c1"}, "no image given"},
		{"NameLabelIsReserved", runtime.RunSpec{Image: "i", Labels: map[string]string{"nerdctl/name": "other"}}, `label "nerdctl/name" is reserved`},
		{"NegativeMemory", runtime.RunSpec{Image: "i", MemoryBytes: -1}, "negative limit"},
		{"NegativeCPUs", runtime.RunSpec{Image: "i", CPUs: -0.5}, "negative limit"},
		{"NegativePids", runtime.RunSpec{Image: "i", PidsLimit: -1}, "negative limit"},
		{"NaNCPUs", runtime.RunSpec{Image: "i", CPUs: math.NaN()}, "cpus NaN: not a number of cores"},
		{"InfiniteCPUs", runtime.RunSpec{Image: "i", CPUs: math.Inf(1)}, "cpus +Inf: not a number of cores"},
		{"MinusInfiniteCPUs", runtime.RunSpec{Image: "i", CPUs: math.Inf(-1)}, "cpus -Inf: not a number of cores"},
		{"AbsurdCPUs", runtime.RunSpec{Image: "i", CPUs: 1e300}, "more than 8192 cores"},
		{"CPUsJustAboveTheMost", runtime.RunSpec{Image: "i", CPUs: runtime.MaxCPUs + 0.5}, "more than 8192 cores"},
		{"RelativeTmpfs", runtime.RunSpec{Image: "i", Tmpfs: map[string]string{"relative": ""}}, `tmpfs path "relative" is not absolute`},
		{"TmpfsSizeNotASize", runtime.RunSpec{Image: "i", Tmpfs: map[string]string{"/d": "rw,size=lots"}}, `tmpfs /d: invalid spec: size "lots" is not a positive size`},
		{"TmpfsSizeEmpty", runtime.RunSpec{Image: "i", Tmpfs: map[string]string{"/d": "size="}}, `size "" is not a positive size`},
		{"TmpfsSizeZero", runtime.RunSpec{Image: "i", Tmpfs: map[string]string{"/d": "size=0"}}, `size "0" is not a positive size`},
		{"TmpfsSizeNegative", runtime.RunSpec{Image: "i", Tmpfs: map[string]string{"/d": "size=-1m"}}, `size "-1m" is not a positive size`},
		{"TmpfsSizePercent", runtime.RunSpec{Image: "i", Tmpfs: map[string]string{"/d": "size=50%"}}, `size "50%" is not a positive size`},
		{"TmpfsSizeOverflowsWithSuffix", runtime.RunSpec{Image: "i", Tmpfs: map[string]string{"/d": "size=9007199254740992k"}}, `size "9007199254740992k" does not fit in 64 bits`},
		{"TmpfsSizeOverflowsInBytes", runtime.RunSpec{Image: "i", Tmpfs: map[string]string{"/d": "mode=1777, size=99999999999999999999"}}, `does not fit in 64 bits`},
		{"UnnamedUlimit", runtime.RunSpec{Image: "i", Ulimits: []runtime.Ulimit{{Soft: 1, Hard: 1}}}, "ulimit without a name"},
		{"UnknownUlimit", runtime.RunSpec{Image: "i", Ulimits: []runtime.Ulimit{{Name: "files", Soft: 1, Hard: 1}}}, `unknown ulimit "files"`},
		{"UlimitTwice", runtime.RunSpec{Image: "i", Ulimits: []runtime.Ulimit{{Name: "nofile", Soft: 1, Hard: 1}, {Name: "NOFILE", Soft: 2, Hard: 2}}}, "given twice"},
		{"UlimitNegative", runtime.RunSpec{Image: "i", Ulimits: []runtime.Ulimit{{Name: "nofile", Soft: -2, Hard: 2}}}, "negative limit"},
		{"UlimitSoftAboveHard", runtime.RunSpec{Image: "i", Ulimits: []runtime.Ulimit{{Name: "nofile", Soft: 3, Hard: 2}}}, "soft limit 3 above hard limit 2"},
		{"UlimitUnlimitedSoftFiniteHard", runtime.RunSpec{Image: "i", Ulimits: []runtime.Ulimit{{Name: "nofile", Soft: -1, Hard: 2}}}, "above hard limit"},
		{"ContainerPortZero", runtime.RunSpec{Image: "i", Ports: []runtime.PortSpec{{}}}, "container port 0 out of range"},
		{"ContainerPortTooHigh", runtime.RunSpec{Image: "i", Ports: []runtime.PortSpec{{ContainerPort: 70000}}}, "container port 70000 out of range"},
		{"HostPortNegative", runtime.RunSpec{Image: "i", Ports: []runtime.PortSpec{{ContainerPort: 1, HostPort: -1}}}, "host port -1"},
		{"HostPortTooHigh", runtime.RunSpec{Image: "i", Ports: []runtime.PortSpec{{ContainerPort: 1, HostPort: 65536}}}, "host port 65536"},
		{"Protocol", runtime.RunSpec{Image: "i", Ports: []runtime.PortSpec{{ContainerPort: 1, Protocol: "sctp"}}}, `protocol "sctp"`},
		{"IPv6HostIP", runtime.RunSpec{Image: "i", Ports: []runtime.PortSpec{{ContainerPort: 1, HostIP: "::1"}}}, `host IP "::1"`},
		{"HostIPNotAnAddress", runtime.RunSpec{Image: "i", Ports: []runtime.PortSpec{{ContainerPort: 1, HostIP: "localhost"}}}, `host IP "localhost"`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.spec.Normalize()
			require.ErrorIs(t, err, runtime.ErrInvalid)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

// TestParseSize: the port's one size rule, which Normalize applies to
// every tmpfs's "size=" and the Kubernetes adapter reads its emptyDir's
// sizeLimit with.
func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"4096", 4096},
		{"512k", 512 << 10},
		{"512K", 512 << 10},
		{"16m", 16 << 20},
		{"1G", 1 << 30},
		{"9223372036854775807", math.MaxInt64},
		{"8589934591g", 8589934591 << 30},
	} {
		got, err := runtime.ParseSize(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	for _, bad := range []string{"", "k", "0", "0m", "-1", "+1m", "1.5g", "16mb", "16 m", "50%", "1t", "8589934592g", "9223372036854775808"} {
		_, err := runtime.ParseSize(bad)
		assert.ErrorIs(t, err, runtime.ErrInvalid, bad)
	}
}
