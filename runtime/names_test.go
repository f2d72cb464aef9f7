package runtime_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/roboco/sandboxer/runtime"
)

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"a", "roboco-sandbox-pg-42", "a.b-c.d", "x" + strings.Repeat("0", runtime.MaxNameLength-1)} {
		assert.NoError(t, runtime.ValidateName(ok), ok)
	}
	// Docker and Podman accept all but "-a" and the last few; containerd
	// takes "A" and "a_b", which a Kubernetes pod name refuses; none takes
	// "a b" or "a/b".
	for _, bad := range []string{"a..b", "a-", "a_-b", "-a", "A", "Agent-1", "a_b", "", "a b", "a/b", "agént", "x" + strings.Repeat("0", runtime.MaxNameLength)} {
		assert.ErrorIs(t, runtime.ValidateName(bad), runtime.ErrInvalid, bad)
	}
}

func TestCheckLoopback(t *testing.T) {
	tests := []struct {
		name    string
		hostIP  string
		exposed bool
	}{
		{"Loopback", "127.0.0.1", false},
		{"OtherLoopback", "127.0.0.2", false},
		{"IPv6Loopback", "::1", false},
		{"AllInterfaces", "0.0.0.0", true},
		{"AllInterfacesIPv6", "::", true},
		{"Unreported", "", true},
		{"AnInterface", "172.17.0.1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := runtime.PortBinding{ContainerPort: 6379, Protocol: "tcp", HostIP: tt.hostIP, HostPort: 32768}
			assert.Equal(t, tt.exposed, b.Exposed())
			err := runtime.CheckLoopback([]runtime.PortBinding{b}, 6379)
			if tt.exposed {
				assert.ErrorIs(t, err, runtime.ErrExposed)
				assert.ErrorContains(t, err, "port 6379/tcp is published on ")
			} else {
				assert.NoError(t, err)
			}
			assert.NoError(t, runtime.CheckLoopback([]runtime.PortBinding{b}, 5432), "another container port is not judged")
		})
	}
}
