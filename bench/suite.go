package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	goruntime "runtime"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// Figure names. A figure with a baseline names it; the trio's baseline is
// whichever single-engine baseline is slowest in the run.
const (
	FigTrio          = "provision trio, parallel"
	FigTrioSeq       = "provision trio, one after another"
	FigTeardown      = "teardown trio"
	FigRawRemoveTrio = "baseline: force-remove 3 at once"
	FigRawTrio       = "baseline: trio run + login, all at once"
	FigImage         = "image-present check"
	FigRawImage      = "baseline: image inspect"
	FigFakeKept      = "janitor sweep, 1000 fake, owners alive"
	FigFakeKeptList  = "  listing round trips per sweep (owners alive)"
	FigFakeGone      = "janitor sweep, 1000 fake, all orphans"
	FigFakeGoneList  = "  listing round trips per sweep (all orphans)"
	FigFakeList      = "baseline: fake List of 1000"
	FigRealKept      = "janitor sweep, 50 real, owners alive"
	FigRawList       = "baseline: list 50"
	FigRealGone      = "janitor sweep, 50 real, all orphans"
	FigRawRemove50   = "baseline: force-remove 50, 8 at once"
	FigOwnersOK      = "owners at once: provisioned"
	FigOwnersP50     = "owners at once: p50"
	FigOwnersP95     = "owners at once: p95"
	FigOwnersExecs   = "owners at once: probe execs"
	FigOwnersExecMed = "owners at once: one probe exec, median"
	FigRawOwnersOK   = "baseline: owners at once: logged in"
	FigRawOwnersP50  = "baseline: owners at once: p50"
	FigRawOwnersP95  = "baseline: owners at once: p95"
)

// FigBaseline is the name of an engine's baseline figure.
func FigBaseline(engine string) string { return "baseline: " + engine + " run + login" }

// FigProvision is the name of an engine's provision figure.
func FigProvision(engine string) string { return "provision " + engine }

// Phases of a single-engine provision, measured from the provisioner's
// events and the probe execs' own durations.
func figStarted(engine string) string { return "  " + engine + ": call start to container started" }
func figReady(engine string) string {
	return "  " + engine + ": started to ready (probe polling, port check)"
}
func figRawRun(engine string) string {
	return "  baseline: " + engine + " run only (create, start, port)"
}
func figAttempts(engine string) string { return "  " + engine + ": probe attempts" }
func figPassing(engine string) string  { return "  " + engine + ": the passing probe attempt (exec)" }
func figExecTime(engine string) string {
	return "  " + engine + ": time inside probe execs, all attempts"
}

// Suite is the end-to-end benchmark on one runtime.
type Suite struct {
	// RT is the runtime measured.
	RT runtime.ContainerRuntime
	// Floor is that runtime's own API, for the baselines.
	Floor Floor
	// Images are the image refs, by engine name (every engine of
	// Registry), plus "busybox" for the janitor's owner containers.
	Images map[string]string
	// Registry is the engine registry (default engines.Default).
	Registry *engines.Registry

	// Rounds repeats the provisioning figures (default 5).
	Rounds int
	// Owners is how many owners provision postgres at once (default 20),
	// OwnersRounds how often (default 1).
	Owners, OwnersRounds int
	// RealSweep is the number of real sandboxes swept (default 50),
	// SweepRounds how often (default Rounds).
	RealSweep, SweepRounds int
	// FakeSweep is the number of sandboxes on the fake runtime (default
	// 1000).
	FakeSweep int
	// ImageChecks is the number of image-present checks (default 100).
	ImageChecks int

	// Logger receives progress (default: discard).
	Logger *slog.Logger

	prefix string
	report *Report
	mu     sync.Mutex
	timed  *timedRuntime
	evs    *events
	// warming: phases are not recorded during the warm-up round.
	warming bool
}

func (s *Suite) defaults() {
	if s.Registry == nil {
		s.Registry = engines.Default
	}
	if s.Rounds <= 0 {
		s.Rounds = 5
	}
	if s.Owners <= 0 {
		s.Owners = 20
	}
	if s.OwnersRounds <= 0 {
		s.OwnersRounds = 1
	}
	if s.RealSweep <= 0 {
		s.RealSweep = 50
	}
	if s.SweepRounds <= 0 {
		s.SweepRounds = s.Rounds
	}
	if s.FakeSweep <= 0 {
		s.FakeSweep = 1000
	}
	if s.ImageChecks <= 0 {
		s.ImageChecks = 100
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
}

// Run measures everything and returns the report. Only a failure to start
// (the runtime does not answer, an image is missing) is an error; a failed
// sample is recorded in Report.Errors and the run goes on. Everything the
// run creates carries a label prefix of its own and is removed before Run
// returns, even when ctx ends.
func (s *Suite) Run(ctx context.Context) (*Report, error) {
	s.defaults()
	s.prefix = "sbxbench" + randomHex(4)
	info, err := s.RT.Version(ctx)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	s.report = &Report{
		Runtime:  s.RT.Name(),
		Endpoint: s.RT.Endpoint(),
		Version:  info.Version,
		Floor:    s.Floor.Describe(),
		Host:     fmt.Sprintf("%s, %d CPUs, %s/%s, cgroup v%s", host, goruntime.NumCPU(), goruntime.GOOS, goruntime.GOARCH, info.CgroupVersion),
		Rounds:   s.Rounds,
		Started:  time.Now(),
		Images:   s.Images,
	}
	s.declare()
	defer s.cleanup(ctx)

	if err := s.warm(ctx); err != nil {
		return nil, err
	}
	engineImages := map[string]string{}
	for _, n := range s.Registry.Names() {
		engineImages[n] = s.Images[n]
	}
	s.timed, s.evs = newTimedRuntime(s.RT), newEvents()
	p, err := provision.New(s.timed, provision.Options{
		Registry:    s.Registry,
		LabelPrefix: s.prefix,
		Images:      engineImages,
		Getenv:      func(string) string { return "" },
		OnEvent:     s.evs.record,
	})
	if err != nil {
		return nil, err
	}

	s.Logger.Info("warm-up round (not recorded)")
	s.warming = true
	for _, e := range s.Registry.All() {
		name := e.Spec().Name
		_, id, err := s.baseline(ctx, name, "warm")
		s.remove(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("warm-up baseline %s: %w", name, err)
		}
		if _, err := s.provisionOnce(ctx, p, "warm-"+name, []string{name}); err != nil {
			return nil, fmt.Errorf("warm-up provision %s: %w", name, err)
		}
	}

	s.warming = false
	for r := range s.Rounds {
		s.Logger.Info("round", "n", r+1, "of", s.Rounds)
		s.round(ctx, p, r)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	s.imageChecks(ctx)
	s.fakeSweeps(ctx)
	for r := range s.SweepRounds {
		s.realSweeps(ctx, r)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	for r := range s.OwnersRounds {
		s.owners(ctx, p, r)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}

	s.report.ElapsedSeconds = time.Since(s.report.Started).Seconds()
	s.pickTrioBaseline()
	s.report.Finish()
	return s.report, nil
}

// declare lists the figures in table order, with their baselines and
// targets.
func (s *Suite) declare() {
	add := func(f *Figure) { s.report.Figures = append(s.report.Figures, f) }
	ratio := func(v float64) *Target { return &Target{Kind: TargetRatio, Value: v} }
	maxMS := func(v float64) *Target { return &Target{Kind: TargetMax, Value: v} }
	names := s.Registry.Names()
	for _, n := range names {
		add(&Figure{Name: FigBaseline(n), Unit: UnitMS, Note: "runtime API run of the same image and flags, then a real client login polled every 20 ms"})
	}
	for _, n := range names {
		add(&Figure{Name: FigProvision(n), Unit: UnitMS, Baseline: FigBaseline(n), Target: ratio(1.10), Note: "Provision, host mode, until it returns ready"})
		add(&Figure{Name: figStarted(n), Unit: UnitMS, Baseline: figRawRun(n), Note: "validate, list, image check, run (create, start, inspect)"})
		add(&Figure{Name: figRawRun(n), Unit: UnitMS, Note: "the baseline's run request alone"})
		add(&Figure{Name: figReady(n), Unit: UnitMS})
		add(&Figure{Name: figAttempts(n), Unit: UnitCount})
		add(&Figure{Name: figPassing(n), Unit: UnitMS, Note: "every step of the last attempt, exec included"})
		add(&Figure{Name: figExecTime(n), Unit: UnitMS, Note: "the rest of started-to-ready is the pauses between attempts and the port check"})
	}
	add(&Figure{Name: FigTrio, Unit: UnitMS, Target: ratio(1.15), Compare: FigRawTrio, Note: "vs the slowest single-engine baseline"})
	add(&Figure{Name: FigRawTrio, Unit: UnitMS, Note: "runtime API, the three started together; until the last login"})
	add(&Figure{Name: FigTrioSeq, Unit: UnitMS, Baseline: FigTrio, Note: "three Provision calls in a row; the ratio is what parallelism buys"})
	add(&Figure{Name: FigTeardown, Unit: UnitMS, Baseline: FigRawRemoveTrio, Target: maxMS(300), Note: "Teardown of a ready trio (list, kill, remove)"})
	add(&Figure{Name: FigRawRemoveTrio, Unit: UnitMS, Note: "runtime API remove --force of a ready trio"})
	add(&Figure{Name: FigImage, Unit: UnitMS, Baseline: FigRawImage, Target: maxMS(10), Note: "the adapter's ImageExists (what Provision asks first)"})
	add(&Figure{Name: FigRawImage, Unit: UnitMS, Note: "runtime API image inspect"})
	add(&Figure{Name: FigFakeKept, Unit: UnitMS, Baseline: FigFakeList, Target: maxMS(50), Note: fmt.Sprintf("%d sandboxes of %d live owners", s.FakeSweep, s.FakeSweep/2)})
	add(&Figure{Name: FigFakeKeptList, Unit: UnitCount, Target: maxMS(1), Note: "Snapshot + List calls: one Snapshot holds the sandboxes and every owner"})
	add(&Figure{Name: FigFakeGone, Unit: UnitMS, Baseline: FigFakeList, Target: maxMS(50), Note: "every sandbox killed and removed"})
	add(&Figure{Name: FigFakeGoneList, Unit: UnitCount, Target: maxMS(1), Note: "removal adds, per orphan, an identity check before the kill and before the remove"})
	add(&Figure{Name: FigFakeList, Unit: UnitMS, Note: "one List by label on the fake"})
	add(&Figure{Name: FigRealKept, Unit: UnitMS, Baseline: FigRawList, Note: fmt.Sprintf("%d redis sandboxes, owner container running", s.RealSweep)})
	add(&Figure{Name: FigRawList, Unit: UnitMS, Note: "runtime API list by label"})
	add(&Figure{Name: FigRealGone, Unit: UnitMS, Baseline: FigRawRemove50, Note: "owner gone: kill and remove every sandbox"})
	add(&Figure{Name: FigRawRemove50, Unit: UnitMS, Note: "runtime API remove --force, as many at once as the janitor"})
	add(&Figure{Name: FigOwnersOK, Unit: UnitCount, Target: &Target{Kind: TargetMin, Value: float64(s.Owners)}, Note: fmt.Sprintf("of %d owners provisioning postgres at once", s.Owners)})
	add(&Figure{Name: FigOwnersP50, Unit: UnitMS, Baseline: FigRawOwnersP50, Note: "latency of each owner's Provision from the common start"})
	add(&Figure{Name: FigOwnersP95, Unit: UnitMS, Baseline: FigRawOwnersP95})
	add(&Figure{Name: FigOwnersExecs, Unit: UnitCount, Note: "docker/podman/ctr exec calls made by the probes of all owners"})
	add(&Figure{Name: FigOwnersExecMed, Unit: UnitMS, Note: "one exec (pg_isready or psql) under that load"})
	add(&Figure{Name: FigRawOwnersOK, Unit: UnitCount, Note: fmt.Sprintf("of %d runtime API runs + logins at once", s.Owners)})
	add(&Figure{Name: FigRawOwnersP50, Unit: UnitMS})
	add(&Figure{Name: FigRawOwnersP95, Unit: UnitMS})
}

// pickTrioBaseline compares the trio with the slowest single baseline.
func (s *Suite) pickTrioBaseline() {
	var slowest string
	var worst float64
	for _, n := range s.Registry.Names() {
		f := s.report.Figure(FigBaseline(n))
		if m, _, _ := Stats(f.Samples); m > worst {
			worst, slowest = m, f.Name
		}
	}
	s.report.Figure(FigTrio).Baseline = slowest
}

// sample records one measurement.
func (s *Suite) sample(name string, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.report.Figure(name)
	if f == nil {
		panic("bench: undeclared figure " + name)
	}
	f.Samples = append(f.Samples, v)
}

// fail records a failed sample.
func (s *Suite) fail(what string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.Errors = append(s.report.Errors, fmt.Sprintf("%s: %v", what, err))
	s.Logger.Warn("sample failed", "what", what, "error", err)
}

func (s *Suite) warm(ctx context.Context) error {
	for _, ref := range s.Images {
		ok, err := s.RT.ImageExists(ctx, ref)
		if err != nil {
			return err
		}
		if !ok {
			s.Logger.Info("pulling", "image", ref)
			if err := s.RT.PullImage(ctx, ref, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// round measures every engine alone next to its baseline, the trio both
// ways, and the trio's teardown next to a raw removal.
func (s *Suite) round(ctx context.Context, p *provision.Provisioner, r int) {
	names := s.Registry.Names()
	for _, n := range names {
		e, _ := s.Registry.Lookup(n)
		d, id, err := s.baselineWith(ctx, n, fmt.Sprint(r), e.Spec().ReadyTimeout, true)
		if err != nil {
			s.fail(FigBaseline(n), err)
		} else {
			s.sample(FigBaseline(n), ms(d))
		}
		s.remove(ctx, id)

		d, err = s.provisionOnce(ctx, p, fmt.Sprintf("r%d-%s", r, n), []string{n})
		if err != nil {
			s.fail(FigProvision(n), err)
		} else {
			s.sample(FigProvision(n), ms(d))
		}
	}

	owner := fmt.Sprintf("r%d-trio", r)
	start := time.Now()
	if _, err := p.Provision(ctx, owner, names); err != nil {
		s.fail(FigTrio, err)
	} else {
		s.sample(FigTrio, ms(time.Since(start)))
		start = time.Now()
		if _, err := p.Teardown(ctx, owner); err != nil {
			s.fail(FigTeardown, err)
		} else {
			s.sample(FigTeardown, ms(time.Since(start)))
		}
	}
	s.teardown(ctx, p, owner)

	owner = fmt.Sprintf("r%d-seq", r)
	start = time.Now()
	var seqErr error
	for _, n := range names {
		if _, err := p.Provision(ctx, owner, []string{n}); err != nil {
			seqErr = err
			break
		}
	}
	if seqErr != nil {
		s.fail(FigTrioSeq, seqErr)
	} else {
		s.sample(FigTrioSeq, ms(time.Since(start)))
	}
	s.teardown(ctx, p, owner)

	s.rawRemoveTrio(ctx, r)
}

// provisionOnce times one Provision, checks that a real client logs in at
// the first attempt with what it returned, and tears it down (untimed).
func (s *Suite) provisionOnce(ctx context.Context, p *provision.Provisioner, owner string, services []string) (time.Duration, error) {
	defer s.teardown(ctx, p, owner)
	start := time.Now()
	sb, err := p.Provision(ctx, owner, services)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	for _, c := range sb.Containers {
		if err := s.firstLogin(ctx, sb, c); err != nil {
			s.fail("first login after Provision "+owner, err)
		}
	}
	if len(services) == 1 {
		s.phases(sb, services[0])
	}
	return d, nil
}

// phases records where a single-engine provision spent its time.
func (s *Suite) phases(sb provision.Sandbox, engine string) {
	if s.warming || len(sb.Containers) != 1 {
		return
	}
	started, ok1 := s.evs.find(sb.Owner, engine, provision.EventStarted)
	ready, ok2 := s.evs.find(sb.Owner, engine, provision.EventReady)
	if !ok1 || !ok2 {
		return
	}
	s.sample(figStarted(engine), ms(started.Elapsed))
	s.sample(figReady(engine), ms(ready.Elapsed-started.Elapsed))
	s.sample(figAttempts(engine), float64(ready.Attempts))
	e, _ := s.Registry.Lookup(engine)
	steps := len(e.Probe(engines.Endpoint{}, engines.Credentials{}))
	var pass time.Duration
	for _, d := range s.timed.lastExecs(sb.Containers[0].ID, steps) {
		pass += d
	}
	s.sample(figPassing(engine), ms(pass))
	s.sample(figExecTime(engine), ms(s.timed.execTotal(sb.Containers[0].ID)))
}

// firstLogin logs in once, without retry, with the URL the sandbox
// emitted for c: Provision must never return before that works.
func (s *Suite) firstLogin(ctx context.Context, sb provision.Sandbox, c provision.Container) error {
	e, ok := s.Registry.Lookup(c.Engine)
	if !ok {
		return fmt.Errorf("unknown engine %q", c.Engine)
	}
	v, ok := URLVar(e.Env(provision.DefaultEnvPrefix, c.Endpoint, engines.Credentials{}))
	if !ok {
		return fmt.Errorf("%s emits no URL", c.Engine)
	}
	url, ok := sb.Lookup(v.Name)
	if !ok {
		return fmt.Errorf("the sandbox emitted no %s", v.Name)
	}
	login, ok := Logins[c.Engine]
	if !ok {
		return fmt.Errorf("no client login for %s", c.Engine)
	}
	if err := login(ctx, url); err != nil {
		return fmt.Errorf("%s: %s", c.Name, redact(err.Error(), url))
	}
	return nil
}

func (s *Suite) teardown(ctx context.Context, p *provision.Provisioner, owner string) {
	if _, err := p.Teardown(context.WithoutCancel(ctx), owner); err != nil {
		s.fail("teardown "+owner, err)
	}
}

// spec is the run spec the provisioner would use for engine, in host
// mode, with the bench's labels instead of a sandbox's.
func (s *Suite) spec(engine, name string, cred engines.Credentials, labels map[string]string) runtime.RunSpec {
	e, _ := s.Registry.Lookup(engine)
	sp := e.Spec()
	cc := e.Container(cred)
	tmpfs := map[string]string{}
	for _, path := range sp.Tmpfs {
		tmpfs[path] = ""
	}
	return runtime.RunSpec{
		Name:        name,
		Image:       s.Images[engine],
		Env:         cc.Env,
		Command:     cc.Command,
		Labels:      labels,
		Tmpfs:       tmpfs,
		MemoryBytes: provision.DefaultMemoryBytes,
		CPUs:        provision.DefaultCPUs,
		Ports:       []runtime.PortSpec{{ContainerPort: sp.Port, Protocol: "tcp", HostIP: runtime.DefaultHostIP}},
	}
}

func (s *Suite) benchLabels() map[string]string { return map[string]string{s.prefix + ".bench": "1"} }

// baseline runs engine's image through the floor and polls a real client
// login every 20 ms; it returns the time from the run request to the first
// login, and the container's ID (to remove, even on failure).
func (s *Suite) baseline(ctx context.Context, engine, tag string) (time.Duration, string, error) {
	e, _ := s.Registry.Lookup(engine)
	return s.baselineWith(ctx, engine, tag, e.Spec().ReadyTimeout, false)
}

// baselineWith is baseline with a login deadline; record also records the
// run request's own time.
func (s *Suite) baselineWith(ctx context.Context, engine, tag string, timeout time.Duration, record bool) (time.Duration, string, error) {
	e, _ := s.Registry.Lookup(engine)
	cred, err := engines.NewCredentials()
	if err != nil {
		return 0, "", err
	}
	spec := s.spec(engine, fmt.Sprintf("%s-base-%s-%s-%s", s.prefix, e.Spec().Short, tag, randomHex(2)), cred, s.benchLabels())
	start := time.Now()
	id, port, err := s.Floor.Run(ctx, spec)
	if err != nil {
		return 0, id, err
	}
	ran := time.Since(start)
	v, ok := URLVar(e.Env("X", engines.Endpoint{Host: runtime.DefaultHostIP, Port: port}, cred))
	if !ok {
		return 0, id, fmt.Errorf("%s emits no URL", engine)
	}
	login, ok := Logins[engine]
	if !ok {
		return 0, id, fmt.Errorf("no client login for %s", engine)
	}
	if err := PollLogin(ctx, login, v.Value, timeout); err != nil {
		return 0, id, err
	}
	d := time.Since(start)
	if record {
		s.sample(figRawRun(engine), ms(ran))
	}
	return d, id, nil
}

func (s *Suite) remove(ctx context.Context, ids ...string) {
	for _, id := range ids {
		if id == "" {
			continue
		}
		if err := s.Floor.Remove(context.WithoutCancel(ctx), id); err != nil {
			s.fail("remove "+id, err)
		}
	}
}

// rawRemoveTrio starts one baseline per engine at once, waits for their
// logins, then times their removal through the floor, all at once.
func (s *Suite) rawRemoveTrio(ctx context.Context, r int) {
	names := s.Registry.Names()
	ids := make([]string, len(names))
	var g errgroup.Group
	start := time.Now()
	for i, n := range names {
		g.Go(func() error {
			var err error
			_, ids[i], err = s.baseline(ctx, n, fmt.Sprintf("rm%d", r))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		s.fail(FigRawTrio, err)
		s.remove(ctx, ids...)
		return
	}
	s.sample(FigRawTrio, ms(time.Since(start)))
	start = time.Now()
	g = errgroup.Group{}
	for _, id := range ids {
		g.Go(func() error { return s.Floor.Remove(ctx, id) })
	}
	if err := g.Wait(); err != nil {
		s.fail(FigRawRemoveTrio, err)
		s.remove(ctx, ids...)
		return
	}
	s.sample(FigRawRemoveTrio, ms(time.Since(start)))
}

// imageChecks alternates the adapter's ImageExists with the floor's image
// inspect, on the postgres image.
func (s *Suite) imageChecks(ctx context.Context) {
	ref := s.Images[s.Registry.Names()[0]]
	for range s.ImageChecks {
		start := time.Now()
		ok, err := s.RT.ImageExists(ctx, ref)
		if err != nil || !ok {
			s.fail(FigImage, fmt.Errorf("%s present: %v, %v", ref, ok, err))
			return
		}
		s.sample(FigImage, ms(time.Since(start)))
		start = time.Now()
		ok, err = s.Floor.ImageExists(ctx, ref)
		if err != nil || !ok {
			s.fail(FigRawImage, fmt.Errorf("%s present: %v, %v", ref, ok, err))
			return
		}
		s.sample(FigRawImage, ms(time.Since(start)))
	}
}

// fakeSweeps times sweeps over FakeSweep sandboxes on the in-memory
// runtime, and counts their listing calls (Snapshot and List).
func (s *Suite) fakeSweeps(ctx context.Context) {
	const prefix = "roboco"
	seed := func(live bool) *fakeruntime.Runtime {
		f := fakeruntime.New()
		now := time.Now()
		for i := range s.FakeSweep {
			owner := fmt.Sprintf("%s-agent-%d", prefix, i/2)
			if live && i%2 == 0 {
				f.Seed(runtime.Container{Name: owner, Image: "agent", State: runtime.StateRunning, Created: now.Add(-time.Hour)})
			}
			f.Seed(runtime.Container{
				Name:  fmt.Sprintf("%s-sandbox-x%d-%d", prefix, i%2, i/2),
				Image: "postgres:16-alpine",
				State: runtime.StateRunning,
				Labels: map[string]string{
					labels.For(prefix).Sandbox: "1",
					labels.For(prefix).Owner:   owner,
					labels.For(prefix).Engine:  "postgres",
				},
				Created: now.Add(-time.Hour),
			})
		}
		return f
	}
	for range max(s.Rounds, 10) {
		for _, live := range []bool{true, false} {
			fig, lists := FigFakeGone, FigFakeGoneList
			if live {
				fig, lists = FigFakeKept, FigFakeKeptList
			}
			f := seed(live)
			if !live {
				start := time.Now()
				cs, err := f.List(ctx, labels.For(prefix).Sandboxes())
				d := time.Since(start)
				if err == nil && len(cs) == s.FakeSweep {
					s.sample(FigFakeList, ms(d))
				}
			}
			j := janitor.New(f, janitor.Options{Prefix: prefix})
			listings := func() int { return f.Calls(fakeruntime.VerbList) + f.Calls(fakeruntime.VerbSnapshot) }
			before := listings()
			start := time.Now()
			rep, err := j.Sweep(ctx)
			d := time.Since(start)
			calls := listings() - before
			want := len(rep.Removed)
			if live {
				want = len(rep.Kept)
			}
			if err != nil || want != s.FakeSweep {
				s.fail(fig, fmt.Errorf("sweep: %v (%s)", err, rep))
			} else {
				s.sample(fig, ms(d))
				s.sample(lists, float64(calls))
			}
			_ = f.Close()
		}
	}
}

// realSweeps seeds RealSweep real redis sandboxes of one owner, sweeps them
// with the owner alive (kept) and gone (removed), and times the floor's
// list and removal of as many for comparison.
func (s *Suite) realSweeps(ctx context.Context, r int) {
	prefix := s.prefix + "sw"
	owner := fmt.Sprintf("%s-agent-%d", prefix, r)
	lbls := map[string]string{
		labels.For(prefix).Sandbox: "1",
		labels.For(prefix).Owner:   owner,
		labels.For(prefix).Engine:  "redis",
		s.prefix + ".bench":        "1",
	}
	j := janitor.New(s.RT, janitor.Options{Prefix: prefix, Grace: time.Millisecond})
	dry := janitor.New(s.RT, janitor.Options{Prefix: prefix, Grace: time.Millisecond, DryRun: true})

	if err := s.seedSandboxes(ctx, r, "a", lbls); err != nil {
		s.fail(FigRealKept, err)
		return
	}
	agent, err := s.RT.Run(ctx, runtime.RunSpec{
		Name: owner, Image: s.Images["busybox"], Command: []string{"sleep", "3600"}, Labels: s.benchLabels(),
	})
	if err != nil {
		s.fail(FigRealKept, err)
		return
	}
	// Past the grace window (whole-second creation times) before timing.
	if err := waitFor(ctx, 30*time.Second, func() bool {
		rep, err := dry.Sweep(ctx)
		return err == nil && len(rep.Skipped) == 0 && len(rep.Kept) == s.RealSweep
	}); err != nil {
		s.fail(FigRealKept, err)
	}
	for range 5 {
		start := time.Now()
		rep, err := j.Sweep(ctx)
		d := time.Since(start)
		if err != nil || len(rep.Kept) != s.RealSweep {
			s.fail(FigRealKept, fmt.Errorf("sweep: %v (%s)", err, rep))
			continue
		}
		s.sample(FigRealKept, ms(d))
		start = time.Now()
		n, err := s.Floor.List(ctx, labels.For(prefix).Sandboxes())
		d = time.Since(start)
		if err != nil || n != s.RealSweep {
			s.fail(FigRawList, fmt.Errorf("list: %d, %v", n, err))
			continue
		}
		s.sample(FigRawList, ms(d))
	}

	s.remove(ctx, agent.ID)
	start := time.Now()
	rep, err := j.Sweep(ctx)
	d := time.Since(start)
	if err != nil || len(rep.Removed) != s.RealSweep {
		s.fail(FigRealGone, fmt.Errorf("sweep: %v (%s)", err, rep))
	} else {
		s.sample(FigRealGone, ms(d))
	}

	if err := s.seedSandboxes(ctx, r, "b", lbls); err != nil {
		s.fail(FigRawRemove50, err)
		return
	}
	cs, err := s.RT.List(ctx, labels.For(prefix).Sandboxes())
	if err != nil || len(cs) != s.RealSweep {
		s.fail(FigRawRemove50, fmt.Errorf("list: %d, %v", len(cs), err))
		return
	}
	var g errgroup.Group
	g.SetLimit(janitor.DefaultConcurrency)
	start = time.Now()
	for _, c := range cs {
		g.Go(func() error { return s.Floor.Remove(ctx, c.ID) })
	}
	if err := g.Wait(); err != nil {
		s.fail(FigRawRemove50, err)
		return
	}
	s.sample(FigRawRemove50, ms(time.Since(start)))
}

// seedSandboxes runs RealSweep redis containers labelled as sandboxes,
// eight at a time.
func (s *Suite) seedSandboxes(ctx context.Context, r int, tag string, labels map[string]string) error {
	var g errgroup.Group
	g.SetLimit(8)
	for i := range s.RealSweep {
		g.Go(func() error {
			cred, err := engines.NewCredentials()
			if err != nil {
				return err
			}
			spec := s.spec("redis", fmt.Sprintf("%s-sandbox-sw%d%s-%d", s.prefix, r, tag, i), cred, labels)
			spec.Ports = nil
			_, err = s.RT.Run(ctx, spec)
			return err
		})
	}
	return g.Wait()
}

// owners starts Owners postgres at once through the floor (with a login
// each), then Owners Provision calls at once, and records success counts
// and latency percentiles of both.
func (s *Suite) owners(ctx context.Context, p *provision.Provisioner, r int) {
	type result struct {
		d   time.Duration
		id  string
		err error
	}
	run := func(fn func(i int) (time.Duration, string, error)) []result {
		res := make([]result, s.Owners)
		var ready, wg sync.WaitGroup
		gate := make(chan struct{})
		ready.Add(s.Owners)
		for i := range s.Owners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				<-gate
				res[i].d, res[i].id, res[i].err = fn(i)
			}()
		}
		ready.Wait()
		close(gate)
		wg.Wait()
		return res
	}
	record := func(res []result, ok, p50, p95, what string) {
		var ds []float64
		for _, x := range res {
			if x.err == nil {
				ds = append(ds, ms(x.d))
			} else {
				s.fail(what, x.err)
			}
		}
		s.sample(ok, float64(len(ds)))
		if len(ds) > 0 {
			s.sample(p50, Percentile(ds, 50))
			s.sample(p95, Percentile(ds, 95))
		}
	}

	s.Logger.Info("owners at once", "owners", s.Owners, "via", "floor")
	// Twenty clients polling every 20 ms load this host too: the raw
	// logins get a longer deadline than the engine's, so that they are
	// measured rather than cut off.
	raw := run(func(i int) (time.Duration, string, error) {
		return s.baselineWith(ctx, "postgres", fmt.Sprintf("o%d-%d", r, i), 5*time.Minute, false)
	})
	record(raw, FigRawOwnersOK, FigRawOwnersP50, FigRawOwnersP95, "baseline owner")
	var g errgroup.Group
	for _, x := range raw {
		g.Go(func() error { s.remove(ctx, x.id); return nil })
	}
	_ = g.Wait()

	s.Logger.Info("owners at once", "owners", s.Owners, "via", "Provision")
	mark := s.timed.mark()
	prov := run(func(i int) (time.Duration, string, error) {
		start := time.Now()
		_, err := p.Provision(ctx, fmt.Sprintf("o%d-%d", r, i), []string{"postgres"})
		return time.Since(start), "", err
	})
	record(prov, FigOwnersOK, FigOwnersP50, FigOwnersP95, "owner")
	execs := s.timed.since(mark)
	s.sample(FigOwnersExecs, float64(len(execs)))
	var ds []float64
	for _, d := range execs {
		ds = append(ds, ms(d))
	}
	if med, _, _ := Stats(ds); len(ds) > 0 {
		s.sample(FigOwnersExecMed, med)
	}
	g = errgroup.Group{}
	for i := range s.Owners {
		g.Go(func() error { s.teardown(ctx, p, fmt.Sprintf("o%d-%d", r, i)); return nil })
	}
	_ = g.Wait()
}

// cleanup removes everything carrying the run's labels.
func (s *Suite) cleanup(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	for _, sel := range []map[string]string{
		{s.prefix + ".bench": "1"},
		{s.prefix + ".sandbox": "1"},
		{s.prefix + "sw.sandbox": "1"},
	} {
		cs, err := s.RT.List(cctx, sel)
		if err != nil {
			s.Logger.Warn("cleanup", "error", err)
			continue
		}
		for _, c := range cs {
			if err := s.RT.Remove(cctx, c.ID); err != nil {
				s.Logger.Warn("cleanup", "container", c.Name, "error", err)
			}
		}
	}
}

// waitFor polls cond every 50 ms until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("condition not met within " + timeout.String())
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
