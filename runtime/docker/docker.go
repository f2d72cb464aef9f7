// Package docker is sandboxer's Docker adapter: it implements
// runtime.ContainerRuntime on the Docker Engine API
// through github.com/docker/docker/client, negotiating the API version with
// the daemon (Docker 20.10, API 1.41, and newer).
//
// Endpoint: WithHost when given, else DOCKER_HOST (with DOCKER_TLS_VERIFY and
// DOCKER_CERT_PATH, as the docker CLI reads them), else the default socket
// unix:///var/run/docker.sock. New never contacts the daemon, so it succeeds
// for a daemon that is down; every verb then fails quickly with
// runtime.ErrUnavailable and a message naming the endpoint (connecting is
// bounded by the dial timeout, the version negotiation by a ping timeout).
//
// Supported: every RunSpec field (env, entrypoint, command, labels, tmpfs,
// memory, fractional CPUs, pids limit, ulimits, one network, published ports
// with host IP 127.0.0.1 by default and ephemeral host ports). A limit that
// the daemon discards (it only warns on some kernels) is detected after
// create by reading the container's HostConfig back, and reported as
// runtime.ErrUnsupported; the container is then removed. Containers are never
// privileged and get no mounts besides the requested tmpfs and the image's
// anonymous volumes, which Remove deletes with the container.
//
// Networks: CreateNetwork gives each network an explicit /26 of
// sandboxer's pool (SANDBOXER_SUBNET_POOL, default 10.213.0.0/16) that
// overlaps none of the daemon's networks nor, for a local daemon, the
// host's routes, so that the daemon's default address pools (about 30
// networks) are never used up. Cross-network isolation is Docker's own
// (the DOCKER-ISOLATION chains). An internal network is Docker-internal
// and its bridge has no IPv4 address (com.docker.network.bridge.
// inhibit_ipv4): Internal alone only drops forwarded traffic, and on
// 20.10 a container there still reached every host address through the
// bridge's. Run refuses a published port on an internal network
// (runtime.ErrInvalid), and RemoveNetwork of a network in use is
// runtime.ErrInUse.
//
// Docker merges the image's labels into the container's: Inspect and List
// report the labels of the spec exactly, plus those of the image.
//
// Docker picks an ephemeral host port at the start from the kernel's
// ephemeral range, by its own bookkeeping, and only then binds it: a port
// another runtime holds fails the start ("address already in use"). Run
// then removes the container and creates it again, up to three times,
// when the spec has an ephemeral port and the taken one was not asked for
// explicitly; a taken fixed host port is a real conflict and is never
// retried. Either error names the port.
package docker

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/docker/docker/client"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// Name is the runtime name this adapter reports and puts in its errors.
const Name = "docker"

const (
	// pingTimeout bounds the version negotiation, so that a daemon that
	// accepts connections but does not answer cannot hang every verb.
	pingTimeout = 10 * time.Second
)

// Compile-time proof that the adapter implements the port.
var (
	_ runtime.ContainerRuntime = (*Runtime)(nil)
	_ runtime.ImageStore       = (*Runtime)(nil)
)

// Runtime is a runtime.ContainerRuntime backed by a Docker daemon. It is safe
// for concurrent use.
type Runtime struct {
	cli *client.Client
	// netCreates serialises this process's creates of one network name:
	// daemons before API 1.44 check duplicate names best-effort only.
	netCreates adapterkit.NameLocks
	endpoint   string
	log        *slog.Logger
	negotiated atomic.Bool
	// pingTimeout bounds the negotiation ping (pingTimeout by default).
	pingTimeout time.Duration
	// beforeStart, when set (by tests), runs before each start of Run
	// with the attempt (from 1) and the created container's ID; an error
	// stands for the start's.
	beforeStart func(ctx context.Context, attempt int, id string) error
	// beforeNetworkCreate, when set (by tests), runs before each network
	// create of CreateNetwork with the subnet it is about to ask for.
	beforeNetworkCreate func(ctx context.Context, subnet netip.Prefix)
}

type options struct {
	adapterkit.Settings
}

// Option configures New.
type Option func(*options)

// WithHost talks to host (e.g. "unix:///run/user/1000/docker.sock" or
// "tcp://127.0.0.1:2375") instead of DOCKER_HOST or the default socket.
func WithHost(host string) Option { return func(o *options) { o.Host = host } }

// WithDialTimeout bounds how long connecting to the daemon may take
// (default 1 s). It does not bound requests, which follow their context.
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.DialTimeout = d } }

// WithPingTimeout bounds the API version negotiation, the first contact
// with the daemon (default 10 s).
func WithPingTimeout(d time.Duration) Option { return func(o *options) { o.PingTimeout = d } }

// WithLogger sets the logger for daemon warnings and best-effort clean-ups
// (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.Logger = l } }

// New returns a Runtime for the endpoint chosen by the options, DOCKER_HOST
// or the default socket. It does not contact the daemon: a daemon that is
// down is reported by Version and by every verb as runtime.ErrUnavailable.
// New fails only for an endpoint it cannot parse.
func New(opts ...Option) (*Runtime, error) {
	o := options{Settings: adapterkit.DefaultSettings()}
	for _, opt := range opts {
		opt(&o)
	}
	host := adapterkit.Endpoint(o.Host, client.EnvOverrideHost, func() string { return client.DefaultDockerHost })
	u, err := client.ParseHostURL(host)
	if err != nil {
		return nil, adapterkit.ConnectError(Name, host, fmt.Errorf("invalid endpoint: %w", err))
	}

	copts := []client.Opt{client.FromEnv, client.WithHost(host), client.WithAPIVersionNegotiation()}
	// Bound the connect; other schemes (npipe, ssh) keep the client's own
	// dialer. A unix socket is dialled whatever address net/http passes
	// (the URL's dummy host).
	switch u.Scheme {
	case "unix":
		copts = append(copts, client.WithDialContext(adapterkit.Dialer("unix", u.Host, o.DialTimeout)))
	case "tcp", "http":
		copts = append(copts, client.WithDialContext(adapterkit.Dialer("tcp", "", o.DialTimeout)))
	}
	cli, err := client.NewClientWithOpts(copts...)
	if err != nil {
		return nil, adapterkit.ConnectError(Name, host, err)
	}
	return &Runtime{cli: cli, endpoint: host, log: o.Logger, pingTimeout: o.Ping(pingTimeout)}, nil
}

// Name returns "docker".
func (r *Runtime) Name() string { return Name }

// Endpoint returns the daemon address, e.g. "unix:///var/run/docker.sock",
// with any credentials redacted (runtime.ShowEndpoint).
func (r *Runtime) Endpoint() string { return runtime.ShowEndpoint(r.endpoint) }

// Version pings the daemon and reports its version, the negotiated API
// version, whether it runs rootless and its cgroup version.
func (r *Runtime) Version(ctx context.Context) (runtime.Info, error) {
	const op = runtime.OpVersion
	if err := r.negotiate(ctx, op, r.endpoint); err != nil {
		return runtime.Info{}, err
	}
	v, err := r.cli.ServerVersion(ctx)
	if err != nil {
		return runtime.Info{}, r.wrap(op, r.endpoint, err)
	}
	info, err := r.cli.Info(ctx)
	if err != nil {
		return runtime.Info{}, r.wrap(op, r.endpoint, err)
	}
	rootless := false
	for _, s := range info.SecurityOptions {
		if strings.Contains(s, "name=rootless") {
			rootless = true
		}
	}
	return runtime.Info{
		Runtime:       Name,
		Endpoint:      r.Endpoint(),
		Version:       v.Version,
		APIVersion:    r.cli.ClientVersion(),
		Rootless:      rootless,
		CgroupVersion: info.CgroupVersion,
		// The daemon records the OOM event containerd's shim reports
		// (State.OOMKilled), on cgroup v1 and v2.
		ReportsOOMKill: true,
	}, nil
}

// Close releases the client's idle connections.
func (r *Runtime) Close() error {
	return r.cli.Close()
}

// negotiate settles the API version once, with a bounded ping, so that a
// daemon that is down, hung or not a Docker daemon at all gives
// ErrUnavailable at once instead of whatever the first request's error
// happens to be. (The client would negotiate lazily on its own, but it
// swallows the ping's error.)
func (r *Runtime) negotiate(ctx context.Context, op, object string) error {
	if r.negotiated.Load() {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, r.pingTimeout)
	defer cancel()
	ping, err := r.cli.Ping(pctx)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			// The caller gave up; that says nothing about the daemon.
			return r.wrap(op, object, err)
		case pctx.Err() != nil:
			err = fmt.Errorf("no answer to ping within %s: %w", r.pingTimeout, err)
		case !client.IsErrConnectionFailed(err):
			err = fmt.Errorf("not a Docker Engine API: ping failed: %w", err)
		}
		return r.wrap(op, object, adapterkit.WithKind(runtime.ErrUnavailable, "%w", err))
	}
	r.cli.NegotiateAPIVersionPing(ping)
	r.negotiated.Store(true)
	return nil
}
