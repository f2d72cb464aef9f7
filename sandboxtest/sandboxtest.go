// Package sandboxtest gives Go tests throwaway databases of every engine
// sandboxer has (Postgres, Redis, Mongo, MariaDB): the peer of
// testcontainers' modules, on Docker, Podman or containerd, and without a
// reaper sidecar.
//
//	func TestStore(t *testing.T) {
//		sb := sandboxtest.Postgres(t)
//		db, err := pgx.Connect(ctx, sb.DSN("postgres"))
//		...
//	}
//
// It links the postgres engine and its test kit, and no other engine's
// client: every other engine is opted into by importing its test kit
// (engines/<name>/<name>test), whose helpers these are (redistest.Sandbox
// and redistest.DB, and so on); Start and NewDB serve any engine the test
// binary links, and name the import to add for one it does not.
//
// Each call provisions in host mode (ports published on 127.0.0.1) for a
// generated owner id, with the engines' readiness probes passed before it
// returns. The sandboxes are owned by the test process (the janitor's
// process-owner labels): a janitor or `sandboxer gc` leaves them alone while
// the test binary runs and removes them if it dies without cleaning up.
// Normally they are torn down by t.Cleanup.
//
// A database per test (NewDB, PostgresDB, redistest.DB, mongotest.DB)
// lives on one shared sandbox per engine for the whole run: every test
// binary of a `go test ./...` uses the same one, started by the first
// that needs it and removed by Main of the last one out. It is owned by
// the run (lifetime.Run): a janitor leaves it alone while any of those
// binaries lives, and removes it once they have all died.
//
// The runtime is auto-detected as the CLI does it (SANDBOXER_RUNTIME,
// DOCKER_HOST, CONTAINER_HOST, the well-known sockets; see runtime/detect),
// and images are overridden by the same SANDBOXER_IMAGE_<ENGINE> variables.
// When no runtime answers, the test is skipped, or fails when
// SANDBOXER_REQUIRE requires it (CI, where a missing runtime is a
// failure): SANDBOXER_REQUIRE lists runtimes ("docker,podman", or "all"),
// and an auto-detected runtime is required when it lists any.
package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/postgres"
	"github.com/roboco/sandboxer/internal/ids"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
)

// EnvRequire names the variable that turns "no runtime" from a skip into a
// failure: the required runtimes, comma separated, or "all". A test whose
// runtime is auto-detected (Options.Detect names none) fails when it
// names any runtime; one pinned to a runtime, when it names that one.
const EnvRequire = testenv.EnvRequire

// teardownTimeout bounds the cleanup's teardown.
const teardownTimeout = 60 * time.Second

// Options tune Start. The zero value is the default: auto-detected runtime,
// label prefix "roboco", env prefix "ROBOCO_TEST", images from the engines
// or SANDBOXER_IMAGE_<ENGINE>.
type Options struct {
	// Detect chooses the runtime (zero: auto-detection from the
	// environment).
	Detect detect.Options
	// LabelPrefix prefixes container names and labels.
	LabelPrefix string
	// EnvPrefix prefixes the emitted env.
	EnvPrefix string
	// Images overrides engines' images by engine name.
	Images map[string]string
	// MemoryBytes and CPUs limit each sandbox (zero: the provisioner's
	// defaults, 512 MiB and 1 CPU).
	MemoryBytes int64
	CPUs        float64
	// ReadyTimeout replaces the engines' readiness deadlines when set.
	ReadyTimeout time.Duration
	// Timeout bounds the whole provision (default 5 minutes, for a pull),
	// and for a shared sandbox the wait for another test binary that is
	// starting or tearing it down.
	Timeout time.Duration
	// PerBinary keeps NewDB's shared sandboxes to this test binary: one
	// per engine, started on first use and torn down by Main. By default
	// a shared sandbox is shared with every test binary of the user's
	// that runs meanwhile with the same Options (those of one `go test
	// ./...`): see NewDB.
	PerBinary bool
}

// Sandbox is a provisioned set of services: the env consumers read (with
// Lookup, Map and Environ from provision.Sandbox), the containers, and the
// DSN of each service.
type Sandbox struct {
	provision.Sandbox
	// Runtime is the runtime the sandboxes run on ("docker", ...).
	Runtime string

	t         testing.TB
	registry  *engines.Registry
	envPrefix string
}

// postgresName is the postgres engine's service name.
var postgresName = postgres.Engine{}.Spec().Name

// Postgres starts a postgres sandbox; its DSN is sb.DSN("postgres").
func Postgres(t testing.TB) *Sandbox { t.Helper(); return Start(t, postgresName) }

// Start provisions services with the default options.
func Start(t testing.TB, services ...string) *Sandbox {
	t.Helper()
	return StartWith(t, Options{}, services...)
}

// StartWith provisions services with opts and registers their teardown on
// t.Cleanup. It ends the test when that is not possible: a skip when no
// runtime answers (a failure when SANDBOXER_REQUIRE requires it), a failure
// for bad input or a provisioning failure.
func StartWith(t testing.TB, opts Options, services ...string) *Sandbox {
	t.Helper()
	st, err := start(opts, "test-"+ids.Hex(5), labelValue(t.Name()), nil, services)
	if err != nil {
		fail(t, opts, err)
	}
	t.Cleanup(func() {
		if err := st.teardown(); err != nil {
			t.Errorf("sandboxtest: teardown: %v", err)
		}
	})
	return st.sandbox(t)
}

// started is a provisioned sandbox and what tears it down: a test's own
// (StartWith) or a shared one (shared.go, run.go).
type started struct {
	sb        provision.Sandbox
	rt        runtime.ContainerRuntime
	p         *provision.Provisioner
	id        string
	envPrefix string
}

// errNoRuntime marks a start that found no runtime (it wraps the
// detection's runtime.ErrUnavailable): the test skips, or fails when
// SANDBOXER_REQUIRE requires it.
var errNoRuntime = errors.New("no runtime")

// start provisions services for owner id id under opts, owned by this
// process, with the extra server arguments args; test is the value of the
// sandboxtest.test label.
func start(opts Options, id, test string, args map[string][]string, services []string) (*started, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opts.timeout())
	defer cancel()
	prefix := opts.labelPrefix()
	owner, err := lifetime.ProcessOwnerLabels(prefix)
	if err != nil {
		// Not Linux: the sandboxes are then only the cleanup's to remove.
		slog.Warn("sandboxtest: no process identity: a janitor will not recognise this test as the owner", "err", err)
		owner = map[string]string{}
	}
	c, err := connect(ctx, opts, owner, test, args)
	if err != nil {
		return nil, err
	}
	return c.provision(ctx, id, services)
}

// connected is a runtime found under Options and a provisioner on it,
// whose sandboxes carry the owner labels connect was given.
type connected struct {
	rt        runtime.ContainerRuntime
	p         *provision.Provisioner
	envPrefix string
}

// connect detects the runtime under opts and makes a provisioner whose
// sandboxes carry the labels owner and the sandboxtest.test label test,
// and the extra server arguments args.
func connect(ctx context.Context, opts Options, owner map[string]string, test string, args map[string][]string) (*connected, error) {
	prefix := opts.labelPrefix()
	envPrefix := opts.EnvPrefix
	if envPrefix == "" {
		envPrefix = provision.DefaultEnvPrefix
	}
	lbls := maps.Clone(owner)
	lbls[prefix+".sandboxtest.test"] = test
	popts := provision.Options{
		Images:       opts.Images,
		LabelPrefix:  prefix,
		EnvPrefix:    envPrefix,
		MemoryBytes:  opts.MemoryBytes,
		CPUs:         opts.CPUs,
		ReadyTimeout: opts.ReadyTimeout,
		Labels:       lbls,
		Args:         args,
	}
	if err := popts.Validate(); err != nil {
		return nil, err
	}
	sel, err := detect.Detect(ctx, opts.Detect)
	if err != nil {
		if errors.Is(err, runtime.ErrUnavailable) {
			return nil, fmt.Errorf("%w: %w", errNoRuntime, err)
		}
		return nil, err
	}
	rt := sel.Runtime
	p, err := provision.New(rt, popts)
	if err != nil {
		rt.Close()
		return nil, err
	}
	return &connected{rt: rt, p: p, envPrefix: envPrefix}, nil
}

// provision provisions services for owner id id; the runtime is closed
// when that fails.
func (c *connected) provision(ctx context.Context, id string, services []string) (*started, error) {
	sb, err := c.p.Provision(ctx, id, services)
	if err != nil {
		c.rt.Close()
		return nil, fmt.Errorf("on %s: %w", c.rt.Name(), err)
	}
	return &started{sb: sb, rt: c.rt, p: c.p, id: id, envPrefix: c.envPrefix}, nil
}

// timeout bounds a whole start (default 5 minutes, for a pull).
func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 5 * time.Minute
	}
	return o.Timeout
}

// labelPrefix is the label prefix, defaulted.
func (o Options) labelPrefix() string {
	if o.LabelPrefix == "" {
		return labels.DefaultPrefix
	}
	return o.LabelPrefix
}

// teardown removes the sandbox and closes its runtime.
func (s *started) teardown() error {
	defer s.rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
	defer cancel()
	_, err := s.p.Teardown(ctx, s.id)
	return err
}

// sandbox is the started sandbox as t sees it.
func (s *started) sandbox(t testing.TB) *Sandbox {
	return &Sandbox{Sandbox: s.sb, Runtime: s.rt.Name(), t: t, registry: engines.Default, envPrefix: s.envPrefix}
}

// fail ends t for a start's error: a skip (or a failure under
// SANDBOXER_REQUIRE) when no runtime answered, a failure otherwise.
func fail(t testing.TB, opts Options, err error) {
	t.Helper()
	if errors.Is(err, errNoRuntime) {
		testenv.Unavailable(t, askedRuntime(opts.Detect), "sandboxtest: %v", err)
	}
	t.Fatalf("sandboxtest: %v", err)
}

// DSN returns the connection URL of service (its <P>_..._URL variable:
// postgres://, redis://, mongodb://), with the credentials in it. The test
// fails when the sandbox has no such service.
func (s *Sandbox) DSN(service string) string {
	s.t.Helper()
	for _, c := range s.Containers {
		if c.Engine != service {
			continue
		}
		e, ok := s.registry.Lookup(service)
		if !ok {
			break
		}
		for _, v := range e.Env(s.envPrefix, c.Endpoint, engines.Credentials{}) {
			if strings.HasSuffix(v.Name, "_URL") {
				if url, ok := s.Lookup(v.Name); ok {
					return url
				}
			}
		}
	}
	s.t.Fatalf("sandboxtest: no %s in this sandbox (it has %s)", service, s.Sandbox)
	return ""
}

// Getenv returns one emitted variable ("" when absent).
func (s *Sandbox) Getenv(name string) string {
	v, _ := s.Lookup(name)
	return v
}

// Setenv sets every emitted variable in the process environment for the
// rest of the test (t.Setenv: not allowed in parallel tests), for code
// under test that reads ROBOCO_TEST_* itself.
func (s *Sandbox) Setenv() {
	s.t.Helper()
	for _, v := range s.Env {
		s.t.Setenv(v.Name, v.Value)
	}
}

// askedRuntime is the runtime the detection options ask for, as
// SANDBOXER_REQUIRE names it: testenv.AnyRuntime for auto-detection.
func askedRuntime(opts detect.Options) string {
	name, _, err := detect.Choice(opts)
	if err != nil || name == detect.Auto {
		return testenv.AnyRuntime
	}
	return name
}

// labelValue keeps a test name usable as a label value.
func labelValue(name string) string {
	if len(name) > 200 {
		name = name[:200]
	}
	return name
}
