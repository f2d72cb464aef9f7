package podman

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/runtime"
)

// TestUnreachableEndpoint: New succeeds for a service that is not there,
// and then every verb fails within 2 s with ErrUnavailable naming the
// endpoint.
func TestUnreachableEndpoint(t *testing.T) {
	open := func(t *testing.T, ep adaptertest.Endpoint, host string) runtime.ContainerRuntime {
		var opts []Option
		if option := ep.Place(t, "CONTAINER_HOST", host); option != "" {
			opts = append(opts, WithHost(option))
		}
		// A service that accepts but never answers costs the ping
		// timeout on every verb: TestHungServiceWithin2s proves the
		// default; here it is shortened to keep the test quick.
		r, err := New(append(opts, WithPingTimeout(250*time.Millisecond))...)
		require.NoError(t, err, "New must not contact the service")
		assert.Contains(t, r.Endpoint(), filepath.Base(host))
		return r
	}
	adaptertest.Unreachable(t, open,
		adaptertest.Endpoint{Name: "MissingSocketFromContainerHost", Addr: adaptertest.Fixed("unix:///nonexistent/podman.sock"), Env: true},
		adaptertest.Endpoint{Name: "MissingSocketFromOption", Addr: adaptertest.Fixed("unix:///nonexistent/podman.sock")},
		adaptertest.Endpoint{Name: "BareSocketPath", Addr: adaptertest.Fixed("/nonexistent/podman.sock")},
		adaptertest.Endpoint{Name: "RefusedTCP", Addr: adaptertest.RefusedTCP},
		adaptertest.Endpoint{Name: "NotALibpodService", Addr: func(t *testing.T) string { return adaptertest.NotFound(t, "unix") }},
		adaptertest.Endpoint{Name: "HungServiceOnUnixSocket", Addr: func(t *testing.T) string { return adaptertest.Hung(t, "unix") }},
	)
}

// TestHungServiceWithin2s: with the default ping timeout, a service that
// accepts connections but never answers is unavailable within 2 s.
func TestHungServiceWithin2s(t *testing.T) {
	host := adaptertest.Hung(t, "unix")
	r, err := New(WithHost(host))
	require.NoError(t, err)
	start := time.Now()
	_, err = r.Inspect(context.Background(), "c1")
	elapsed := time.Since(start)
	require.Error(t, err)
	assert.ErrorIs(t, err, runtime.ErrUnavailable)
	assert.Contains(t, err.Error(), host)
	assert.Less(t, elapsed, 2*time.Second)
}

// TestCancelledCallerIsNotUnavailable: a caller that gives up learns
// nothing about the service, so the error has no kind.
func TestCancelledCallerIsNotUnavailable(t *testing.T) {
	r, err := New(WithHost(adaptertest.Hung(t, "unix")))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = r.Inspect(ctx, "c1")
	require.Error(t, err)
	assert.NotErrorIs(t, err, runtime.ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestNewRejectsAnUnusableEndpoint(t *testing.T) {
	cases := []struct {
		name string
		host string
	}{
		{name: "NotAURL", host: "not a url"},
		{name: "UnknownScheme", host: "http://127.0.0.1:8080"},
		{name: "UnixWithoutPath", host: "unix://"},
		{name: "TCPWithoutHost", host: "tcp://"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(WithHost(tc.host))
			require.Error(t, err)
			assert.ErrorIs(t, err, runtime.ErrUnavailable)
			assert.Contains(t, err.Error(), tc.host)
		})
	}
}

func TestDefaultEndpoint(t *testing.T) {
	rootless := filepath.Join(t.TempDir(), "podman", "podman.sock")
	cases := []struct {
		name          string
		containerHost string
		xdg           string
		want          string
	}{
		{name: "ContainerHostWins", containerHost: "unix:///x/y.sock", xdg: filepath.Dir(filepath.Dir(rootless)), want: "unix:///x/y.sock"},
		{name: "BareContainerHostPath", containerHost: "/x/y.sock", want: "unix:///x/y.sock"},
		{name: "NoRuntimeDirMeansRootful", want: "unix://" + rootfulSocket},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CONTAINER_HOST", tc.containerHost)
			t.Setenv("XDG_RUNTIME_DIR", tc.xdg)
			r, err := New()
			require.NoError(t, err)
			assert.Equal(t, tc.want, r.Endpoint())
		})
	}
}

// TestPingTimeoutOption: WithPingTimeout is the bound the first ping waits
// for, longer than the default as well as shorter (a socket-activated
// service starting on a slow host), and the error says which it was.
func TestPingTimeoutOption(t *testing.T) {
	host := adaptertest.Hung(t, "unix")
	r, err := New(WithHost(host), WithPingTimeout(2500*time.Millisecond))
	require.NoError(t, err)
	start := time.Now()
	_, err = r.Version(context.Background())
	require.ErrorIs(t, err, runtime.ErrUnavailable)
	assert.Contains(t, err.Error(), "within 2.5s")
	assert.GreaterOrEqual(t, time.Since(start), 2500*time.Millisecond, "it waited the whole ping timeout, past the default 1.5 s")
}
