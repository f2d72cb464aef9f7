package containerd

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// TestUnreachableAddress: New succeeds for a daemon that is not there, and
// every verb then fails within 2 s with ErrUnavailable naming the address.
func TestUnreachableAddress(t *testing.T) {
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
	addresses := []struct {
		name    string
		address func(t *testing.T) string
		env     bool // through CONTAINERD_ADDRESS rather than WithAddress
	}{
		{name: "MissingSocketFromEnv", address: missingSocket, env: true},
		{name: "MissingSocketFromOption", address: missingSocket},
		{name: "NotASocket", address: func(t *testing.T) string { return t.TempDir() }},
		{name: "HungDaemon", address: hungSocket},
	}
	for _, a := range addresses {
		t.Run(a.name, func(t *testing.T) {
			address := a.address(t)
			var opts []Option
			if a.env {
				t.Setenv(EnvAddress, address)
			} else {
				t.Setenv(EnvAddress, "")
				opts = append(opts, WithAddress(address))
			}
			opts = append(opts, WithStateDir(t.TempDir()))
			r, err := New(opts...)
			require.NoError(t, err, "New must not contact the daemon")
			t.Cleanup(func() { _ = r.Close() })
			assert.Equal(t, address, r.Endpoint())

			for _, v := range verbs {
				t.Run(v.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					start := time.Now()
					err := v.call(ctx, r)
					elapsed := time.Since(start)

					require.Error(t, err)
					assert.ErrorIs(t, err, runtime.ErrUnavailable)
					assert.Contains(t, err.Error(), address, "the message names the address")
					assert.Less(t, elapsed, limit, "an unreachable address fails fast")
					var re *runtime.Error
					require.True(t, errors.As(err, &re))
					assert.Equal(t, Name, re.Runtime)
					assert.NotEmpty(t, re.Op)
				})
			}
		})
	}
}

// missingSocket is a socket path where nothing is.
func missingSocket(t *testing.T) string {
	return filepath.Join(t.TempDir(), "containerd.sock")
}

// hungSocket is a unix socket that accepts connections and never answers.
func hungSocket(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "hung.sock")
	l, err := net.Listen("unix", path)
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
	return path
}
