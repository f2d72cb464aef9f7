// Package podman is sandboxer's Podman adapter: it implements
// runtime.ContainerRuntime on Podman's native libpod
// REST API, so rootful and rootless Podman are first-class without the
// Docker-compatible socket.
//
// It talks to the service through one typed client of its own (client.go:
// a method per libpod request) on plain net/http, with its own wire types
// (wire.go, pinned by golden answers of the service in testdata/). It links
// no Podman client library: even the bindings' connection package brought
// about 70 packages (containers/storage, common, sftp, ssh_config) into
// every binary and test that links the adapter. This package builds with a
// plain `go build`, CGO on or off, no tags. Served: Podman >= 4.0 (libpod
// API 4.x and later; tested against Debian's 4.3.1). An ssh:// endpoint is
// reached through the system's ssh client (ssh.go).
//
// Endpoint: WithHost when given, else CONTAINER_HOST (unix://, tcp:// or
// ssh://, or a bare socket path), else the rootful socket
// /run/podman/podman.sock, else the rootless
// $XDG_RUNTIME_DIR/podman/podman.sock. New never contacts the service, so
// it succeeds for a service that is down; every verb then fails with
// runtime.ErrUnavailable within two seconds, naming the endpoint.
//
// Supported: every RunSpec field (env, entrypoint, command, labels, tmpfs,
// memory, fractional CPUs, pids limit, rlimits, one network, published
// ports with host IP 127.0.0.1 by default and ephemeral host ports),
// through a libpod SpecGenerator. Rlimits are always set explicitly and
// clamped to the service's own hard limits (read from /proc for a local
// socket): a service without CAP_SYS_RESOURCE cannot raise them, and
// Podman's default of 1048576 would fail every start. A memory, CPU or
// pids limit that the service would drop (rootless Podman on cgroup v1
// only warns) is runtime.ErrUnenforceableLimits (an ErrUnsupported) unless
// WithUnenforcedLimits is given. Containers are never privileged, do not
// inherit the service's proxy variables, and get no mounts besides the
// requested tmpfs and the image's anonymous volumes, which Remove deletes. Beyond the port,
// WithLifetime gives every container a hard deadline enforced by conmon, a
// backstop for orphans where no janitor runs.
//
// Where Podman differs from Docker:
//   - A container's Image is the name Podman resolved, fully qualified
//     ("docker.io/library/postgres:16-alpine" for "postgres:16-alpine").
//   - The image's own labels are merged into the container's, as Docker
//     does too.
//   - Each exec keeps its two conmon processes for the service's
//     exit_command_delay (300 s by default) after the exit; the sessions are
//     removed at once where the API allows it (libpod 4.8 and later).
//     hack/env/podman.sh runs the test service with 15 s.
//   - Podman 4.3 binds a container's host ports in the service process
//     before the start and, when the start fails, releases them only at the
//     service's next garbage collection (seconds to about two minutes),
//     although Run has removed the container. Ephemeral host ports are
//     unaffected; a fixed host port may stay busy that long.
//   - Podman chooses an ephemeral host port at create (bind port 0, close)
//     and binds it again at the start: another process can take it in
//     between (Docker's proxy, which allocates from the same range). Run
//     then removes the container and creates it again with fresh ports, up
//     to three times, when every published port is ephemeral; a taken
//     fixed host port is a real conflict and is never retried. Either
//     error names the port.
//   - Networks (network.go) are isolated with libpod's "isolate" option.
//     Before Podman 4.6 (netavark 1.7) it is a boolean, and "true" drops
//     traffic only between networks that have it: containers of the
//     default network and of a plain network reach each other (a warning,
//     once; internal networks are not affected, they have no route either
//     way). From 4.6 "strict" closes that. Worse, netavark 1.4 deletes
//     FORWARD's jump to NETAVARK_ISOLATION_1 whenever the last container
//     of any isolated network goes, although other isolated networks are
//     still in use, and puts it back only at the next container start on
//     one: in between, plain networks reach each other (measured, rootful
//     and rootless). Internal networks do not depend on those rules.
//   - An internal network is created without a gateway, so that the host
//     has no address on it. Netavark 1.4 writes no firewall rule for it:
//     on a host where br_netfilter sends bridged frames through FORWARD
//     and its policy is DROP (Docker sets it), its containers cannot reach
//     each other until FORWARD accepts frames bridged within one podman
//     bridge (hack/env/podman.sh adds that rule). Rootless Podman is not
//     affected (its bridges live in its own network namespace).
//   - A rootless container on a plain network goes out through
//     slirp4netns and reaches every non-loopback address of the host.
package podman

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// Name is the runtime name this adapter reports and puts in its errors.
const Name = "podman"

const (
	// rootfulSocket is where a system Podman service listens.
	rootfulSocket = "/run/podman/podman.sock"
	// defaultPingTimeout bounds the first ping, so that an endpoint that
	// accepts connections but does not answer is unavailable within 2 s.
	defaultPingTimeout = 1500 * time.Millisecond
	// infoTimeout bounds the questions asked once the ping has answered.
	infoTimeout = 30 * time.Second
	// minAPIMajor is the oldest libpod API this adapter speaks.
	minAPIMajor = 4
)

// Compile-time proof that the adapter implements the port.
var (
	_ runtime.ContainerRuntime = (*Runtime)(nil)
	_ runtime.ImageStore       = (*Runtime)(nil)
	_ runtime.Diagnoser        = (*Runtime)(nil)
)

// Runtime is a runtime.ContainerRuntime backed by a Podman service. It is
// safe for concurrent use.
type Runtime struct {
	endpoint string
	opts     options

	// pingTimeout is WithPingTimeout's, else defaultPingTimeout.
	pingTimeout time.Duration
	// beforeStart, when set (by tests), runs before each start of Run
	// with the attempt (from 1) and the created container's ID; an error
	// stands for the start's.
	beforeStart func(ctx context.Context, attempt int, id string) error

	mu   sync.Mutex
	conn *conn
	// svc is what the first successful ping learnt; nil until then.
	svc *service
	// looseIsolation makes the warning of warnLooseIsolation a single one.
	looseIsolation sync.Once
}

// service is what the adapter knows about the service it talks to.
type service struct {
	// apiVersion is the libpod API version the service announced, e.g.
	// "4.3.1"; requests are made at this version.
	apiVersion string
	major      int
	minor      int
	// rlimits are the service's hard limits by rlimit name ("nofile"), or
	// nil when they cannot be read (a remote service).
	rlimits map[string]uint64
	// rootless and cgroupV1 come from the service's info; together they
	// mean that resource limits are dropped.
	rootless bool
	cgroupV1 bool
	// controllers are the cgroup v2 controllers the service may use (a
	// rootless one's: those delegated to its user); nil when unknown.
	controllers []string
	// info is the report the ping read, which the first Version reports
	// rather than asking again.
	info infoReport
}

type options struct {
	adapterkit.Settings
	unenforcedLimits bool
	lifetime         time.Duration
	sshOptions       []string
}

// Option configures New.
type Option func(*options)

// WithHost talks to host ("unix:///run/podman/podman.sock",
// "tcp://127.0.0.1:8888", "ssh://user@host/run/podman/podman.sock" or a
// socket path) instead of CONTAINER_HOST or the default sockets.
func WithHost(host string) Option { return func(o *options) { o.Host = host } }

// WithDialTimeout bounds how long connecting to the service may take
// (default 1 s). It does not bound requests, which follow their context.
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.DialTimeout = d } }

// WithPingTimeout bounds the first ping of the service (default 1.5 s; an
// ssh:// endpoint's is at least 15 s): a socket-activated service that
// starts on the first connection on a slow host needs more.
func WithPingTimeout(d time.Duration) Option { return func(o *options) { o.PingTimeout = d } }

// WithLogger sets the logger for service warnings, clamped rlimits and
// best-effort clean-ups (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.Logger = l } }

// WithUnenforcedLimits lets Run and Create proceed when the service would
// drop a memory, CPU or pids limit (rootless Podman on cgroup v1), logging
// a warning, instead of failing with runtime.ErrUnsupported. It is an
// explicit opt-out: without it a limit is never silently dropped.
func WithUnenforcedLimits() Option {
	return func(o *options) { o.unenforcedLimits = true }
}

// WithSSHOptions adds options to the ssh command line of an ssh://
// endpoint ("-i", "/path/key", "-o", "UserKnownHostsFile=/path"), after
// the adapter's own (batch mode, the connect timeout, the URL's port and
// user) and before the destination. They must not carry a secret: the
// command line is visible to every local user.
func WithSSHOptions(opts ...string) Option {
	return func(o *options) { o.sshOptions = append(o.sshOptions, opts...) }
}

// WithLifetime gives every container that Run and Create make a hard
// lifetime: conmon kills it d after its start (rounded up to whole
// seconds), whether or not anybody tears it down. It is a backstop for
// orphans on hosts where no janitor runs; 0 (the default) means none.
func WithLifetime(d time.Duration) Option {
	return func(o *options) { o.lifetime = d }
}

// New returns a Runtime for the endpoint chosen by the options,
// CONTAINER_HOST or the default sockets. It does not contact the service:
// a service that is down is reported by Version and by every verb as
// runtime.ErrUnavailable. New fails only for an endpoint it cannot parse.
func New(opts ...Option) (*Runtime, error) {
	o := options{Settings: adapterkit.DefaultSettings()}
	for _, opt := range opts {
		opt(&o)
	}
	host, err := normaliseEndpoint(adapterkit.Endpoint(o.Host, "CONTAINER_HOST", defaultEndpoint))
	if err != nil {
		return nil, adapterkit.ConnectError(Name, host, err)
	}
	if o.lifetime < 0 {
		return nil, adapterkit.Fail(Name, host, runtime.OpConnect, host, nil, fmt.Errorf("negative lifetime %s", o.lifetime))
	}
	return &Runtime{endpoint: host, opts: o, pingTimeout: o.Ping(defaultPingTimeout)}, nil
}

// defaultEndpoint is the rootful socket when it exists (or when running as
// root), else the rootless one of the calling user.
func defaultEndpoint() string {
	rootless := ""
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		rootless = filepath.Join(dir, "podman", "podman.sock")
	}
	switch {
	case socketExists(rootfulSocket), rootless == "", os.Geteuid() == 0 && !socketExists(rootless):
		return "unix://" + rootfulSocket
	default:
		return "unix://" + rootless
	}
}

func socketExists(path string) bool {
	if path == "" {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// normaliseEndpoint turns a bare socket path into a unix:// URI and checks
// that the scheme is one the service can be reached by.
func normaliseEndpoint(host string) (string, error) {
	if strings.HasPrefix(host, "/") {
		return "unix://" + host, nil
	}
	u, err := url.Parse(host)
	if err != nil {
		return host, fmt.Errorf("invalid endpoint: %w", err)
	}
	switch u.Scheme {
	case "unix":
		if socketPath(u) == "" {
			return host, errors.New("invalid endpoint: unix URI without a path")
		}
	case "tcp":
		if u.Host == "" {
			return host, errors.New("invalid endpoint: tcp URI without a host")
		}
	case "ssh":
		if _, err := sshArgs(u, time.Second, nil, func(string) string { return "" }); err != nil {
			return host, err
		}
	default:
		return host, fmt.Errorf("invalid endpoint: scheme %q is none of unix, tcp, ssh", u.Scheme)
	}
	return host, nil
}

// socketPath is the path of a unix:// URI, accepting unix://relative too.
func socketPath(u *url.URL) string {
	return u.Host + u.Path
}

// Name returns "podman".
func (r *Runtime) Name() string { return Name }

// Endpoint returns the service's address, e.g.
// "unix:///run/podman/podman.sock", with any credentials redacted
// (runtime.ShowEndpoint).
func (r *Runtime) Endpoint() string { return runtime.ShowEndpoint(r.endpoint) }

// Close releases the client's idle connections.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil {
		r.conn.client.CloseIdleConnections()
	}
	return nil
}

// connect returns the client of the service, dialling and pinging it the
// first time (and again after a failure). The ping is bounded by
// pingTimeout: an endpoint that is down, hung or not a libpod API is
// runtime.ErrUnavailable.
func (r *Runtime) connect(ctx context.Context, op, object string) (*client, error) {
	c, err := r.dial(ctx)
	if err != nil {
		// Outside dial's lock: wrap takes it to forget the service.
		return nil, r.wrap(op, object, err)
	}
	return c, nil
}

// dial is connect under the lock; its errors know their kind.
func (r *Runtime) dial(ctx context.Context) (*client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.svc != nil {
		return &client{conn: r.conn, svc: r.svc}, nil
	}
	if r.conn == nil {
		conn, err := r.newConnection()
		if err != nil {
			return nil, adapterkit.WithKind(runtime.ErrUnavailable, "%w", err)
		}
		r.conn = conn
	}
	svc, err := r.ping(ctx, r.conn)
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up; that says nothing about the service.
			return nil, adapterkit.WithKind(nil, "%w", err)
		}
		return nil, adapterkit.WithKind(runtime.ErrUnavailable, "%w", err)
	}
	r.svc = svc
	return &client{conn: r.conn, svc: svc}, nil
}

// newConnection builds the HTTP client for the endpoint without contacting
// it. Every dial failure is a *dialError (nothing was sent).
func (r *Runtime) newConnection() (*conn, error) {
	u, err := url.Parse(r.endpoint)
	if err != nil {
		return nil, err
	}
	var dial func(ctx context.Context, network, addr string) (net.Conn, error)
	base := "http://d"
	switch u.Scheme {
	case "unix":
		path := socketPath(u)
		dial = adapterkit.Dialer("unix", path, r.opts.DialTimeout)
		u = &url.URL{Scheme: "unix", Path: path}
	case "tcp":
		dial = adapterkit.Dialer("tcp", u.Host, r.opts.DialTimeout)
		base = "http://" + u.Host + u.Path
	case "ssh":
		args, err := sshArgs(u, r.opts.DialTimeout, r.opts.sshOptions, os.Getenv)
		if err != nil {
			return nil, err
		}
		dial = sshDialer(args)
	default:
		return nil, fmt.Errorf("invalid endpoint: scheme %q is none of unix, tcp, ssh", u.Scheme)
	}
	return &conn{
		uri:  u,
		base: base,
		client: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				if err != nil {
					return nil, &dialError{err}
				}
				return c, nil
			},
			DisableCompression:  true,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		}},
	}, nil
}

// forget drops what the last ping learnt, so that the next verb pings
// again: the service went away, and may come back another version.
func (r *Runtime) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.svc = nil
}
