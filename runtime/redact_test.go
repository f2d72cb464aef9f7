package runtime_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/roboco/sandboxer/runtime"
)

func TestShowEndpointRedactsCredentials(t *testing.T) {
	tests := []struct {
		name, endpoint, shown string
	}{
		{"UnixSocket", "unix:///var/run/docker.sock", "unix:///var/run/docker.sock"},
		{"SocketPath", "/run/containerd/containerd.sock", "/run/containerd/containerd.sock"},
		{"SSHUserOnly", "ssh://core@host:22/run/podman/podman.sock", "ssh://core@host:22/run/podman/podman.sock"},
		{"SSHPassword", "ssh://core:s3cret@host/run/podman/podman.sock", "ssh://core:xxxxx@host/run/podman/podman.sock"},
		{"TCPUserPassword", "tcp://user:pw123456@10.0.0.5:2376", "tcp://user:xxxxx@10.0.0.5:2376"},
		{"PasswordWithAt", "tcp://user:p@ss@10.0.0.5:2376", "tcp://user:xxxxx@10.0.0.5:2376"},
		{"BareToken", "https://ghp_T0KEN@registry.example:443", "https://xxxxx@registry.example:443"},
		{"TokenQuery", "tcp://10.0.0.5:2376/?access_token=abc123&secure=true", "tcp://10.0.0.5:2376/?access_token=xxxxx&secure=true"},
		{"SSHIdentityPathKept", "ssh://core@host/run/podman/podman.sock?identity=/home/u/.ssh/id_ed25519&secure=true", "ssh://core@host/run/podman/podman.sock?identity=/home/u/.ssh/id_ed25519&secure=true"},
		{"PercentEncodedPassword", "ssh://core:a%2Fb@host/run/podman/podman.sock", "ssh://core:xxxxx@host/run/podman/podman.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.shown, runtime.ShowEndpoint(tt.endpoint))
		})
	}
}

func TestRedactEndpointError(t *testing.T) {
	const ep = "ssh://core:a%2Fb@host/run/podman/podman.sock"
	cause := fmt.Errorf("dial core:a/b@host: %w", runtime.ErrUnavailable)
	err := runtime.RedactEndpointError(ep, fmt.Errorf("connect %s: %w", ep, cause))
	assert.Equal(t, "connect ssh://core:xxxxx@host/run/podman/podman.sock: dial core:xxxxx@host: runtime unavailable", err.Error(), "encoded and decoded forms")
	assert.ErrorIs(t, err, runtime.ErrUnavailable, "the chain is kept")
	plain := errors.New("no credentials here")
	assert.Same(t, plain, runtime.RedactEndpointError("unix:///run/x.sock", plain))
	assert.NoError(t, runtime.RedactEndpointError(ep, nil))
}
