package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
)

// Stdio are the streams a command reads and writes. Env output goes to Out;
// logs, progress and errors to Err.
type Stdio struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// app is one invocation: the streams, the environment, the global flags
// and what is derived from them.
type app struct {
	io     Stdio
	getenv func(string) string
	sigs   *signalRouter
	ctx    context.Context

	// global flags
	runtimeName         string
	dockerHost          string
	containerHost       string
	containerdAddress   string
	containerdNamespace string
	images              []string
	labelPrefix         string
	envPrefix           string
	memory              string
	cpus                float64
	unenforcedLimits    bool
	pingTimeout         time.Duration
	quiet               bool
	verbose             bool
	logFormat           string

	// derived in prepare
	console     *console
	log         *slog.Logger
	memoryBytes int64
	// readinessFlag is --readiness as given; readiness is what prepare
	// made of it (or of SANDBOXER_READINESS).
	readinessFlag string
	readiness     provision.Readiness
	// warmFlag is --warm as given; warm is what prepare made of it (or of
	// SANDBOXER_WARM).
	warmFlag string
	warm     provision.Warm
	imageMap map[string]string
	registry *engines.Registry

	// detectHook, when set, adjusts the runtime detection options: tests
	// give the fake sockets and runtimes there.
	detectHook func(*detect.Options)
}

// Main runs the CLI with args (without the program name) and returns the
// exit code. sigs routes the caught signals (main wires the real ones;
// tests may pass a router nothing delivers to).
func Main(ctx context.Context, args []string, stdio Stdio, getenv func(string) string, sigs *signalRouter) int {
	a := &app{io: stdio, getenv: getenv, sigs: sigs, registry: engines.Default}
	return a.main(ctx, args)
}

// main runs the command args asks for and returns the exit code.
func (a *app) main(ctx context.Context, args []string) int {
	if a.sigs == nil {
		a.sigs = newSignalRouter()
	}
	stdio, sigs := a.io, a.sigs
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs.attach(cancel)
	a.ctx = ctx
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	err := root.ExecuteContext(ctx)
	sig := sigs.signal()
	code := exitCode(err, sig)
	if err != nil && !a.started(root) && sig == nil {
		// cobra's own errors (unknown command, wrong arguments) come
		// before any command body ran.
		code = ExitUsage
	}
	if err == nil {
		return code
	}
	var ee *exitError
	if errors.As(err, &ee) && ee.err == nil {
		return code
	}
	msg := oneLine(err.Error())
	if sig != nil {
		msg = fmt.Sprintf("interrupted by %s (%s)", signalName(sig), msg)
	}
	if code == ExitUsage && !a.started(root) {
		msg += fmt.Sprintf(" (see %s --help)", commandPath(root, args))
	}
	msg += limitsHint(err, a.unenforcedLimits)
	fmt.Fprintln(stdio.Err, "sandboxer: "+msg)
	return code
}

// limitsHint is what the CLI adds to an error that refused limits it
// cannot enforce: the adapter's advice names its Go option, this names the
// CLI's. Other unsupported requests (a runtime without an image store, say)
// get no hint: the opt-out would not change them.
func limitsHint(err error, optedOut bool) string {
	if optedOut || !errors.Is(err, runtime.ErrUnenforceableLimits) {
		return ""
	}
	return fmt.Sprintf(" (the CLI's opt-out: --unenforced-limits or %s=1; `sandboxer doctor` says what else would do)", envUnenforcedLimits)
}

// started reports whether a command's RunE began (errors before it are
// flag or argument errors).
func (a *app) started(*cobra.Command) bool { return a.log != nil }

// commandPath names the subcommand args asked for, for "see ... --help".
func commandPath(root *cobra.Command, args []string) string {
	c, _, err := root.Find(args)
	if err != nil || c == nil {
		return root.Name()
	}
	return c.CommandPath()
}

// envReadiness sets --readiness when the flag is not given.
const envReadiness = "SANDBOXER_READINESS"

// envPingTimeout sets --ping-timeout when the flag is not given.
const envPingTimeout = "SANDBOXER_PING_TIMEOUT"

// envUnenforcedLimits sets --unenforced-limits when the flag is not given
// (a boolean: 1, true, ...).
const envUnenforcedLimits = "SANDBOXER_UNENFORCED_LIMITS"

const rootLong = `sandboxer gives each agent, developer or CI job its own throwaway
Postgres, Redis and Mongo, as sibling containers on Docker, Podman,
containerd or Kubernetes. Data lives on tmpfs; passwords are fresh per sandbox and only
ever printed where env output is asked for.

Runtime: --runtime auto (default; env SANDBOXER_RUNTIME) tries, in order,
DOCKER_HOST, CONTAINER_HOST, the rootful and rootless Podman sockets, the
Docker socket, then the containerd socket, pinging each; up, run and
janitor use the first that answers (` + "`sandboxer doctor`" + ` says which one and
why), while down, ls and gc look at every one that is present and exit 3
when one of them does not answer, so that they never miss the runtime an
earlier up landed on. Endpoints follow each ecosystem's conventions:
DOCKER_HOST (--docker-host), CONTAINER_HOST (--container-host),
CONTAINERD_ADDRESS / CONTAINERD_NAMESPACE (--containerd-address,
--containerd-namespace). Kubernetes is never auto-detected: --runtime
kubernetes uses the cluster of KUBECONFIG, else ~/.kube/config, else a
pod's in-cluster config, in the namespace SANDBOXER_K8S_NAMESPACE.

Images: each engine's default image, unless SANDBOXER_IMAGE_<ENGINE> or
--image ENGINE=REF says otherwise (air-gapped hosts, private mirrors).

` + exitCodesHelp

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:               "sandboxer",
		Short:             "Throwaway Postgres/Redis/Mongo sandboxes as sibling containers",
		Long:              rootLong,
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	f := root.PersistentFlags()
	f.StringVar(&a.runtimeName, "runtime", "", "container runtime: auto, "+strings.Join(detect.Choosable(), ", ")+" (env SANDBOXER_RUNTIME; default auto)")
	f.StringVar(&a.dockerHost, "docker-host", "", "Docker endpoint (default DOCKER_HOST, else unix:///var/run/docker.sock)")
	f.StringVar(&a.containerHost, "container-host", "", "Podman endpoint (default CONTAINER_HOST, else the rootful, then the rootless socket)")
	f.StringVar(&a.containerdAddress, "containerd-address", "", "containerd socket (default CONTAINERD_ADDRESS, else /run/containerd/containerd.sock)")
	f.StringVar(&a.containerdNamespace, "containerd-namespace", "", "containerd namespace (default CONTAINERD_NAMESPACE, else sandboxer)")
	f.StringArrayVar(&a.images, "image", nil, "ENGINE=REF: run ENGINE from REF (repeatable; env SANDBOXER_IMAGE_<ENGINE>)")
	f.StringVar(&a.labelPrefix, "label-prefix", labels.DefaultPrefix, "prefix of container names and labels")
	f.StringVar(&a.envPrefix, "env-prefix", provision.DefaultEnvPrefix, "prefix of the emitted env variables")
	f.StringVar(&a.memory, "memory", "", "memory limit per sandbox (bytes, or with a k, m or g suffix; default: the engine's own, else 512m)")
	f.Float64Var(&a.cpus, "cpus", provision.DefaultCPUs, "CPU quota per sandbox, in cores (fractional)")
	f.BoolVar(&a.unenforcedLimits, "unenforced-limits", false, "run sandboxes although the runtime cannot enforce --memory/--cpus (rootless Podman on cgroup v1), with a warning, instead of failing (env "+envUnenforcedLimits+"=1)")
	f.DurationVar(&a.pingTimeout, "ping-timeout", 0, "how long each runtime candidate may take to answer its ping before it counts as not answering (env "+envPingTimeout+"; default "+detect.DefaultPingTimeout.String()+")")
	f.StringVar(&a.readinessFlag, "readiness", "", "how a sandbox is judged ready: auto, wire (the engine's real client over the network) or exec (the engine's probe inside the sandbox) (env SANDBOXER_READINESS; default auto)")
	f.StringVar(&a.warmFlag, "warm", "", "warm start: auto (postgres starts from a template of its initialised data, built once per image) or off (always cold) (env SANDBOXER_WARM; default auto)")
	f.BoolVarP(&a.quiet, "quiet", "q", false, "only errors on stderr, no progress")
	f.BoolVarP(&a.verbose, "verbose", "v", false, "debug logs on stderr (never passwords)")
	f.StringVar(&a.logFormat, "log-format", "text", "log format on stderr: text or json")
	root.MarkFlagsMutuallyExclusive("quiet", "verbose")

	root.AddCommand(a.upCmd(), a.spawnCmd(), a.downCmd(), a.adoptCmd(), a.lsCmd(), a.gcCmd(), a.janitorCmd(), a.runCmd(), a.enginesCmd(), a.doctorCmd(), a.warmCmd(), a.imagesCmd(), a.versionCmd())
	return root
}

// command wraps a subcommand's body: it checks the global flags, sets up
// logging, then runs fn. Errors before fn are usage errors by construction.
func (a *app) command(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := a.prepare(); err != nil {
			return err
		}
		return fn(cmd, args)
	}
}

// prepare validates the global flags and builds the logger.
func (a *app) prepare() error {
	switch a.logFormat {
	case "text", "json":
	default:
		return usagef("--log-format %q: want text or json", a.logFormat)
	}
	var err error
	if a.memory != "" {
		if a.memoryBytes, err = parseSize(a.memory); err != nil {
			return usagef("--memory %q: %v", a.memory, err)
		}
	}
	if a.cpus <= 0 {
		return usagef("--cpus %v: must be positive", a.cpus)
	}
	readiness, from := a.readinessFlag, "--readiness"
	if readiness == "" {
		readiness, from = a.getenv(envReadiness), envReadiness
	}
	if a.readiness, err = provision.ParseReadiness(readiness); err != nil {
		return usagef("%s %q: want auto, wire or exec", from, readiness)
	}
	if a.pingTimeout < 0 {
		return usagef("--ping-timeout %v: must not be negative", a.pingTimeout)
	}
	if v := a.getenv(envPingTimeout); v != "" && a.pingTimeout == 0 {
		if a.pingTimeout, err = time.ParseDuration(v); err != nil || a.pingTimeout < 0 {
			return usagef("%s=%q: want a duration such as 3s", envPingTimeout, v)
		}
	}
	if v := a.getenv(envUnenforcedLimits); v != "" && !a.unenforcedLimits {
		if a.unenforcedLimits, err = strconv.ParseBool(v); err != nil {
			return usagef("%s=%q: want 1 or 0", envUnenforcedLimits, v)
		}
	}
	warm, from := a.warmFlag, "--warm"
	if warm == "" {
		warm, from = a.getenv(provision.WarmEnv), provision.WarmEnv
	}
	if a.warm, err = provision.ParseWarm(warm); err != nil {
		return usagef("%s %q: want auto or off", from, warm)
	}
	a.imageMap, err = parseImages(a.registry, a.images)
	if err != nil {
		return &usageError{err}
	}
	if a.runtimeName != "" {
		if _, _, err := detect.Choice(detect.Options{Runtime: a.runtimeName}); err != nil {
			return usagef("--runtime %q: want auto, %s", a.runtimeName, strings.Join(detect.Choosable(), ", "))
		}
	} else if v := a.getenv(detect.EnvRuntime); v != "" {
		if _, _, err := detect.Choice(detect.Options{Runtime: v}); err != nil {
			return usagef("%s=%q: want auto, %s", detect.EnvRuntime, v, strings.Join(detect.Choosable(), ", "))
		}
	}

	a.console = newConsole(a.io.Err)
	level := slog.LevelInfo
	switch {
	case a.quiet:
		level = slog.LevelError
	case a.verbose:
		level = slog.LevelDebug
	}
	hopts := &slog.HandlerOptions{Level: level}
	if a.logFormat == "json" {
		a.log = slog.New(slog.NewJSONHandler(a.console, hopts))
	} else {
		a.log = slog.New(slog.NewTextHandler(a.console, hopts))
	}
	return nil
}

// detectOptions are the runtime detection options from the global flags.
func (a *app) detectOptions() detect.Options {
	opts := detect.Options{
		Runtime:             a.runtimeName,
		DockerHost:          a.dockerHost,
		ContainerHost:       a.containerHost,
		ContainerdAddress:   a.containerdAddress,
		ContainerdNamespace: a.containerdNamespace,
		UnenforcedLimits:    a.unenforcedLimits,
		PingTimeout:         a.pingTimeout,
		Getenv:              a.getenv,
		Logger:              a.log,
	}
	if a.detectHook != nil {
		a.detectHook(&opts)
	}
	return opts
}

// connect chooses and pings the runtime. The caller closes it.
func (a *app) connect(ctx context.Context) (runtime.ContainerRuntime, error) {
	sel, err := detect.Detect(ctx, a.detectOptions())
	if err != nil {
		return nil, err
	}
	a.log.Debug("runtime chosen", "runtime", sel.Chosen.Runtime, "endpoint", sel.Chosen.Shown(), "version", sel.Chosen.Info.Version, "reason", sel.Reason)
	return sel.Runtime, nil
}

// provisionOptions are the provisioner options from the global flags.
func (a *app) provisionOptions() provision.Options {
	return provision.Options{
		Registry:    a.registry,
		MemoryBytes: a.memoryBytes,
		Readiness:   a.readiness,
		Warm:        a.warm,
		CPUs:        a.cpus,
		Images:      a.imageMap,
		Getenv:      a.getenv,
		LabelPrefix: a.labelPrefix,
		EnvPrefix:   a.envPrefix,
		Logger:      a.log,
	}
}

// ownerFlags adds --owner and --owner-template to cmd.
func ownerFlags(f *pflag.FlagSet, owner, template *string, ownerHelp string) {
	f.StringVar(owner, "owner", "", ownerHelp)
	f.StringVar(template, "owner-template", provision.DefaultOwnerTemplate, "owner container name; {prefix} and {id} are replaced")
}

// parseImages reads --image ENGINE=REF values.
func parseImages(reg *engines.Registry, vals []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vals {
		name, ref, ok := strings.Cut(v, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		ref = strings.TrimSpace(ref)
		switch {
		case !ok || name == "" || ref == "":
			return nil, fmt.Errorf("--image %q: want ENGINE=REF", v)
		case !slices.Contains(reg.Names(), name):
			return nil, fmt.Errorf("--image %q: unknown engine %q; valid engines: %s", v, name, strings.Join(reg.Names(), ", "))
		case out[name] != "":
			return nil, fmt.Errorf("--image %q: %s given twice", v, name)
		}
		out[name] = ref
	}
	return out, nil
}

// parseSize reads a byte count as docker --memory does (go-units'
// RAMInBytes: a number with an optional binary unit, b, k, m, g, t or p;
// "kb", "kib" and upper case accepted), at least 1 MiB. Two answers stay
// the CLI's own: a negative size "must be positive" (RAMInBytes only says
// "invalid size"), and a space inside the value ("1 g", which RAMInBytes
// takes) is refused, as it always was here.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return 0, errors.New("must be positive")
	}
	n, err := units.RAMInBytes(t)
	if err != nil || strings.ContainsAny(t, " \t") {
		return 0, errors.New("want a size such as 512m, 1g or 268435456")
	}
	if n <= 0 {
		return 0, errors.New("must be positive")
	}
	if n < units.MiB {
		return 0, errors.New("must be at least 1m")
	}
	return n, nil
}

// durationFlag parses a non-negative duration flag value.
func durationFlag(name string, d time.Duration) error {
	if d < 0 {
		return usagef("--%s %s: must not be negative", name, d)
	}
	return nil
}
