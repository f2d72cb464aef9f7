package testkit

import (
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// Endpoints where no server (or not the right one) answers, for the tests
// of what a client does then: each stands until the test ends.

// HoldPort takes a 127.0.0.1 port until the test ends and returns it.
func HoldPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// FreePort returns a 127.0.0.1 port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// RefusedTCP returns "tcp://" and a loopback port on which nothing
// listens.
func RefusedTCP(t testing.TB) string {
	t.Helper()
	return "tcp://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

// NotFound serves HTTP answering everything with 404, as a web server (or
// another runtime's API) mistaken for the backend would, on network "tcp"
// (a loopback port) or "unix" (a socket in t.TempDir()), until the test
// ends. It returns the address as a URL: "tcp://host:port" or
// "unix:///path".
func NotFound(t testing.TB, network string) string {
	t.Helper()
	l := listen(t, network, "not-found.sock")
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return network + "://" + l.Addr().String()
}

// Hung accepts connections and never answers, on network "tcp" or "unix"
// as NotFound, until the test ends. It returns the address as a URL.
func Hung(t testing.TB, network string) string {
	t.Helper()
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
func listen(t testing.TB, network, sock string) net.Listener {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), sock)
	}
	l, err := net.Listen(network, addr)
	require.NoError(t, err)
	return l
}
