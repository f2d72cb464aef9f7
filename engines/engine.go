// Package engines is sandboxer's engine contract and registry: what an
// engine is (Engine, Spec, its credentials, its login, its image layout,
// its warm start), and the registry that is the single list of valid
// service names. It knows no concrete engine: each lives in a package of
// its own (engines/postgres, engines/redis, engines/mongo) that registers
// itself when imported, as a database/sql driver does, and links its own
// client; engines/all links every one. The provisioner, the env emitter,
// teardown, the janitor and input validation all iterate a Registry;
// nothing else spells out an engine's name.
//
// An engine is a description: the image, port and tmpfs paths it needs,
// the container env and command for a credential set, the readiness probe
// (argv run inside the sandbox through the runtime port's exec) and the env
// it hands to consumers. It never talks to a runtime itself. Besides, it
// owns the one way to log in to its server with the real Go client a
// consumer would use (WireChecker), over the wire, at the URL it emits.
package engines

import (
	"net"
	"strconv"
	"time"

	"github.com/roboco/sandboxer/runtime"
)

// DefaultUser and DefaultDatabase are the user and database every engine
// that has them is set up with.
const (
	DefaultUser     = "sandbox"
	DefaultDatabase = "sandbox"
)

// Engine is one kind of sandbox. Adding an engine is one package with a
// type implementing Engine, which it registers from its init (Register),
// plus its import in engines/all.
type Engine interface {
	// Spec is the engine's static description.
	Spec() Spec
	// Container is how the sandbox container is started for cred within
	// lim, from img: the engine places a tmpfs on every VOLUME img
	// declares and its data where img's entrypoint looks for it, and sizes
	// its memory budget (every tmpfs, the server's caches and buffers)
	// from lim, so that a full sandbox answers with the engine's own
	// "full" error instead of being killed for memory.
	Container(cred Credentials, lim Limits, img Image) Container
	// Probe is the readiness check run inside the sandbox container via
	// exec, against ep (the sandbox's own non-loopback address and its
	// container port). Every step must pass, in order.
	Probe(ep Endpoint, cred Credentials) []ProbeStep
	// Env is what consumers of the sandbox read: prefix is the env prefix
	// (e.g. "ROBOCO_TEST"), ep is the address consumers connect to.
	Env(prefix string, ep Endpoint, cred Credentials) []EnvVar
}

// Spec is an engine's static description.
type Spec struct {
	// Name is the service name users ask for ("postgres").
	Name string
	// Short is the name's form in container names ("pg" in
	// roboco-sandbox-pg-42).
	Short string
	// Order is the engine's place in the report order (sandboxes,
	// containers and env are reported in it, lowest first, whatever order
	// a caller listed its services or a program imported the engines in):
	// a positive number no other engine of a registry has.
	Order int
	// Image is the default image ref; deployments override it per engine.
	Image string
	// Port is the port the server listens on inside the container.
	Port int
	// Tmpfs lists the paths mounted as tmpfs for the default image: every
	// VOLUME of it, so that nothing reaches the host disk and no anonymous
	// volume is left, and any other directory the engine keeps data in
	// (postgres's WAL). Container derives the paths for the image it is
	// given (Image) and gives each its mount options.
	Tmpfs []string
	// ReadyTimeout is how long the probe may take to pass after start.
	ReadyTimeout time.Duration
	// MemoryBytes is the engine's own default memory limit, for a server
	// whose documented floor does not fit the provisioner's default (0:
	// the provisioner's default). A limit the caller sets wins.
	MemoryBytes int64
	// Capabilities are the only capabilities the sandbox keeps
	// (runtime.RunSpec.Capabilities): what the image's entrypoint needs
	// to hand its data to the server's user and become it (confine.go).
	Capabilities []string
}

// Container is the engine-specific part of a sandbox's run spec.
type Container struct {
	Env     map[string]string
	Command []string
	// Tmpfs holds the mount options of every tmpfs path (a bounded
	// size when the limits give a memory budget; "" is the runtime's
	// default, which is half the host's memory).
	Tmpfs map[string]string
}

// Limits are the resources a sandbox container runs with, as the run spec
// sets them.
type Limits struct {
	// MemoryBytes is the container's memory limit (0: none, and then no
	// budget: the engine's own defaults and unbounded tmpfs).
	MemoryBytes int64
}

// Share is a fraction num/den of the memory limit, in bytes, rounded down
// to whole MiB and at least minimum; 0 when there is no limit: the one
// rule every engine's budget is carved with.
func (l Limits) Share(num, den, minimum int64) int64 {
	if l.MemoryBytes <= 0 {
		return 0
	}
	b := l.MemoryBytes / den * num
	b -= b % MiB
	return max(b, minimum)
}

// MiB is a mebibyte, the unit of every budget.
const MiB = 1 << 20

// TmpfsSize is a tmpfs mount option for size bytes ("" for 0: the
// runtime's default).
func TmpfsSize(size int64) string {
	if size <= 0 {
		return ""
	}
	return "size=" + strconv.FormatInt(size, 10)
}

// Megabytes is bytes as a server setting in whole megabytes, followed by
// the server's unit ("64MB" for postgres, "64mb" for redis).
func Megabytes(bytes int64, unit string) string {
	return strconv.FormatInt(bytes/MiB, 10) + unit
}

// Credentials are what a sandbox is set up with. Every service of every
// sandbox gets its own Credentials (see NewCredentials).
type Credentials struct {
	User     string
	Password string
	Database string
}

// Endpoint is a host and port to connect to.
type Endpoint struct {
	Host string `json:"host"`
	Port int    `json:"port"`
}

// HostPort joins the host and the port, bracketing an IPv6 literal, as a
// URL's host or a dial address wants them.
func (ep Endpoint) HostPort() string {
	return net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port))
}

// ProbeStep is one command of a readiness probe.
type ProbeStep struct {
	// Cmd is the argv run inside the sandbox container. It never holds a
	// password: secrets go in Env, so they stay out of process lists and
	// error messages.
	Cmd []string
	// Env is added to the exec's environment.
	Env map[string]string
	// Check judges the finished exec: nil means this step passed.
	Check func(runtime.ExecResult) error
}

// EnvVar is one variable a sandbox emits.
type EnvVar struct {
	Name  string
	Value string
	// Secret marks values that hold a password (the password itself, and
	// URLs that embed it), for masking in anything meant for humans.
	Secret bool
}
