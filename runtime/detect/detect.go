// Package detect chooses the container runtime sandboxer talks to: the one
// named explicitly (a flag or SANDBOXER_RUNTIME), or the first that answers
// in a fixed auto-detection order. Every candidate is pinged before it is
// chosen, and the Selection says why the chosen one won and what became of
// the others, for error messages and `sandboxer doctor`.
//
// DetectAll connects to every candidate that is present instead of the
// first that answers, and says which present ones did not answer: commands
// that look for what an earlier command created (down, ls, gc) use it, so
// that they never report success having looked at a different runtime than
// the one that holds the sandboxes.
//
// It imports no adapter: each adapter registers itself from its init
// (Register, as a database/sql driver does), so a program links exactly the
// adapters it imports (runtime/all links every one; the CLI does). What
// detection knows of every runtime is where it is found (the endpoints
// below), so that a runtime found whose adapter is not linked is reported
// (StatusNotLinked, ErrNotLinked) with the import to add, instead of being
// silently passed over.
//
// Auto-detection order; a runtime whose endpoint is configured (DOCKER_HOST,
// CONTAINER_HOST, CONTAINERD_ADDRESS, or the matching option) is only tried
// there, as its own CLI would:
//
//  1. docker at DOCKER_HOST
//  2. podman at CONTAINER_HOST
//  3. podman's rootful socket, /run/podman/podman.sock
//  4. podman's rootless socket, $XDG_RUNTIME_DIR/podman/podman.sock
//  5. docker's socket, /var/run/docker.sock
//  6. docker's rootless socket, $XDG_RUNTIME_DIR/docker.sock
//  7. containerd at CONTAINERD_ADDRESS, else /run/containerd/containerd.sock
//
// Kubernetes (the kubeconfig of KUBECONFIG, else ~/.kube/config, else a
// pod's in-cluster config; the namespace of SANDBOXER_K8S_NAMESPACE) is
// only tried when asked for explicitly (ExplicitOnly): a cluster that a
// kubeconfig names is no runtime of this host, and auto-detection never
// picks it over one.
//
// A well-known socket that does not exist is reported absent and not pinged,
// and one that exists but that this process may not connect to (no write
// permission: the root-only containerd socket on a Docker host, for a user
// of the docker group) is reported "no access" and not pinged: nothing this
// user could have started is there. A configured endpoint is always pinged.
// An explicit runtime keeps only its own candidates, in the same order.
// Both kinds of skipped candidate are "not present"; every other candidate
// is present.
package detect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/roboco/sandboxer/runtime"
)

// The runtimes' names, as their adapters call themselves (Runtime.Name).
const (
	Docker     = "docker"
	Podman     = "podman"
	Containerd = "containerd"
	Kubernetes = "kubernetes"
)

// Auto asks for auto-detection.
const Auto = "auto"

// Environment variables read when the matching option is empty.
const (
	// EnvRuntime names the runtime explicitly: auto or one of Choosable
	// (docker, podman, containerd, kubernetes).
	EnvRuntime = "SANDBOXER_RUNTIME"
	// EnvDockerHost is Docker's endpoint convention.
	EnvDockerHost = "DOCKER_HOST"
	// EnvContainerHost is Podman's endpoint convention.
	EnvContainerHost = "CONTAINER_HOST"
	// EnvContainerdAddress and EnvContainerdNamespace are containerd's.
	EnvContainerdAddress   = "CONTAINERD_ADDRESS"
	EnvContainerdNamespace = "CONTAINERD_NAMESPACE"
	// EnvKubernetesNamespace is the kubernetes runtime's namespace.
	EnvKubernetesNamespace = "SANDBOXER_K8S_NAMESPACE"
)

// Well-known sockets.
const (
	// RootfulPodmanSocket is where a rootful Podman service listens.
	RootfulPodmanSocket = "/run/podman/podman.sock"
	// DockerSocket is where dockerd listens by default.
	DockerSocket = "/var/run/docker.sock"
	// ContainerdSocket is where containerd listens by default.
	ContainerdSocket = "/run/containerd/containerd.sock"
)

// DefaultPingTimeout bounds each candidate's first answer.
const DefaultPingTimeout = 3 * time.Second

// AnsweredGrace is how much longer than the ping timeout a candidate's
// Version may take in all: once the adapter's first contact (bounded by
// the ping timeout) has answered, the rest of what it asks (Podman's
// /info, Docker's version after the negotiation) is slow on a loaded
// host, not absent.
const AnsweredGrace = 30 * time.Second

// Runtimes are the names auto-detection tries, which an explicit choice
// may use too, in no particular order of preference.
var Runtimes = []string{Docker, Podman, Containerd}

// ExplicitOnly are the runtimes that only an explicit choice (--runtime,
// SANDBOXER_RUNTIME) reaches: auto-detection never tries them.
var ExplicitOnly = []string{Kubernetes}

// Choosable are the names an explicit choice may use: Runtimes, then
// ExplicitOnly.
func Choosable() []string { return slices.Concat(Runtimes, ExplicitOnly) }

// EnvKubeconfig is the kubeconfig of the kubernetes runtime, as kubectl
// reads it.
const EnvKubeconfig = "KUBECONFIG"

// ErrUnknownRuntime: the runtime named explicitly is none of Choosable
// (and not Auto). It is an input error.
var ErrUnknownRuntime = errors.New("unknown runtime")

// UnavailableError is Detect's error when no candidate answered. It matches
// runtime.ErrUnavailable, and ErrNotLinked too when a candidate was found
// whose adapter is not linked; its message is Selection.Reason, one line.
type UnavailableError struct {
	Reason string
	// NotLinked are the runtimes found whose adapter is not linked, in
	// candidate order, once each.
	NotLinked []string
}

func (e *UnavailableError) Error() string { return e.Reason }

// Is makes an UnavailableError match runtime.ErrUnavailable, and
// ErrNotLinked when NotLinked is not empty.
func (e *UnavailableError) Is(target error) bool {
	return target == runtime.ErrUnavailable || (target == ErrNotLinked && len(e.NotLinked) > 0)
}

// unavailable is the UnavailableError of probes with reason.
func unavailable(reason string, probes []Probe) *UnavailableError {
	e := &UnavailableError{Reason: reason}
	for _, p := range probes {
		if p.Status == StatusNotLinked && !slices.Contains(e.NotLinked, p.Runtime) {
			e.NotLinked = append(e.NotLinked, p.Runtime)
		}
	}
	return e
}

// Candidate is one runtime endpoint detection may choose.
type Candidate struct {
	// Runtime is the adapter's name: "docker", "podman", "containerd" or
	// "kubernetes".
	Runtime string
	// Endpoint is the address, as the adapter takes it
	// ("unix:///var/run/docker.sock", "tcp://...", a socket path for
	// containerd, the kubeconfig's path for kubernetes: "" for the
	// default one or the in-cluster config). It may carry credentials (ssh://user:secret@host):
	// messages, logs and doctor show it as Shown does.
	Endpoint string
	// Namespace is the containerd or Kubernetes namespace ("" : the
	// adapter's default).
	Namespace string
	// Source says why it is a candidate: "DOCKER_HOST", "--docker-host",
	// "rootful Podman socket", ...
	Source string
	// Socket is a local socket to look for before pinging; "" for a
	// configured endpoint, which is always pinged.
	Socket string
}

// Shown is Endpoint with its credentials redacted (runtime.ShowEndpoint),
// the form every message, log line and report of this package uses.
func (c Candidate) Shown() string { return runtime.ShowEndpoint(c.Endpoint) }

// String renders "docker at unix:///var/run/docker.sock (DOCKER_HOST)",
// credentials redacted.
func (c Candidate) String() string {
	s := c.Runtime + " at " + c.Shown()
	if c.Namespace != "" {
		s += " namespace " + c.Namespace
	}
	return s + " (" + c.Source + ")"
}

// Status is what became of a candidate.
type Status string

// Statuses.
const (
	// StatusAnswered: the ping succeeded.
	StatusAnswered Status = "answered"
	// StatusFailed: the ping (or connecting) failed; Probe.Err says why.
	StatusFailed Status = "failed"
	// StatusAbsent: its well-known socket does not exist; not pinged.
	StatusAbsent Status = "absent"
	// StatusNoAccess: its well-known socket exists but this process may
	// not connect to it; not pinged.
	StatusNoAccess Status = "no access"
	// StatusNotTried: an earlier candidate answered first; not pinged.
	StatusNotTried Status = "not tried"
	// StatusNotLinked: the candidate is present but this program does not
	// link its runtime's adapter; not pinged. Probe.Err matches
	// ErrNotLinked and names the import to add.
	StatusNotLinked Status = "not linked"
)

// Probe is one candidate and its outcome.
type Probe struct {
	Candidate
	Status Status
	// Info is what the runtime reported (StatusAnswered).
	Info runtime.Info
	// Err is why it failed (StatusFailed).
	Err error
	// Elapsed is how long the ping took.
	Elapsed time.Duration
}

// Describe renders the outcome on one line, for messages and doctor.
func (p Probe) Describe() string {
	switch p.Status {
	case StatusAnswered:
		v := p.Info.Runtime + " " + p.Info.Version
		if p.Info.APIVersion != "" {
			v += ", API " + p.Info.APIVersion
		}
		if p.Info.CgroupVersion != "" {
			v += ", cgroup v" + p.Info.CgroupVersion
		}
		if p.Info.Rootless {
			v += ", rootless"
		}
		return "answered: " + v
	case StatusFailed:
		return "failed: " + oneLine(p.Err)
	case StatusAbsent:
		return "absent: no socket at " + p.Socket
	case StatusNoAccess:
		return "no access: this user may not connect to " + p.Socket
	case StatusNotLinked:
		return "not linked: " + oneLine(p.Err)
	default:
		return string(p.Status)
	}
}

// Options steer detection. The zero value auto-detects from the process
// environment and the well-known sockets, with the real adapters.
type Options struct {
	// Runtime is Auto, "" (read SANDBOXER_RUNTIME, then Auto) or one of
	// Choosable: docker, podman, containerd (which auto-detection tries
	// too) or kubernetes (ExplicitOnly).
	Runtime string
	// DockerHost, ContainerHost, ContainerdAddress and ContainerdNamespace
	// are endpoints given explicitly (the CLI's flags); empty ones are read
	// from DOCKER_HOST, CONTAINER_HOST, CONTAINERD_ADDRESS and
	// CONTAINERD_NAMESPACE.
	DockerHost          string
	ContainerHost       string
	ContainerdAddress   string
	ContainerdNamespace string

	// All pings every candidate, even after one answered (for doctor). The
	// first that answered is still the one chosen.
	All bool
	// PingTimeout bounds each candidate's first answer (default
	// DefaultPingTimeout): it is the default Connect's adapters' own
	// bound on their first contact (their WithPingTimeout), and the
	// candidate's whole Version has AnsweredGrace more.
	PingTimeout time.Duration
	// Logger receives one debug line per candidate (default: none) and is
	// handed to the adapters.
	Logger *slog.Logger

	// UnenforcedLimits lets the chosen runtime run containers whose
	// memory, CPU or pids limits it cannot enforce (rootless Podman on
	// cgroup v1), with a warning, instead of refusing them as
	// runtime.ErrUnsupported: podman.WithUnenforcedLimits. An explicit
	// opt-out, read by the default Connect only; the other adapters
	// enforce limits or refuse them whatever it says.
	UnenforcedLimits bool

	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
	// SocketExists reports whether a unix socket exists at path (default:
	// os.Stat says it is a socket).
	SocketExists func(path string) bool
	// SocketUsable reports whether this process may connect to the
	// existing unix socket at path (default: it may write to it, as
	// faccessat(2) with the effective ids says).
	SocketUsable func(path string) bool
	// Connect makes the runtime for a candidate (default: the driver its
	// adapter registered; a candidate whose adapter is not linked is then
	// StatusNotLinked). It must not contact the runtime; Detect pings it.
	// When it is set, every runtime counts as linked.
	Connect func(Candidate, *slog.Logger) (runtime.ContainerRuntime, error)

	// linked reports whether a runtime's adapter is linked (set by
	// withDefaults).
	linked func(name string) bool
}

func (o Options) withDefaults() Options {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.SocketExists == nil {
		o.SocketExists = socketExists
	}
	if o.SocketUsable == nil {
		o.SocketUsable = socketUsable
	}
	if o.linked == nil {
		o.linked = func(name string) bool { return driver(name) != nil }
		if o.Connect != nil {
			o.linked = func(string) bool { return true }
		}
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = DefaultPingTimeout
	}
	if o.Connect == nil {
		co := ConnectOptions{UnenforcedLimits: o.UnenforcedLimits, PingTimeout: o.PingTimeout}
		o.Connect = func(c Candidate, logger *slog.Logger) (runtime.ContainerRuntime, error) {
			co := co
			co.Logger = logger
			return connect(c, co)
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Choice resolves the runtime name asked for (option, then SANDBOXER_RUNTIME,
// then Auto) and where that came from ("--runtime", "SANDBOXER_RUNTIME" or
// "default"). A name that is not Auto or one of Choosable is an error
// matching ErrUnknownRuntime.
func Choice(opts Options) (name, source string, err error) {
	opts = opts.withDefaults()
	name, source = opts.Runtime, "--runtime"
	if name == "" {
		name, source = opts.Getenv(EnvRuntime), EnvRuntime
	}
	if name == "" {
		name, source = Auto, "default"
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if name != Auto && !slices.Contains(Choosable(), name) {
		return "", source, fmt.Errorf("detect: %s %q: %w (want %s or %s)", source, name, ErrUnknownRuntime, Auto, strings.Join(Choosable(), ", "))
	}
	return name, source, nil
}

// Candidates lists, in order, the endpoints detection would try. It does not
// look at sockets or contact anything.
func Candidates(opts Options) ([]Candidate, error) {
	opts = opts.withDefaults()
	name, _, err := Choice(opts)
	if err != nil {
		return nil, err
	}
	env := func(value, flag, key string) (string, string) {
		if value != "" {
			return value, flag
		}
		return opts.Getenv(key), key
	}
	dockerHost, dockerSrc := env(opts.DockerHost, "--docker-host", EnvDockerHost)
	podmanHost, podmanSrc := env(opts.ContainerHost, "--container-host", EnvContainerHost)
	ctrdAddr, ctrdSrc := env(opts.ContainerdAddress, "--containerd-address", EnvContainerdAddress)
	ctrdNS, _ := env(opts.ContainerdNamespace, "", EnvContainerdNamespace)
	runDir := opts.Getenv("XDG_RUNTIME_DIR")
	if runDir == "" {
		runDir = fmt.Sprintf("/run/user/%d", os.Geteuid())
	}

	var all []Candidate
	add := func(c Candidate) { all = append(all, c) }
	if dockerHost != "" {
		add(Candidate{Runtime: Docker, Endpoint: dockerHost, Source: dockerSrc})
	}
	if podmanHost != "" {
		add(Candidate{Runtime: Podman, Endpoint: podmanHost, Source: podmanSrc})
	} else {
		rootless := filepath.Join(runDir, "podman", "podman.sock")
		add(Candidate{Runtime: Podman, Endpoint: "unix://" + RootfulPodmanSocket, Source: "rootful Podman socket", Socket: RootfulPodmanSocket})
		add(Candidate{Runtime: Podman, Endpoint: "unix://" + rootless, Source: "rootless Podman socket", Socket: rootless})
	}
	if dockerHost == "" {
		rootless := filepath.Join(runDir, "docker.sock")
		add(Candidate{Runtime: Docker, Endpoint: "unix://" + DockerSocket, Source: "Docker socket", Socket: DockerSocket})
		add(Candidate{Runtime: Docker, Endpoint: "unix://" + rootless, Source: "rootless Docker socket", Socket: rootless})
	}
	if ctrdAddr != "" {
		add(Candidate{Runtime: Containerd, Endpoint: ctrdAddr, Namespace: ctrdNS, Source: ctrdSrc})
	} else {
		add(Candidate{Runtime: Containerd, Endpoint: ContainerdSocket, Namespace: ctrdNS, Source: "containerd socket", Socket: ContainerdSocket})
	}

	if name == Kubernetes {
		c := Candidate{Runtime: Kubernetes, Endpoint: opts.Getenv(EnvKubeconfig), Namespace: opts.Getenv(EnvKubernetesNamespace), Source: EnvKubeconfig}
		if c.Endpoint == "" {
			c.Source = "~/.kube/config or the in-cluster config"
		}
		add(c)
	}

	out := all[:0:0]
	seen := map[string]bool{}
	for _, c := range all {
		key := c.Runtime + " " + c.Endpoint
		if (name != Auto && c.Runtime != name) || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, c)
	}
	return out, nil
}

// Selection is the outcome of Detect.
type Selection struct {
	// Runtime is the chosen runtime, connected (nil when none answered).
	// The caller closes it.
	Runtime runtime.ContainerRuntime
	// Chosen is its probe (zero when none answered).
	Chosen Probe
	// Probes are every candidate, in order, with its outcome.
	Probes []Probe
	// Asked is the runtime name asked for (Auto or one of Choosable) and
	// AskedBy where that came from ("--runtime", "SANDBOXER_RUNTIME",
	// "default").
	Asked, AskedBy string
	// Reason says why the chosen runtime won, or why none did.
	Reason string
}

// prepare fills opts' defaults and returns the runtime asked for, where
// that came from, and the candidates to try, in order.
func prepare(opts Options) (o Options, asked, askedBy string, cands []Candidate, err error) {
	opts = opts.withDefaults()
	if asked, askedBy, err = Choice(opts); err != nil {
		return opts, "", "", nil, err
	}
	cands, err = Candidates(opts)
	return opts, asked, askedBy, cands, err
}

// Detect pings the candidates in order and chooses the first that answers.
// When none answers, the error matches runtime.ErrUnavailable and says, on
// one line, what became of each candidate; the Selection still lists them.
// An unknown runtime name is an error matching ErrUnknownRuntime.
func Detect(ctx context.Context, opts Options) (*Selection, error) {
	opts, asked, askedBy, cands, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	sel := &Selection{Asked: asked, AskedBy: askedBy}
	for _, c := range cands {
		p := Probe{Candidate: c}
		switch {
		case sel.Runtime != nil && !opts.All:
			p.Status = StatusNotTried
		case !opts.present(&p):
			// absent, or no access: not pinged
		default:
			rt := ping(ctx, opts, &p)
			if rt != nil && sel.Runtime == nil {
				sel.Runtime, sel.Chosen = rt, p
			} else if rt != nil {
				rt.Close()
			}
		}
		opts.Logger.Debug("runtime candidate", "runtime", c.Runtime, "endpoint", c.Shown(), "source", c.Source, "status", string(p.Status), "detail", p.Describe())
		sel.Probes = append(sel.Probes, p)
	}
	sel.Reason = sel.reason()
	if sel.Runtime == nil {
		return sel, unavailable(sel.Reason, sel.Probes)
	}
	return sel, nil
}

// present reports whether p's candidate is present; when it is not, it
// sets p.Status to say why (absent, no access).
func (o Options) present(p *Probe) bool {
	switch {
	case p.Socket == "":
		return o.linkedProbe(p)
	case !o.SocketExists(p.Socket):
		p.Status = StatusAbsent
	case !o.SocketUsable(p.Socket):
		p.Status = StatusNoAccess
	default:
		return o.linkedProbe(p)
	}
	return false
}

// linkedProbe reports whether the adapter of p's present candidate is
// linked; when it is not, it sets p to StatusNotLinked.
func (o Options) linkedProbe(p *Probe) bool {
	if o.linked(p.Runtime) {
		return true
	}
	p.Status, p.Err = StatusNotLinked, notLinkedError(p.Runtime)
	return false
}

// ping connects to and pings one candidate, filling p. It returns the
// runtime when it answered.
func ping(ctx context.Context, opts Options, p *Probe) runtime.ContainerRuntime {
	start := time.Now()
	defer func() { p.Elapsed = time.Since(start) }()
	// The adapters redact their errors already; an adapter given by
	// Options.Connect may not.
	rt, err := opts.Connect(p.Candidate, opts.Logger)
	if err != nil {
		p.Status, p.Err = StatusFailed, runtime.RedactEndpointError(p.Endpoint, err)
		return nil
	}
	// The adapter bounds its first contact by PingTimeout itself (the
	// default Connect passes it); what a service that answered says of
	// itself may take longer on a loaded host (rootless Podman's /info
	// takes seconds), which must not read as "did not answer".
	pctx, cancel := context.WithTimeout(ctx, opts.PingTimeout+AnsweredGrace)
	defer cancel()
	info, err := rt.Version(pctx)
	if err != nil {
		rt.Close()
		p.Status, p.Err = StatusFailed, runtime.RedactEndpointError(p.Endpoint, err)
		return nil
	}
	p.Status, p.Info = StatusAnswered, info
	return rt
}

// reason explains the outcome in one line.
func (s *Selection) reason() string {
	var before []string
	for _, p := range s.Probes {
		if s.Runtime != nil && p.Candidate == s.Chosen.Candidate {
			break
		}
		if line := p.skipped(); line != "" {
			before = append(before, line)
		}
	}
	if s.Runtime == nil {
		what := "no container runtime answered"
		if s.Asked != Auto {
			what = fmt.Sprintf("%s (asked for by %s) did not answer", s.Asked, s.AskedBy)
		}
		if len(before) == 0 {
			return what + ": no candidate"
		}
		return what + ": " + strings.Join(before, "; ")
	}
	c := s.Chosen
	var why string
	if s.Asked != Auto {
		why = fmt.Sprintf("%s asked for by %s; %s answered there", s.Asked, s.AskedBy, c.Shown())
	} else {
		why = fmt.Sprintf("first to answer in the auto-detection order: %s", c.Candidate)
	}
	why += " (" + c.Info.Runtime + " " + c.Info.Version + ")"
	if len(before) > 0 {
		why += "; before it: " + strings.Join(before, "; ")
	}
	return why
}

// skipped says, for reason lines, why p was not chosen ("" when it
// answered or was not tried).
func (p Probe) skipped() string {
	switch p.Status {
	case StatusAbsent:
		return fmt.Sprintf("%s absent (%s)", p.Source, p.Socket)
	case StatusNoAccess:
		return fmt.Sprintf("%s no access (%s)", p.Source, p.Socket)
	case StatusFailed:
		return fmt.Sprintf("%s %s failed: %s", p.Source, p.Shown(), oneLine(p.Err))
	case StatusNotLinked:
		return fmt.Sprintf("%s %s found, but %s", p.Source, p.Shown(), oneLine(p.Err))
	}
	return ""
}

func socketExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&fs.ModeSocket != 0
}

// socketUsable: connect(2) on a unix socket needs write permission on it.
func socketUsable(path string) bool {
	return unix.Faccessat(unix.AT_FDCWD, path, unix.W_OK, unix.AT_EACCESS) == nil
}

func oneLine(err error) string {
	if err == nil {
		return ""
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
