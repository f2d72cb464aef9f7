package adapterkit

import (
	"context"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"
)

// DefaultDialTimeout bounds connecting to a backend's socket unless an
// adapter is told otherwise: an unreachable endpoint must fail fast, not
// after a transport's default (10 s or more).
const DefaultDialTimeout = time.Second

// Settings are the options every adapter's New reads, whatever else it
// takes. An adapter's options embed them; its WithHost (WithAddress),
// WithDialTimeout and WithLogger set them.
type Settings struct {
	// Host is the endpoint asked for ("" : the environment's, else the
	// backend's default).
	Host string
	// DialTimeout bounds connecting (not requests, which follow their
	// context).
	DialTimeout time.Duration
	// Logger receives backend warnings and best-effort clean-ups.
	Logger *slog.Logger
	// PingTimeout bounds the first contact with the backend (0: the
	// adapter's default), so that an endpoint that accepts connections
	// but does not answer fails within it. A socket-activated service
	// that starts on the first connection (Debian's podman.socket) on a
	// slow host needs more than the default.
	PingTimeout time.Duration
}

// Ping is s.PingTimeout, or def when none was asked for.
func (s Settings) Ping(def time.Duration) time.Duration {
	if s.PingTimeout > 0 {
		return s.PingTimeout
	}
	return def
}

// DefaultSettings are what every adapter starts from before its options:
// DefaultDialTimeout and slog.Default().
func DefaultSettings() Settings {
	return Settings{DialTimeout: DefaultDialTimeout, Logger: slog.Default()}
}

// Endpoint is the endpoint an adapter talks to: the one asked for, else
// the environment variable env, else fallback() (evaluated only then).
func Endpoint(asked, env string, fallback func() string) string {
	if asked != "" {
		return asked
	}
	if v := os.Getenv(env); v != "" {
		return v
	}
	return fallback()
}

// Dialer dials network address (e.g. "unix", "/run/podman/podman.sock")
// whatever address net/http passes (for a unix socket, a URL's dummy
// host), bounding the connect by timeout. With address "" it dials the
// address net/http passes, for endpoints the URL names as they are.
func Dialer(network, address string, timeout time.Duration) func(context.Context, string, string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, _, passed string) (net.Conn, error) {
		if address == "" {
			return d.DialContext(ctx, network, passed)
		}
		return d.DialContext(ctx, network, address)
	}
}

// SelectorString renders a label selector for error messages:
// "k=v,k2=v2", in key order.
func SelectorString(selector map[string]string) string {
	parts := make([]string, 0, len(selector))
	for _, k := range slices.Sorted(maps.Keys(selector)) {
		parts = append(parts, k+"="+selector[k])
	}
	return strings.Join(parts, ",")
}

// EnvList renders env as KEY=value lines in key order, so that the same
// spec always makes the same request (nil for none).
func EnvList(env map[string]string) []string {
	if len(env) == 0 {
		return nil
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}
