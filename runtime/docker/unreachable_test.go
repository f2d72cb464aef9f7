package docker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/runtime"
)

// TestUnreachableEndpoint: New succeeds for a daemon that is not there, and
// then every verb fails fast with ErrUnavailable naming the endpoint.
func TestUnreachableEndpoint(t *testing.T) {
	open := func(t *testing.T, ep adaptertest.Endpoint, host string) runtime.ContainerRuntime {
		var opts []Option
		if option := ep.Place(t, "DOCKER_HOST", host); option != "" {
			opts = append(opts, WithHost(option))
		}
		r, err := New(opts...)
		require.NoError(t, err, "New must not contact the daemon")
		// A daemon that accepts but never answers costs the ping
		// timeout; shorten it so that the same 2 s limit applies.
		r.pingTimeout = 250 * time.Millisecond
		assert.Equal(t, host, r.Endpoint())
		return r
	}
	adaptertest.Unreachable(t, open,
		adaptertest.Endpoint{Name: "MissingSocketFromDockerHost", Addr: adaptertest.Fixed("unix:///nonexistent.sock"), Env: true},
		adaptertest.Endpoint{Name: "MissingSocketFromOption", Addr: adaptertest.Fixed("unix:///nonexistent/docker.sock")},
		adaptertest.Endpoint{Name: "RefusedTCP", Addr: adaptertest.RefusedTCP},
		adaptertest.Endpoint{Name: "NotADockerDaemon", Addr: func(t *testing.T) string { return adaptertest.NotFound(t, "tcp") }},
		adaptertest.Endpoint{Name: "HungDaemon", Addr: func(t *testing.T) string { return adaptertest.Hung(t, "tcp") }},
	)
}

func TestNewRejectsAnUnparsableEndpoint(t *testing.T) {
	_, err := New(WithHost("not a url"))
	require.Error(t, err)
	assert.ErrorIs(t, err, runtime.ErrUnavailable)
	assert.Contains(t, err.Error(), "not a url")
}
