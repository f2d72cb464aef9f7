package containerd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

func TestNormalizePorts(t *testing.T) {
	got, err := normalizePorts([]runtime.PortSpec{{ContainerPort: 80}, {ContainerPort: 53, Protocol: "UDP", HostIP: "0.0.0.0", HostPort: 5353}})
	require.NoError(t, err)
	assert.Equal(t, []runtime.PortSpec{
		{ContainerPort: 80, Protocol: "tcp", HostIP: runtime.DefaultHostIP},
		{ContainerPort: 53, Protocol: "udp", HostIP: "0.0.0.0", HostPort: 5353},
	}, got)

	bad := []struct {
		name string
		port runtime.PortSpec
	}{
		{"container port 0", runtime.PortSpec{}},
		{"container port too high", runtime.PortSpec{ContainerPort: 70000}},
		{"sctp", runtime.PortSpec{ContainerPort: 1, Protocol: "sctp"}},
		{"host port negative", runtime.PortSpec{ContainerPort: 1, HostPort: -1}},
		{"IPv6 host IP", runtime.PortSpec{ContainerPort: 1, HostIP: "::1"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := normalizePorts([]runtime.PortSpec{tc.port})
			assert.Error(t, err)
		})
	}
}
