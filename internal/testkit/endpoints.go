package testkit

import (
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

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
	url, _ := HungCounting(t, network)
	return url
}

// HungCounting is Hung, and also returns how many connections it has
// accepted so far: a test that something was not contacted reads it.
func HungCounting(t testing.TB, network string) (url string, accepted func() int) {
	t.Helper()
	l := listen(t, network, "hung.sock")
	done := make(chan struct{})
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return network + "://" + l.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
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

// SilentTCP returns "host:port" of a 127.0.0.1 port that drops every new
// connection's SYN, as a host behind a firewall that drops does: a dial
// neither connects nor is refused, it times out. It is a listener with a
// backlog of 0, already full with one connection nobody accepts; it stands
// until the test ends.
func SilentTCP(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	// Fill the backlog: the kernel queues backlog+1 connections, then
	// drops SYNs.
	for range 2 {
		c, err := net.DialTimeout("tcp4", addr, 200*time.Millisecond)
		if err != nil {
			break
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	c, err := net.DialTimeout("tcp4", addr, 200*time.Millisecond)
	if err == nil {
		_ = c.Close()
		t.Fatalf("testkit: %s still completes connections: the backlog did not fill", addr)
	}
	return addr
}
