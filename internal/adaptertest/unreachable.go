package adaptertest

import (
	"context"
	"errors"
	"fmt"
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

// UnreachableLimit is how long any verb may take to report an unreachable
// endpoint.
const UnreachableLimit = 2 * time.Second

// Endpoint is one way for a backend not to be there.
type Endpoint struct {
	// Name names the subtest.
	Name string
	// Addr returns the address to give the adapter, standing up (until the
	// test ends) whatever is to answer there.
	Addr func(t *testing.T) string
	// Env says the adapter finds Addr through its environment variable
	// rather than through an option.
	Env bool
}

// Open makes the adapter under test for ep at addr, without contacting the
// backend, and checks what the adapter reports as its endpoint. The
// runtime is closed when the test ends.
type Open func(t *testing.T, ep Endpoint, addr string) runtime.ContainerRuntime

// unreachableVerbs are all the verbs of the port, plus runtime.Creator's.
var unreachableVerbs = []struct {
	name string
	call func(ctx context.Context, r runtime.ContainerRuntime) error
}{
	{"Version", func(ctx context.Context, r runtime.ContainerRuntime) error { _, err := r.Version(ctx); return err }},
	{"ImageExists", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := r.ImageExists(ctx, "busybox")
		return err
	}},
	{"PullImage", func(ctx context.Context, r runtime.ContainerRuntime) error { return r.PullImage(ctx, "busybox", nil) }},
	{"Run", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := r.Run(ctx, runtime.RunSpec{Name: "c1", Image: "busybox"})
		return err
	}},
	{"Create", func(ctx context.Context, r runtime.ContainerRuntime) error {
		c, ok := r.(runtime.Creator)
		if !ok {
			return fmt.Errorf("%T is not a runtime.Creator", r)
		}
		_, err := c.Create(ctx, runtime.RunSpec{Name: "c1", Image: "busybox"})
		return err
	}},
	{"Inspect", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := r.Inspect(ctx, "c1")
		return err
	}},
	{"Exec", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := r.Exec(ctx, "c1", runtime.ExecSpec{Cmd: []string{"true"}})
		return err
	}},
	{"Stop", func(ctx context.Context, r runtime.ContainerRuntime) error { return r.Stop(ctx, "c1", time.Second) }},
	{"Kill", func(ctx context.Context, r runtime.ContainerRuntime) error { return r.Kill(ctx, "c1") }},
	{"Remove", func(ctx context.Context, r runtime.ContainerRuntime) error { return r.Remove(ctx, "c1") }},
	{"List", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := r.List(ctx, map[string]string{"a": "b"})
		return err
	}},
	{"CreateNetwork", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := r.CreateNetwork(ctx, runtime.NetworkSpec{Name: "n1"})
		return err
	}},
	{"RemoveNetwork", func(ctx context.Context, r runtime.ContainerRuntime) error { return r.RemoveNetwork(ctx, "n1") }},
}

// Unreachable checks, for each endpoint, that the adapter open makes is
// created without contacting its backend and that then every verb fails
// within UnreachableLimit with runtime.ErrUnavailable, in a *runtime.Error
// of the adapter's name with an Op, whose message names the endpoint.
func Unreachable(t *testing.T, open Open, endpoints ...Endpoint) {
	for _, ep := range endpoints {
		t.Run(ep.Name, func(t *testing.T) {
			r := open(t, ep, ep.Addr(t))
			t.Cleanup(func() { _ = r.Close() })

			for _, v := range unreachableVerbs {
				t.Run(v.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					start := time.Now()
					err := v.call(ctx, r)
					elapsed := time.Since(start)

					require.Error(t, err)
					assert.ErrorIs(t, err, runtime.ErrUnavailable)
					assert.Contains(t, err.Error(), r.Endpoint(), "the message names the endpoint")
					assert.Less(t, elapsed, UnreachableLimit, "an unreachable endpoint fails fast")
					var re *runtime.Error
					require.True(t, errors.As(err, &re))
					assert.Equal(t, r.Name(), re.Runtime)
					assert.NotEmpty(t, re.Op)
				})
			}
		})
	}
}

// Fixed is an Endpoint.Addr that is always addr.
func Fixed(addr string) func(*testing.T) string {
	return func(*testing.T) string { return addr }
}

// RefusedTCP returns "tcp://" and a loopback port on which nothing
// listens.
func RefusedTCP(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "tcp://" + addr
}

// NotFound serves HTTP answering everything with 404, as a web server (or
// another runtime's API) mistaken for the backend would, on network "tcp"
// (a loopback port) or "unix" (a socket in t.TempDir()), until the test
// ends. It returns the address as a URL: "tcp://host:port" or
// "unix:///path".
func NotFound(t *testing.T, network string) string {
	l := listen(t, network, "not-found.sock")
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return network + "://" + l.Addr().String()
}

// Hung accepts connections and never answers, on network "tcp" or "unix"
// as NotFound, until the test ends. It returns the address as a URL.
func Hung(t *testing.T, network string) string {
	l := listen(t, network, "hung.sock")
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
	return network + "://" + l.Addr().String()
}

// listen listens on a loopback port, or on a socket named sock in
// t.TempDir().
func listen(t *testing.T, network, sock string) net.Listener {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), sock)
	}
	l, err := net.Listen(network, addr)
	require.NoError(t, err)
	return l
}
