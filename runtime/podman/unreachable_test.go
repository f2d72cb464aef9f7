package podman

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// TestUnreachableEndpoint: New succeeds for a service that is not there,
// and then every verb fails within 2 s with ErrUnavailable naming the
// endpoint.
func TestUnreachableEndpoint(t *testing.T) {
	const limit = 2 * time.Second
	verbs := []struct {
		name string
		call func(ctx context.Context, r *Runtime) error
	}{
		{"Version", func(ctx context.Context, r *Runtime) error { _, err := r.Version(ctx); return err }},
		{"ImageExists", func(ctx context.Context, r *Runtime) error { _, err := r.ImageExists(ctx, "busybox"); return err }},
		{"PullImage", func(ctx context.Context, r *Runtime) error { return r.PullImage(ctx, "busybox", nil) }},
		{"Run", func(ctx context.Context, r *Runtime) error {
			_, err := r.Run(ctx, runtime.RunSpec{Name: "c1", Image: "busybox"})
			return err
		}},
		{"Create", func(ctx context.Context, r *Runtime) error {
			_, err := r.Create(ctx, runtime.RunSpec{Name: "c1", Image: "busybox"})
			return err
		}},
		{"Inspect", func(ctx context.Context, r *Runtime) error { _, err := r.Inspect(ctx, "c1"); return err }},
		{"Exec", func(ctx context.Context, r *Runtime) error {
			_, err := r.Exec(ctx, "c1", runtime.ExecSpec{Cmd: []string{"true"}})
			return err
		}},
		{"Stop", func(ctx context.Context, r *Runtime) error { return r.Stop(ctx, "c1", time.Second) }},
		{"Kill", func(ctx context.Context, r *Runtime) error { return r.Kill(ctx, "c1") }},
		{"Remove", func(ctx context.Context, r *Runtime) error { return r.Remove(ctx, "c1") }},
		{"List", func(ctx context.Context, r *Runtime) error {
			_, err := r.List(ctx, map[string]string{"a": "b"})
			return err
		}},
		{"CreateNetwork", func(ctx context.Context, r *Runtime) error {
			_, err := r.CreateNetwork(ctx, runtime.NetworkSpec{Name: "n1"})
			return err
		}},
		{"RemoveNetwork", func(ctx context.Context, r *Runtime) error { return r.RemoveNetwork(ctx, "n1") }},
	}
	endpoints := []struct {
		name string
		host func(t *testing.T) string
		env  bool // through CONTAINER_HOST rather than WithHost
	}{
		{name: "MissingSocketFromContainerHost", host: fixed("unix:///nonexistent/podman.sock"), env: true},
		{name: "MissingSocketFromOption", host: fixed("unix:///nonexistent/podman.sock")},
		{name: "BareSocketPath", host: fixed("/nonexistent/podman.sock")},
		{name: "RefusedTCP", host: refusedTCP},
		{name: "NotALibpodService", host: notLibpod},
		{name: "HungServiceOnUnixSocket", host: hungService},
	}
	for _, ep := range endpoints {
		t.Run(ep.name, func(t *testing.T) {
			host := ep.host(t)
			var opts []Option
			if ep.env {
				t.Setenv("CONTAINER_HOST", host)
			} else {
				t.Setenv("CONTAINER_HOST", "")
				opts = append(opts, WithHost(host))
			}
			r, err := New(opts...)
			require.NoError(t, err, "New must not contact the service")
			t.Cleanup(func() { _ = r.Close() })
			assert.Contains(t, r.Endpoint(), filepath.Base(host))
			// A service that accepts but never answers costs the ping
			// timeout on every verb: TestHungServiceWithin2s proves the
			// default; here it is shortened to keep the test quick.
			r.pingTimeout = 250 * time.Millisecond

			for _, v := range verbs {
				t.Run(v.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					start := time.Now()
					err := v.call(ctx, r)
					elapsed := time.Since(start)

					require.Error(t, err)
					assert.ErrorIs(t, err, runtime.ErrUnavailable)
					assert.Contains(t, err.Error(), r.Endpoint(), "the message names the endpoint")
					assert.Less(t, elapsed, limit, "an unreachable endpoint fails fast")
					var re *runtime.Error
					require.True(t, errors.As(err, &re))
					assert.Equal(t, Name, re.Runtime)
					assert.NotEmpty(t, re.Op)
				})
			}
		})
	}
}

// TestHungServiceWithin2s: with the default ping timeout, a service that
// accepts connections but never answers is unavailable within 2 s.
func TestHungServiceWithin2s(t *testing.T) {
	host := hungService(t)
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
	r, err := New(WithHost(hungService(t)))
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
			if tc.name == "NoRuntimeDirMeansRootful" && socketExists(rootfulSocket) {
				t.Skip("a rootful service exists here; covered by the rootful default anyway")
			}
			assert.Equal(t, tc.want, r.Endpoint())
		})
	}
}

func fixed(host string) func(*testing.T) string {
	return func(*testing.T) string { return host }
}

// refusedTCP is a loopback port on which nothing listens.
func refusedTCP(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "tcp://" + addr
}

// notLibpod is an HTTP server on a unix socket that answers everything
// with 404, as a Docker daemon or a web server mistaken for Podman would.
func notLibpod(t *testing.T) string {
	sock := filepath.Join(t.TempDir(), "not-podman.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return "unix://" + sock
}

// hungService accepts connections on a unix socket and never answers.
func hungService(t *testing.T) string {
	sock := filepath.Join(t.TempDir(), "hung.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "unix://" + sock
}
