package docker

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// TestUnreachableEndpoint: New succeeds for a daemon that is not there, and
// then every verb fails fast with ErrUnavailable naming the endpoint.
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
		env  bool // through DOCKER_HOST rather than WithHost
	}{
		{name: "MissingSocketFromDockerHost", host: fixed("unix:///nonexistent.sock"), env: true},
		{name: "MissingSocketFromOption", host: fixed("unix:///nonexistent/docker.sock")},
		{name: "RefusedTCP", host: refusedTCP},
		{name: "NotADockerDaemon", host: notDocker},
		{name: "HungDaemon", host: hungDaemon},
	}
	for _, ep := range endpoints {
		t.Run(ep.name, func(t *testing.T) {
			host := ep.host(t)
			var opts []Option
			if ep.env {
				t.Setenv("DOCKER_HOST", host)
			} else {
				t.Setenv("DOCKER_HOST", "")
				opts = append(opts, WithHost(host))
			}
			r, err := New(opts...)
			require.NoError(t, err, "New must not contact the daemon")
			t.Cleanup(func() { _ = r.Close() })
			// A daemon that accepts but never answers costs the ping
			// timeout; shorten it so that the same 2 s limit applies.
			r.pingTimeout = 250 * time.Millisecond
			assert.Equal(t, host, r.Endpoint())

			for _, v := range verbs {
				t.Run(v.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					start := time.Now()
					err := v.call(ctx, r)
					elapsed := time.Since(start)

					require.Error(t, err)
					assert.ErrorIs(t, err, runtime.ErrUnavailable)
					assert.Contains(t, err.Error(), host, "the message names the endpoint")
					assert.Less(t, elapsed, limit, "an unreachable endpoint fails fast")
					var re *runtime.Error
					require.True(t, errors.As(err, &re))
					assert.Equal(t, Name, re.Runtime)
				})
			}
		})
	}
}

func TestNewRejectsAnUnparsableEndpoint(t *testing.T) {
	_, err := New(WithHost("not a url"))
	require.Error(t, err)
	assert.ErrorIs(t, err, runtime.ErrUnavailable)
	assert.Contains(t, err.Error(), "not a url")
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

// notDocker is an HTTP server that answers everything with 404, as a web
// server mistaken for the daemon would.
func notDocker(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	return "tcp://" + srv.Listener.Addr().String()
}

// hungDaemon accepts connections and never answers.
func hungDaemon(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
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
	return "tcp://" + l.Addr().String()
}
