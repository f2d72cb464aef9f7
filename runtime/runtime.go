package runtime

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"
)

// ContainerRuntime is the port every backend implements. All verbs are safe
// for concurrent use. Names and IDs are interchangeable wherever a verb takes
// a container reference; a reference is read as an ID first, then as a
// name.
//
// Identity contract: a container's ID is never given to another container
// (Docker's and Podman's 64 random hex digits, containerd's alike, a pod's
// UID), so a verb given the ID a caller listed acts on that container or
// on none, whatever became of its name since (Destroy relies on it; the
// conformance suite's IDsAreNeverReused asserts it).
//
// Idempotency contract (the provisioner's teardown relies on it):
//   - Remove of an absent container returns nil.
//   - Stop and Kill of a container that is not running return nil.
//   - Inspect, Exec, Stop and Kill of an absent container return an error
//     that matches ErrNotFound.
//   - Run under a name that is already taken returns ErrAlreadyExists.
type ContainerRuntime interface {
	// Name is the backend's short name: "docker", "podman", "containerd"
	// or "kubernetes".
	Name() string
	// Endpoint is the address the runtime talks to (a socket path or URL),
	// for messages and diagnostics.
	Endpoint() string
	// Version pings the backend and reports what it is.
	Version(ctx context.Context) (Info, error)

	// Create creates a container from spec without starting it: it is in
	// the "created" state, as a provisioner killed between create and
	// start leaves one (Inspect reports it not running; Remove removes
	// it). The lifecycle code never needs it (it calls Run); the
	// conformance suite uses it to make that state. The image must be
	// present; a name that is already taken gives ErrAlreadyExists.
	Create(ctx context.Context, spec RunSpec) (Container, error)
	// Run creates and starts a detached container from spec. The image must
	// be present; Run does not pull. If the start fails, the created
	// container is removed before the error is returned.
	Run(ctx context.Context, spec RunSpec) (Container, error)
	// Inspect reports a container's current state.
	Inspect(ctx context.Context, container string) (Container, error)
	// Exec runs argv inside a running container and waits for it.
	Exec(ctx context.Context, container string, spec ExecSpec) (ExecResult, error)
	// Stop sends the container's stop signal (SIGTERM unless the image says
	// otherwise), waits up to grace, then kills it.
	Stop(ctx context.Context, container string, grace time.Duration) error
	// Kill sends SIGKILL and returns once the container is no longer running.
	Kill(ctx context.Context, container string) error
	// Remove force-removes a container together with its anonymous volumes.
	Remove(ctx context.Context, container string) error
	// List returns every container, in any state, whose labels contain every
	// key=value pair of selector. An empty selector lists all containers of
	// this runtime (in its namespace, where the backend has namespaces).
	List(ctx context.Context, selector map[string]string) ([]Container, error)
	// Snapshot is one look at the whole runtime, in as few round trips as
	// the backend allows: the containers whose labels match selector (as
	// List reports them), and every reference by which the runtime's own
	// tools address a container that exists, in any state (see Snapshot).
	// It is what the janitor judges owners by.
	Snapshot(ctx context.Context, selector map[string]string) (Snapshot, error)

	// CreateNetwork creates a bridge network that containers can join by
	// name. A name that is already taken gives ErrAlreadyExists.
	//
	// Isolation contract (the conformance suite proves it from a
	// neighbour's side): a container on the network opens no connection
	// to a container that is not on it (another network's, the runtime's
	// default network's), nor is it reached from one; a container on two
	// networks reaches both. An Internal network has no route out: no NAT,
	// no gateway to the host's addresses, and Run refuses to publish a
	// port of a container on it (ErrInvalid). A plain network keeps the
	// route out and published ports. Local backends take the network's
	// subnet from sandboxer's own pool (SANDBOXER_SUBNET_POOL, see
	// runtime/internal/adapterkit's SubnetPool), never the runtime's
	// default pools, so that many more networks fit than the runtime's
	// defaults allow.
	CreateNetwork(ctx context.Context, spec NetworkSpec) (Network, error)
	// ListNetworks returns every network this adapter created whose labels
	// contain every key=value pair of selector (an empty selector: every
	// network the adapter created), with the labels it was created with.
	ListNetworks(ctx context.Context, selector map[string]string) ([]Network, error)
	// RemoveNetwork deletes a network; an absent network is not an error.
	// A network that a container still uses is not removed: the error
	// matches ErrInUse and the network stays as it was.
	RemoveNetwork(ctx context.Context, name string) error

	// Close releases the client's connections.
	Close() error
}

// ImageStore is implemented by backends that keep images of their own,
// which the provisioner pulls into, asks about and saves (Docker, Podman,
// containerd). It is not part of the port: a backend whose nodes pull at
// Run by themselves (Kubernetes' kubelet) has no image store, and the
// lifecycle code asks for one once, by type (As), never by failing. Run of
// an image such a backend cannot have is still ErrImageNotFound.
type ImageStore interface {
	// ImageExists reports whether ref is present locally.
	ImageExists(ctx context.Context, ref string) (bool, error)
	// PullImage fetches ref. progress may be nil. A ref the registry does
	// not have (or a registry that cannot serve it) gives ErrImageNotFound.
	PullImage(ctx context.Context, ref string, progress ProgressFunc) error
	// ImageID is the ID of ref's image: the digest of its config
	// ("sha256:<hex>"), which names the same image on every runtime. An
	// absent ref gives ErrImageNotFound.
	ImageID(ctx context.Context, ref string) (string, error)
	// ImageConfig is the layout ref's image config declares (its Env and
	// VOLUMEs; see ImageConfig). An absent ref gives ErrImageNotFound.
	ImageConfig(ctx context.Context, ref string) (ImageConfig, error)
	// SaveImage writes ref's image to w as a docker-archive (the format
	// of `docker save`: manifest.json, the config and every layer). An
	// absent ref gives ErrImageNotFound.
	SaveImage(ctx context.Context, ref string, w io.Writer) error
	// LoadImage stores the one image of the docker-archive r (see
	// ReadArchive) under its one tag, and returns that tag: once it
	// returns, the image can be Run. An archive that breaks the format (not
	// a tar, truncated, a file its manifest names missing) gives ErrInvalid
	// and leaves no image behind.
	LoadImage(ctx context.Context, r io.Reader) (string, error)
	// RemoveImage removes the reference ref: afterwards ImageExists(ref)
	// is false. A container that uses the image keeps existing and
	// running (the runtime keeps what it needs). An absent ref is not an
	// error.
	RemoveImage(ctx context.Context, ref string) error
}

// Unwrapper is implemented by wrappers of a ContainerRuntime (recorders,
// timers, fault injectors) so that As finds the optional interfaces of
// the runtime they wrap.
type Unwrapper interface {
	// Unwrap returns the wrapped runtime.
	Unwrap() ContainerRuntime
}

// As reports whether rt, or a runtime it wraps (Unwrapper, followed to
// the end), implements T, and returns the first that does: the one way
// the lifecycle code asks for an optional interface (ImageStore,
// Reconciler, Diagnoser, Adopter, FormReporter).
func As[T any](rt ContainerRuntime) (T, bool) {
	for rt != nil {
		if t, ok := rt.(T); ok {
			return t, true
		}
		u, ok := rt.(Unwrapper)
		if !ok {
			break
		}
		rt = u.Unwrap()
	}
	var zero T
	return zero, false
}

// Snapshot is one look at a runtime: the containers a selector matched and
// the references of every container that exists.
type Snapshot struct {
	// Matched are the containers whose labels contain every pair of the
	// selector, as List would report them.
	Matched []Container
	// Refs holds, for every container of the runtime in any state
	// (created, running, paused, exited), each reference the runtime's own
	// tools accept for it: its full ID and its name on Docker and Podman;
	// on containerd, across every namespace, its ID and the name nerdctl
	// keeps in the "nerdctl/name" label.
	Refs map[string]bool
}

// Exists reports whether a container known by ref exists in the snapshot.
func (s Snapshot) Exists(ref string) bool { return ref != "" && s.Refs[ref] }

// Info describes a backend that answered a ping.
type Info struct {
	Runtime       string // "docker", "podman", "containerd", "kubernetes"
	Endpoint      string
	Version       string // server version
	APIVersion    string // negotiated API version, where the backend has one
	Rootless      bool
	CgroupVersion string // "1" or "2", where known
	// ReportsOOMKill says whether Container.OOMKilled is filled: where it
	// is false, an exited container's OOMKilled is always false and only
	// its exit code (137, SIGKILL) hints at a kill, whoever sent it.
	ReportsOOMKill bool
}

// RunSpec is everything needed to start a container. Zero values mean "the
// image's or backend's default", never "unlimited by accident": a limit
// that the backend cannot enforce is an error of kind ErrUnsupported.
type RunSpec struct {
	Name  string
	Image string
	// Env is added to the image's environment.
	Env map[string]string
	// Entrypoint, when non-nil, replaces the image's entrypoint.
	Entrypoint []string
	// Command, when non-nil, replaces the image's command.
	Command []string
	Labels  map[string]string
	// Tmpfs maps a path inside the container to mount options
	// (e.g. "rw,size=256m,mode=1777"; empty means the backend's default).
	Tmpfs map[string]string
	// MemoryBytes is the memory limit (0: none).
	MemoryBytes int64
	// CPUs is the CPU quota in cores, fractional (0: none).
	CPUs float64
	// PidsLimit caps the number of processes (0: none).
	PidsLimit int64
	// Ulimits are rlimits for the container's processes.
	Ulimits []Ulimit
	// Network is the name of one network to join ("" : the backend's
	// default network).
	Network string
	// Ports to publish on the host.
	Ports []PortSpec
	// Capabilities are the only capabilities the container's processes
	// may hold (e.g. "CHOWN", "SETUID"; one of PermittedCapabilities,
	// with or without "CAP_", any case): every other is dropped, from
	// the bounding set too, and the container always runs with the
	// runtime's default seccomp profile and no-new-privileges (see
	// confine.go). None: no capability at all.
	Capabilities []string
}

// Ulimit is one rlimit, named as in ulimit(1)/Docker: "nofile", "nproc", ...
type Ulimit struct {
	Name string
	Soft int64
	Hard int64
}

// PortSpec asks for a container port to be published on the host.
type PortSpec struct {
	ContainerPort int
	// Protocol is "tcp" (default) or "udp".
	Protocol string
	// HostIP defaults to 127.0.0.1: nothing is published on all
	// interfaces unless asked for explicitly.
	HostIP string
	// HostPort 0 means an ephemeral port chosen by the backend.
	HostPort int
}

// DefaultHostIP is where ports are published when PortSpec.HostIP is empty.
const DefaultHostIP = "127.0.0.1"

// PortBinding is a published port as the backend reports it.
type PortBinding struct {
	ContainerPort int
	Protocol      string
	HostIP        string
	HostPort      int
}

// State is a container's lifecycle state, normalised across backends.
type State string

// Container states.
const (
	StateCreated State = "created"
	StateRunning State = "running"
	StatePaused  State = "paused"
	StateExited  State = "exited"
	StateUnknown State = "unknown"
)

// Mount is a filesystem mounted into a container, as the backend reports it.
type Mount struct {
	// Type is "tmpfs", "volume" or "bind".
	Type        string
	Source      string
	Destination string
}

// Container is a container as inspect or list reports it: what callers
// need without asking the backend again.
type Container struct {
	ID     string
	Name   string
	Image  string
	Labels map[string]string
	State  State
	// ExitCode is meaningful when State is StateExited.
	ExitCode int
	// OOMKilled reports that the kernel killed the container's process for
	// memory (its cgroup's limit), where the backend reports it
	// (Info.ReportsOOMKill); meaningful when State is StateExited.
	OOMKilled bool
	Created   time.Time
	// Networks maps a network name to the container's IPv4 address on it.
	Networks map[string]string
	Ports    []PortBinding
	// Mounts lists what is mounted into the container (not filled by List).
	Mounts []Mount
	// Privileged reports whether the container runs privileged.
	Privileged bool
	// AdoptedBy names the owner whose deletion makes the backend itself
	// remove this container (see Adopter); empty when none, and always
	// empty on a backend that cannot adopt.
	AdoptedBy string
}

// Running reports whether the container's state is running.
func (c Container) Running() bool { return c.State == StateRunning }

// Status is the container's state as people read it: the state, and for
// an exited container why it ended ("exited (OOM killed)", "exited (code
// 1)"), as inspect, ls, the janitor's report and doctor say it.
func (c Container) Status() string {
	if c.State != StateExited {
		return string(c.State)
	}
	if c.OOMKilled {
		return "exited (OOM killed)"
	}
	return fmt.Sprintf("exited (code %d)", c.ExitCode)
}

// ExecSpec is a process to run inside a container.
type ExecSpec struct {
	Cmd []string
	// Env is added to the container's environment for this process.
	Env map[string]string
	// User overrides the container's user ("" keeps it).
	User string
}

// ExecResult is the outcome of a finished exec.
type ExecResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
}

// NetworkSpec describes a network to create.
type NetworkSpec struct {
	Name   string
	Labels map[string]string
	// Internal makes the network one with no route out (see
	// ContainerRuntime.CreateNetwork): its containers reach only each
	// other.
	Internal bool
}

// Network is a created network.
type Network struct {
	ID   string
	Name string
	// Labels are the labels it was created with (ListNetworks fills them).
	Labels map[string]string
	// Internal is NetworkSpec.Internal as the backend reports it.
	Internal bool
	// Subnet is the network's IPv4 subnet; zero where the backend has no
	// subnet per network (Kubernetes' flat pod network).
	Subnet netip.Prefix
}

// PullProgress is one progress event of an image pull.
type PullProgress struct {
	Ref    string
	Status string // backend's words, e.g. "Downloading", "Pull complete"
	// Layer is the layer or blob the event is about ("" for the whole ref).
	Layer   string
	Current int64
	Total   int64
}

// ProgressFunc receives pull progress events. It must not block for long.
type ProgressFunc func(PullProgress)

// Reconciler is implemented by adapters that keep host state of their own
// beside the backend's containers (containerd's CNI networking: IP
// allocations, NAT and firewall rules), which a process killed half-way
// or a failed clean-up can leave behind. It is not part of the port; the
// janitor calls it on each sweep that may remove things, so that `gc`
// removes such leftovers too. It removes only state that names a
// container of the adapter's that no longer exists.
type Reconciler interface {
	Reconcile(ctx context.Context) error
}

// Diagnoser is implemented by adapters that know what their backend needs
// of the host beyond a daemon that answers: privileges, plugins, kernel
// features. It is not part of the port (the lifecycle code never needs
// it); `sandboxer doctor` reports what it finds, so that the CLI knows no
// adapter by name.
type Diagnoser interface {
	// Diagnose checks the host, quickly and without changing anything
	// that outlives the call (a probe it makes, it removes), and returns
	// what it found wrong (nothing when all is well).
	Diagnose(ctx context.Context) []Diagnostic
}

// Diagnostic is one finding of a Diagnoser: something that would make the
// adapter's verbs fail, and what to do about it.
type Diagnostic struct {
	// Check names what was checked, short and stable, for scripts
	// ("root", "cni-plugins").
	Check string
	// Problem says what is wrong and how to fix it, on one line.
	Problem string
}
