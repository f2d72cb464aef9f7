// Package containerd is sandboxer's containerd adapter: it implements
// runtime.ContainerRuntime on the containerd v2 client
// (github.com/containerd/containerd/v2/client), in a containerd namespace of
// its own, with CNI networking through github.com/containerd/go-cni and the
// standard plugins.
//
// Endpoint: WithAddress, else CONTAINERD_ADDRESS, else
// /run/containerd/containerd.sock. Pulls go over plain HTTP to registries on
// 127.0.0.0/8 and localhost, and to the hosts of WithInsecureRegistries and
// SANDBOXER_INSECURE_REGISTRIES (comma-separated); HTTPS elsewhere. Namespace: WithNamespace, else
// CONTAINERD_NAMESPACE, else "sandboxer" (never moby or k8s.io, which belong
// to Docker and Kubernetes). New never contacts the daemon; every verb then
// fails within about a second with runtime.ErrUnavailable naming the address
// when nothing answers there.
//
// The adapter runs on the daemon's host: CNI plugins run in this process's
// network namespace, task logs and network definitions live in a local
// state directory (WithStateDir, default /run/sandboxer/containerd-adapter:
// network definitions, IP allocations, host port reservations, task logs),
// and limits are checked against the host's cgroup controllers.
//
// What a container is made of:
//   - a container whose ID is 64 random hex digits, never given to another
//     container, with its name (the run spec's, or a random one) in the
//     label "nerdctl/name", as nerdctl keeps it; a name is taken under a
//     file lock (state dir, names/), so two creates of a name, in any
//     processes, make one container. Every verb takes an ID or a name (an
//     ID first). Containers made when the ID was the name (no name label)
//     are found by their ID, reported under it as their name, and hold it;
//   - a container with the run spec's labels, an overlay snapshot of its
//     image, and a record (a container extension) of what the adapter needs
//     to know later, from any process: the image ref as given, the stop
//     signal, its network, published ports, addresses, tmpfs paths and
//     anonymous volumes;
//   - a task (Run only; Create makes the container alone), whose stdout and
//     stderr go to <state>/logs/<namespace>/<id>.log;
//   - an OCI spec from the image config (entrypoint, cmd, env, user,
//     workdir), then the run spec: tmpfs (noexec,nosuid,nodev like Docker's),
//     memory, CPU CFS quota/period, pids, rlimits, env, and a read-only
//     cgroup mount at /sys/fs/cgroup so that limits are visible inside;
//   - one network interface (eth0) on a CNI bridge network (bridge sbx-<hash>,
//     a /24 of 10.213.0.0/16, host-local IPAM, portmap when ports are
//     published, firewall), joined between task create and task start in
//     the task's own network namespace (/proc/<pid>/ns/net: no netns file
//     to leak), and left (CNI DEL) by Remove before the task is killed;
//     an ADD that fails part-way is undone before Run returns, and a
//     network lease in the state dir names an ADD until it is recorded,
//     so that what a killed process or a failed DEL leaves is removed by
//     Reconcile (Run, the janitor's sweeps, `sweep containers`) once its
//     container is gone;
//     published ports go through portmap, on 127.0.0.1 by default (see
//     Host ports below);
//   - for each VOLUME of the image that no tmpfs covers, an anonymous volume:
//     an empty snapshot seeded with the image's content at that path, which
//     Remove deletes.
//
// Host ports: portmap publishes a port with iptables DNAT rules alone, and
// no socket holds the host port, so the kernel, Docker's port allocator and
// Podman would all hand it out again. A host port of 0 therefore gets a port
// from the adapter's own range, which by default lies above the kernel's
// ephemeral range (/proc/sys/net/ipv4/ip_local_port_range; 61000-65535 with
// Linux's default 32768-60999), where none of them allocate; when that
// range reaches 65535, the 4096 ports below it. WithHostPortRange, else
// SANDBOXER_CONTAINERD_HOST_PORTS ("first-last"), sets another. A port is
// picked only if it can be bound on the host IP right now (for its
// protocol) and no other container of the adapter holds it: every
// container's host ports are reserved in the state dir under a file lock
// (so concurrent runs in different processes never pick the same one) and
// released by Remove. An explicit host port is published as asked (and
// reserved, so that no pick hands it out).
//
// Container.Mounts lists the tmpfs mounts and the anonymous volumes, as
// Docker does; like Docker it leaves out the kernel filesystems every
// container gets (proc, sysfs, the cgroup mount, devpts, shm, mqueue).
// Containers are never privileged and get no host path, socket or device.
package containerd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	cgroups "github.com/containerd/cgroups/v3"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/containerd/v2/pkg/identifiers"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// Name is the runtime name this adapter reports and puts in its errors.
const Name = "containerd"

const (
	// DefaultAddress is containerd's default gRPC socket.
	DefaultAddress = defaults.DefaultAddress
	// DefaultNamespace is the containerd namespace sandboxer works in.
	DefaultNamespace = "sandboxer"
	// DefaultStateDir is where the adapter keeps network definitions, IP
	// allocations, host port reservations, task logs and FIFOs. It is on /run on purpose: none of it
	// outlives the host's containers, which do not survive a reboot either.
	DefaultStateDir = "/run/sandboxer/containerd-adapter"

	// EnvAddress, EnvNamespace and EnvRuncRoot are the environment variables
	// New reads when no option is given.
	EnvAddress   = "CONTAINERD_ADDRESS"
	EnvNamespace = "CONTAINERD_NAMESPACE"
	EnvRuncRoot  = "CONTAINERD_RUNC_ROOT"
	// EnvInsecureRegistries lists, comma-separated, the registry hosts
	// ("host" or "host:port") to pull from over plain HTTP, as
	// WithInsecureRegistries does.
	EnvInsecureRegistries = "SANDBOXER_INSECURE_REGISTRIES"

	// pingTimeout bounds the first contact with the daemon, so that an
	// address where nothing (or something hung) listens fails fast.
	pingTimeout = 1500 * time.Millisecond
)

// DefaultCNIPluginDirs are searched, in order, for the CNI plugins (Debian's
// containernetworking-plugins installs them in /usr/lib/cni).
var DefaultCNIPluginDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}

// Compile-time proof that the adapter implements the port.
var (
	_ runtime.ContainerRuntime = (*Runtime)(nil)
	_ runtime.ImageStore       = (*Runtime)(nil)
	_ runtime.Diagnoser        = (*Runtime)(nil)
	_ runtime.Reconciler       = (*Runtime)(nil)
)

// Runtime is a runtime.ContainerRuntime backed by a containerd daemon. It is
// safe for concurrent use.
type Runtime struct {
	client      *client.Client
	address     string
	namespace   string
	stateDir    string
	cniDirs     []string
	runcRoot    string
	insecure    []string
	portRange   portRange
	snapshotter string
	log         *slog.Logger
	pingTimeout time.Duration
	reachable   atomic.Bool
}

type options struct {
	adapterkit.Settings // Host is the address; DialTimeout is not used
	namespace           string
	stateDir            string
	cniDirs             []string
	runcRoot            string
	insecure            []string
	ports               *portRange
}

// Option configures New.
type Option func(*options)

// WithAddress talks to the daemon at address (a unix socket path) instead of
// CONTAINERD_ADDRESS or the default socket.
func WithAddress(address string) Option { return func(o *options) { o.Host = address } }

// WithNamespace works in the containerd namespace ns instead of
// CONTAINERD_NAMESPACE or "sandboxer".
func WithNamespace(ns string) Option {
	return func(o *options) { o.namespace = ns }
}

// WithStateDir keeps the adapter's local state (network definitions, IP
// allocations, host port reservations, task logs) in dir instead of DefaultStateDir. Every process
// that drives the same containers must use the same directory.
func WithStateDir(dir string) Option {
	return func(o *options) { o.stateDir = dir }
}

// WithCNIPluginDirs searches dirs for the CNI plugins instead of
// DefaultCNIPluginDirs.
func WithCNIPluginDirs(dirs ...string) Option {
	return func(o *options) { o.cniDirs = dirs }
}

// WithRuncRoot gives runc this state root for the containers the adapter
// creates (else CONTAINERD_RUNC_ROOT, else the shim's default
// /run/containerd/runc), so that a private daemon keeps its runc state apart.
func WithRuncRoot(dir string) Option {
	return func(o *options) { o.runcRoot = dir }
}

// WithInsecureRegistries pulls from these registry hosts ("host" or
// "host:port") over plain HTTP, besides those of
// SANDBOXER_INSECURE_REGISTRIES. Registries on 127.0.0.0/8 and localhost
// always are.
func WithInsecureRegistries(hosts ...string) Option {
	return func(o *options) { o.insecure = append(o.insecure, hosts...) }
}

// WithHostPortRange picks the host ports of ports published without one
// (host port 0) from first-last, inclusive, instead of
// SANDBOXER_CONTAINERD_HOST_PORTS or the default range above the kernel's
// ephemeral range. Keep it clear of /proc/sys/net/ipv4/ip_local_port_range:
// the kernel, Docker and Podman allocate from there, and cannot see the
// adapter's ports (portmap holds no socket). Every process that drives the
// same containers should use the same range.
func WithHostPortRange(first, last int) Option {
	return func(o *options) { o.ports = &portRange{First: first, Last: last} }
}

// WithLogger sets the logger for best-effort clean-ups (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.Logger = l } }

// WithPingTimeout bounds the first contact with the daemon (default
// 1.5 s): a daemon on a slow host may need more.
func WithPingTimeout(d time.Duration) Option { return func(o *options) { o.PingTimeout = d } }

// New returns a Runtime for the address and namespace chosen by the options
// or the environment. It does not contact the daemon: a daemon that is down
// is reported by Version and by every verb as runtime.ErrUnavailable.
func New(opts ...Option) (*Runtime, error) {
	o := options{Settings: adapterkit.DefaultSettings()}
	for _, opt := range opts {
		opt(&o)
	}
	address := adapterkit.Endpoint(o.Host, EnvAddress, func() string { return DefaultAddress })
	if o.namespace == "" {
		o.namespace = os.Getenv(EnvNamespace)
	}
	if o.namespace == "" {
		o.namespace = DefaultNamespace
	}
	if err := identifiers.Validate(o.namespace); err != nil {
		return nil, adapterkit.Fail(Name, address, runtime.OpConnect, address, nil, fmt.Errorf("namespace %q: %w", o.namespace, err))
	}
	if o.stateDir == "" {
		o.stateDir = DefaultStateDir
	}
	if len(o.cniDirs) == 0 {
		o.cniDirs = DefaultCNIPluginDirs
	}
	if o.runcRoot == "" {
		o.runcRoot = os.Getenv(EnvRuncRoot)
	}
	for _, h := range strings.Split(os.Getenv(EnvInsecureRegistries), ",") {
		if h = strings.TrimSpace(h); h != "" {
			o.insecure = append(o.insecure, h)
		}
	}
	ports, err := hostPortRange(o.ports)
	if err != nil {
		return nil, adapterkit.Fail(Name, address, runtime.OpConnect, address, nil, err)
	}
	c, err := client.New(address,
		client.WithDefaultNamespace(o.namespace),
		client.WithTimeout(o.Ping(pingTimeout)))
	if err != nil {
		return nil, adapterkit.ConnectError(Name, address, err)
	}
	return &Runtime{
		client:      c,
		address:     address,
		namespace:   o.namespace,
		stateDir:    filepath.Clean(o.stateDir),
		cniDirs:     o.cniDirs,
		runcRoot:    o.runcRoot,
		insecure:    o.insecure,
		portRange:   ports,
		snapshotter: defaults.DefaultSnapshotter,
		log:         o.Logger,
		pingTimeout: o.Ping(pingTimeout),
	}, nil
}

// Name returns "containerd".
func (r *Runtime) Name() string { return Name }

// Endpoint returns the daemon's socket path.
func (r *Runtime) Endpoint() string { return r.address }

// Namespace returns the containerd namespace the adapter works in.
func (r *Runtime) Namespace() string { return r.namespace }

// Version pings the daemon and reports its version and the host's cgroup
// version.
func (r *Runtime) Version(ctx context.Context) (runtime.Info, error) {
	const op = runtime.OpVersion
	ctx = r.ctx(ctx)
	if err := r.ready(ctx, op, r.address); err != nil {
		return runtime.Info{}, err
	}
	v, err := r.client.Version(ctx)
	if err != nil {
		return runtime.Info{}, r.wrap(op, r.address, err)
	}
	cg := "1"
	if cgroups.Mode() == cgroups.Unified {
		cg = "2"
	}
	return runtime.Info{
		Runtime:       Name,
		Endpoint:      r.address,
		Version:       v.Version,
		CgroupVersion: cg,
		// From the task's cgroup counters (oomKilled), on v1 and v2.
		ReportsOOMKill: true,
	}, nil
}

// Close releases the client's connection.
func (r *Runtime) Close() error {
	return r.client.Close()
}

// ctx puts the adapter's namespace on ctx.
func (r *Runtime) ctx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, r.namespace)
}

// ready makes sure the daemon answered once, with a bounded ping, so that a
// daemon that is down or hung gives ErrUnavailable at once instead of
// whatever the first request's error would be after gRPC's back-off.
func (r *Runtime) ready(ctx context.Context, op, object string) error {
	if r.reachable.Load() {
		return nil
	}
	// No socket at all is known at once: gRPC would retry the dial for
	// the whole ping timeout.
	if path := strings.TrimPrefix(r.address, "unix://"); strings.HasPrefix(path, "/") {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return r.wrap(op, object, adapterkit.WithKind(runtime.ErrUnavailable, "containerd at %s does not answer: no socket there", r.address))
		}
	}
	pctx, cancel := context.WithTimeout(ctx, r.pingTimeout)
	defer cancel()
	if _, err := r.client.Version(pctx); err != nil {
		if ctx.Err() != nil {
			return r.wrap(op, object, ctx.Err())
		}
		return r.wrap(op, object, adapterkit.WithKind(runtime.ErrUnavailable, "containerd at %s does not answer: %w", r.address, err))
	}
	r.reachable.Store(true)
	return nil
}
