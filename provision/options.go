package provision

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/runtime"
)

// Defaults. The default label prefix is labels.DefaultPrefix.
const (
	DefaultEnvPrefix     = "ROBOCO_TEST"
	DefaultOwnerTemplate = "{prefix}-agent-{id}"
	DefaultMemoryBytes   = 512 << 20
	DefaultCPUs          = 1.0
	DefaultPullTimeout   = 300 * time.Second
	// DefaultPreClearGrace is how young a same-named sandbox of the owner
	// must be to count as another provision's work in flight, which the
	// pre-clear never removes. It matches the janitor's grace window.
	DefaultPreClearGrace = 180 * time.Second
)

// ImageEnvPrefix + the upper-cased engine name is the env variable that
// overrides an engine's image (SANDBOXER_IMAGE_POSTGRES).
const ImageEnvPrefix = "SANDBOXER_IMAGE_"

// Options configure a Provisioner. The zero value is the default: host mode,
// 512 MiB and 1 CPU per sandbox, label prefix labels.DefaultPrefix, env
// prefix ROBOCO_TEST. The rule for every duration and amount, as in
// janitor.Options: zero means the default, a negative value is invalid,
// and "none" is said explicitly (NoPreClearGrace), never by a zero or a
// negative value.
type Options struct {
	// Registry is the set of engines (default engines.Default).
	Registry *engines.Registry

	// Network selects sibling mode: the sandboxes join this network and
	// the env hands out their address on it with the container port.
	// Empty selects host mode: each sandbox's port is published on
	// 127.0.0.1 with an ephemeral host port, and the env hands that out.
	Network string
	// Private selects private network mode: the owner's network
	// (OwnerNetworkName) is created internal (no route out), the
	// sandboxes join it, nothing is published, and the env hands out
	// their addresses on it; the caller attaches its agent to the network
	// that Sandbox.Network names. Without Private and Network (host mode)
	// the owner's network is a plain one and the ports are published.
	// Private and Network exclude each other.
	Private bool

	// MemoryBytes is each sandbox's memory limit (default: the engine's
	// own, engines.Spec.MemoryBytes, else 512 MiB).
	MemoryBytes int64
	// CPUs is each sandbox's CPU quota in cores (default 1).
	CPUs float64

	// Images overrides engines' images, by engine name. An engine without
	// an entry here takes SANDBOXER_IMAGE_<ENGINE> from the environment,
	// then its default image.
	Images map[string]string
	// Getenv reads the environment for image overrides (default
	// os.Getenv); tests replace it to stay hermetic.
	Getenv func(string) string

	// LabelPrefix prefixes container names and label keys (default
	// labels.DefaultPrefix: roboco-sandbox-pg-42, roboco.sandbox.owner).
	LabelPrefix string
	// EnvPrefix prefixes the emitted env (default "ROBOCO_TEST").
	EnvPrefix string
	// OwnerTemplate names the owner container from the owner id; "{prefix}"
	// and "{id}" are replaced (default "{prefix}-agent-{id}").
	OwnerTemplate string
	// Labels are extra labels on every sandbox (for example the identity
	// of an owning process). They may not replace the provisioner's own.
	Labels map[string]string
	// Args are extra server arguments, by engine name, appended to the
	// engine's container command (redis: "--databases", "1024"; postgres:
	// "-c", "max_connections=300"): how a caller tunes one server setting
	// without an engine of its own. They are argv, visible to anyone who
	// can inspect the container: never a secret.
	Args map[string][]string

	// PullTimeout bounds each image pull (default 300 s).
	PullTimeout time.Duration
	// ReadyTimeout, when set, replaces every engine's own ready timeout.
	ReadyTimeout time.Duration
	// Readiness is how sandboxes are judged ready (default ReadinessAuto:
	// the engine's real client over the wire wherever this process can
	// reach the consumer's endpoint, the engine's exec probe elsewhere).
	Readiness Readiness
	// Warm is whether engines that can (engines.Warmer: postgres) start
	// from a template of their initialised data, built once per base image
	// on first use and kept in the runtime's image store (default
	// WarmAuto). Whenever a warm start is not to be had (the template
	// cannot be built, or a sandbox started from it fails), the sandbox
	// starts cold under the same name, and an EventWarmFallback says why.
	// WarmOff never looks for a template.
	Warm Warm
	// PreClearGrace: a same-named sandbox of the owner younger than this
	// is left alone and the provision fails with a conflict (default
	// DefaultPreClearGrace).
	PreClearGrace time.Duration
	// NoPreClearGrace always clears a same-named sandbox of the owner,
	// however young (its own earlier provision, known to be over).
	// PreClearGrace must then be zero.
	NoPreClearGrace bool
	// CallTimeout bounds each quick runtime call (default
	// runtime.DefaultCallTimeout): a provision's owner list and snapshot,
	// image checks and image IDs, and each list, kill and remove of
	// teardown, rollback and pre-clear, the clean-up ones even after the
	// caller's context has ended. A runtime that hangs on one container
	// never holds a teardown longer than about three times this. The
	// slow calls have bounds of their own: a pull PullTimeout, a Run a
	// minute (plus PullTimeout where Run pulls), readiness ReadyTimeout,
	// a template build five minutes.
	CallTimeout time.Duration

	// Logger receives one line per lifecycle event (nil: no logging).
	// Passwords are never logged.
	Logger *slog.Logger
	// OnEvent receives every lifecycle event, including pull progress. It
	// is called from several goroutines at once and must not block.
	OnEvent func(Event)
	// Now is the clock the pre-clear grace is measured with (default
	// time.Now); it must agree with the runtime's creation times.
	Now func() time.Time
}

var envPrefixRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,40}$`)

// Validate reports the first invalid option as an error that matches
// ErrInvalid (and labels.ErrInvalidPrefix for a bad label prefix). It
// checks the options as New would use them, without talking to any
// runtime.
func (o Options) Validate() error {
	o = o.withDefaults()
	if err := labels.ValidatePrefix(o.LabelPrefix); err != nil {
		return &ValidationError{Field: "label prefix", Value: o.LabelPrefix, Reason: labels.PrefixRule, Err: err}
	}
	if err := runtime.ValidateCPUs(o.CPUs); err != nil {
		return &ValidationError{Field: "cpus", Value: fmt.Sprint(o.CPUs), Reason: fmt.Sprintf("must be a positive number of cores, at most %d", runtime.MaxCPUs), Err: err}
	}
	switch {
	case o.Private && o.Network != "":
		return invalid("network", o.Network, "given with private network mode: the sandboxes join either the owner's private network or the caller's")
	case o.MemoryBytes < 0:
		return invalid("memory", fmt.Sprint(o.MemoryBytes), "must be positive")
	case o.PullTimeout < 0:
		return invalid("pull timeout", o.PullTimeout.String(), "must be positive")
	case o.CallTimeout < 0:
		return invalid("call timeout", o.CallTimeout.String(), "must be positive")
	case o.ReadyTimeout < 0:
		return invalid("ready timeout", o.ReadyTimeout.String(), "must be positive")
	case o.Readiness != ReadinessAuto && o.Readiness != ReadinessWire && o.Readiness != ReadinessExec:
		return invalid("readiness", string(o.Readiness), "want auto, wire or exec")
	case o.Warm != WarmAuto && o.Warm != WarmOff:
		return invalid("warm", string(o.Warm), "want auto or off")
	case o.PreClearGrace < 0:
		return invalid("pre-clear grace", o.PreClearGrace.String(), "must not be negative (NoPreClearGrace: always clear)")
	case o.NoPreClearGrace && o.PreClearGrace != 0:
		return invalid("pre-clear grace", o.PreClearGrace.String(), "given with NoPreClearGrace: say one or the other")
	case !envPrefixRE.MatchString(o.EnvPrefix):
		return invalid("env prefix", o.EnvPrefix, "must be upper-case letters, digits and '_', starting with a letter")
	case !strings.Contains(o.OwnerTemplate, "{id}"):
		return invalid("owner template", o.OwnerTemplate, "must contain {id}")
	}
	for name := range o.Images {
		if _, ok := o.Registry.Lookup(name); !ok {
			return invalid("image override", name, "unknown service; valid services: "+strings.Join(o.Registry.Names(), ", "))
		}
	}
	for name := range o.Args {
		if _, ok := o.Registry.Lookup(name); !ok {
			return invalid("server arguments", name, "unknown service; valid services: "+strings.Join(o.Registry.Names(), ", "))
		}
	}
	keys := labels.For(o.LabelPrefix)
	for k := range o.Labels {
		if keys.Reserved(k) {
			return invalid("label", k, "is set by the provisioner")
		}
	}
	return nil
}

// withDefaults fills the zero fields; PreClearGrace stays zero under
// NoPreClearGrace.
func (o Options) withDefaults() Options {
	if o.Registry == nil {
		o.Registry = engines.Default
	}
	if o.CPUs == 0 {
		o.CPUs = DefaultCPUs
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.LabelPrefix == "" {
		o.LabelPrefix = labels.DefaultPrefix
	}
	if o.EnvPrefix == "" {
		o.EnvPrefix = DefaultEnvPrefix
	}
	if o.OwnerTemplate == "" {
		o.OwnerTemplate = DefaultOwnerTemplate
	}
	if o.PullTimeout == 0 {
		o.PullTimeout = DefaultPullTimeout
	}
	if o.Readiness == "" {
		o.Readiness = ReadinessAuto
	}
	if o.Warm == "" {
		o.Warm = WarmAuto
	}
	if o.PreClearGrace == 0 && !o.NoPreClearGrace {
		o.PreClearGrace = DefaultPreClearGrace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = runtime.DefaultCallTimeout
	}
	return o
}

// image is the ref to run for e: an explicit override, else
// SANDBOXER_IMAGE_<ENGINE>, else the engine's default.
func (o Options) image(spec engines.Spec) string {
	if ref := o.Images[spec.Name]; ref != "" {
		return ref
	}
	if ref := o.Getenv(ImageEnvName(spec.Name)); ref != "" {
		return ref
	}
	return spec.Image
}

// Memory is the memory limit a sandbox of spec's engine runs with under
// these options: MemoryBytes, else the engine's own default
// (engines.Spec.MemoryBytes: 1 GiB for mongo), else DefaultMemoryBytes.
func (o Options) Memory(spec engines.Spec) int64 {
	return cmp.Or(o.MemoryBytes, spec.MemoryBytes, DefaultMemoryBytes)
}

// ImageEnvName is the env variable that overrides engine's image:
// SANDBOXER_IMAGE_ + the name upper-cased, '-' as '_'.
func ImageEnvName(engine string) string {
	return ImageEnvPrefix + strings.ToUpper(strings.ReplaceAll(engine, "-", "_"))
}

// OwnerName is the owner container's name for owner id under these
// options: the owner template (default DefaultOwnerTemplate) with the label
// prefix (default labels.DefaultPrefix) and id filled in.
func (o Options) OwnerName(id string) string {
	o = o.withDefaults()
	return strings.NewReplacer("{prefix}", o.LabelPrefix, "{id}", id).Replace(o.OwnerTemplate)
}

// ContainerName is a sandbox's container name: <prefix>-sandbox-<short>-<id>.
func ContainerName(prefix, short, id string) string {
	return prefix + "-sandbox-" + short + "-" + id
}
