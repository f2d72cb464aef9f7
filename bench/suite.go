package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	goruntime "runtime"
	"slices"
	"sync"
	"time"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/ids"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

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
	// Readiness is how the provisioner judges sandboxes ready (default
	// provision.ReadinessAuto: over the wire in host mode); the bench's
	// -readiness exec reports the exec probe fallback.
	Readiness provision.Readiness
	// Owners is how many owners provision OwnersEngine at once (default
	// 20), OwnersRounds how often (default 1).
	Owners, OwnersRounds int
	// OwnersEngine is the engine the owners provision at once (default:
	// the registry's first, postgres in engines.Default).
	OwnersEngine string
	// RealSweep is the number of real sandboxes of SweepEngine swept
	// (default 50), SweepRounds how often (default Rounds).
	RealSweep, SweepRounds int
	// SweepEngine is the engine of the real sandboxes swept (default: the
	// registry's engine with the shortest readiness deadline, the lightest
	// to run fifty of: redis in engines.Default).
	SweepEngine string
	// FakeSweep is the number of sandboxes on the fake runtime (default
	// 1000).
	FakeSweep int
	// ImageChecks is the number of image-present checks (default 100).
	ImageChecks int

	// CLI is the sandboxer binary with the global flags that pin it to
	// RT (--runtime, the endpoint), for PartCLI; OwnCLI is the runtime's
	// own CLI aimed at RT (docker --host …, podman --url …). Either empty:
	// PartCLI is not measured, and the report says why.
	CLI, OwnCLI []string

	// Only, when not empty, limits the run to these parts (Parts), for a
	// quick measure of one change: the figures of the parts left out stay
	// empty (n/a). Empty: every part.
	Only []string

	// Notes are told in the report's header (Report.Notes): what the
	// driver changed for this runtime, and why.
	Notes []string

	// Logger receives progress (default: discard).
	Logger *slog.Logger

	prefix string
	// mode is the row's (ModeFor the runtime's forms); network is the
	// network made for the run in network mode.
	mode    Mode
	network string
	// na holds, by part, why that part cannot be measured here
	// (Unmeasurable).
	report *Report
	mu     sync.Mutex
	na     map[string]string
	// warmFigs are the warm figures declareWarm declared.
	warmFigs []string
	timed    *timedRuntime
	evs      *events
	// warming: phases are not recorded during the warm-up round.
	warming bool
}

// Parts of a run, for Suite.Only, in the order they run.
const (
	// PartEngines: each engine alone, provisioned next to its baseline,
	// with its phases.
	PartEngines = "engines"
	// PartTrio: the trio in parallel and one after another, its teardown
	// and the raw removal it is compared with.
	PartTrio = "trio"
	// PartWarm: the warm start's first use and its rounds.
	PartWarm = "warm"
	// PartImage: the image-present checks.
	PartImage = "image"
	// PartSweeps: the janitor's sweeps, on the fake and on real sandboxes.
	PartSweeps = "sweeps"
	// PartOwners: many owners provisioning at once.
	PartOwners = "owners"
	// PartCapacity: the data each engine holds before its memory is full.
	PartCapacity = "capacity"
	// PartCLI: one sandbox through `sandboxer up`, a process, beside the
	// runtime's own CLI running the same container.
	PartCLI = "cli"
)

// Parts lists every part of a run, in the order they run.
var Parts = []string{PartEngines, PartTrio, PartWarm, PartCLI, PartImage, PartSweeps, PartOwners, PartCapacity}

// wants reports whether the run measures part: asked for (Only), and
// measurable on this runtime.
func (s *Suite) wants(part string) bool {
	return (len(s.Only) == 0 || slices.Contains(s.Only, part)) && s.na[part] == ""
}

// quickest is the registered engine with the shortest readiness deadline.
func quickest(reg *engines.Registry) string {
	all := reg.All()
	best := all[0].Spec()
	for _, e := range all[1:] {
		if sp := e.Spec(); sp.ReadyTimeout < best.ReadyTimeout {
			best = sp
		}
	}
	return best.Name
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
	if s.OwnersEngine == "" {
		s.OwnersEngine = s.Registry.Names()[0]
	}
	if s.SweepEngine == "" {
		s.SweepEngine = quickest(s.Registry)
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
	for _, n := range []string{s.OwnersEngine, s.SweepEngine} {
		if _, ok := s.Registry.Lookup(n); !ok {
			return nil, fmt.Errorf("bench: engine %q is not registered (registered: %v)", n, s.Registry.Names())
		}
	}
	for _, part := range s.Only {
		if !slices.Contains(Parts, part) {
			return nil, fmt.Errorf("bench: unknown part %q (parts: %v)", part, Parts)
		}
	}
	s.prefix = "sbxbench" + ids.Hex(4)
	info, err := s.RT.Version(ctx)
	if err != nil {
		return nil, err
	}
	forms := runtime.FormsOf(s.RT)
	s.mode, s.na = ModeFor(forms), Unmeasurable(s.RT.Name(), hasStore(s.RT))
	if why := s.cliUnmeasurable(); why != "" {
		s.na[PartCLI] = why
	}
	host, _ := os.Hostname()
	s.report = &Report{
		Runtime:  s.RT.Name(),
		Endpoint: s.RT.Endpoint(),
		Version:  info.Version,
		Floor:    s.Floor.Describe(),
		Mode:     s.mode,
		Notes:    s.Notes,
		Host:     hostLine(host, info.CgroupVersion),
		Rounds:   s.Rounds,
		Started:  time.Now(),
		Images:   s.Images,
	}
	s.declare()
	if s.mode == ModeNetwork {
		s.network = s.prefix + "-net"
		if _, err := s.RT.CreateNetwork(ctx, runtime.NetworkSpec{Name: s.network, Labels: s.benchLabels()}); err != nil {
			return nil, fmt.Errorf("bench network: %w", err)
		}
		// Deferred first, so that it runs after cleanup has removed the
		// containers on it.
		defer s.removeNetwork(ctx)
	}
	defer s.cleanup(ctx)

	if err := s.warm(ctx); err != nil {
		return nil, err
	}
	engineImages := map[string]string{}
	for _, n := range s.Registry.Names() {
		engineImages[n] = s.Images[n]
	}
	s.timed, s.evs = newTimedRuntime(s.RT), newEvents()
	opts := provision.Options{
		Registry:    s.Registry,
		LabelPrefix: s.prefix,
		Images:      engineImages,
		Getenv:      func(string) string { return "" },
		OnEvent:     s.evs.record,
		Readiness:   s.Readiness,
		Network:     s.network,
		// The per-engine, trio and owners figures are the cold start's
		// (their targets are about the provisioner's overhead over a bare
		// run); the warm figures have a provisioner of their own.
		Warm: provision.WarmOff,
	}
	p, err := provision.New(s.timed, opts)
	if err != nil {
		return nil, err
	}
	opts.Warm = provision.WarmAuto
	pw, err := provision.New(s.timed, opts)
	if err != nil {
		return nil, err
	}
	s.declareWarm(pw.WarmServices())
	s.notMeasured()

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
	if s.wants(PartCLI) {
		s.cliRound(ctx, -1) // the binaries' first start reads them from disk
	}

	s.warming = false
	if s.wants(PartWarm) {
		s.Logger.Info("warm start: first use (template removed, then built by a provision)")
		s.firstUse(ctx, pw)
	}
	s.timed.drainNetworks() // the warm-up's and the first use's: not recorded
	for r := range s.Rounds {
		s.Logger.Info("round", "n", r+1, "of", s.Rounds)
		if s.wants(PartEngines) {
			s.engines(ctx, p, r)
		}
		if s.wants(PartTrio) {
			s.trio(ctx, p, r)
		}
		if s.wants(PartWarm) {
			s.warmRound(ctx, pw, r)
		}
		s.networkCosts() // the CLI's networks are its process's own: not the adapter's timed ones
		if s.wants(PartCLI) {
			s.cliRound(ctx, r)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if s.wants(PartImage) {
		s.imageChecks(ctx)
	}
	if s.wants(PartSweeps) {
		s.fakeSweeps(ctx)
		for r := range s.SweepRounds {
			s.realSweeps(ctx, r)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	if s.wants(PartOwners) {
		for r := range s.OwnersRounds {
			s.owners(ctx, p, r)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	if s.wants(PartCapacity) {
		s.capacity(ctx, p)
	}

	s.report.ElapsedSeconds = time.Since(s.report.Started).Seconds()
	s.pickTrioBaseline()
	s.report.Finish()
	return s.report, nil
}

// warm makes sure every image is present before anything is timed; on a
// runtime without an image store (no runtime.ImageStore: the node pulls
// at Run) the untimed warm-up round pulls them instead, as the provisioner
// lets Run pull.
func (s *Suite) warm(ctx context.Context) error {
	store, ok := runtime.As[runtime.ImageStore](s.RT)
	if !ok {
		return nil
	}
	for _, ref := range s.Images {
		ok, err := store.ImageExists(ctx, ref)
		if err != nil {
			return err
		}
		if !ok {
			s.Logger.Info("pulling", "image", ref)
			if err := store.PullImage(ctx, ref, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// imageChecks alternates the adapter's ImageExists with the floor's image
// inspect, on the registry's first engine's image.
func (s *Suite) imageChecks(ctx context.Context) {
	ref := s.Images[s.Registry.Names()[0]]
	store, ok := runtime.As[runtime.ImageStore](s.RT)
	if !ok {
		s.fail(FigImage, fmt.Errorf("%s has no image store: %w", s.RT.Name(), runtime.ErrUnsupported))
		return
	}
	for range s.ImageChecks {
		start := time.Now()
		ok, err := store.ImageExists(ctx, ref)
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

// cleanup removes everything carrying the run's labels.
func (s *Suite) cleanup(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	for _, sel := range []map[string]string{
		s.benchLabels(),
		labels.For(s.prefix).Sandboxes(),
		labels.For(s.sweepPrefix()).Sandboxes(),
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

// hostLine describes this host for the report; a runtime that does not
// report its cgroup version (a cluster's API server) has none shown.
func hostLine(host, cgroupVersion string) string {
	line := fmt.Sprintf("%s, %d CPUs, %s/%s", host, goruntime.NumCPU(), goruntime.GOOS, goruntime.GOARCH)
	if cgroupVersion != "" {
		line += ", cgroup v" + cgroupVersion
	}
	return line
}

// removeNetwork removes the run's network (network mode).
func (s *Suite) removeNetwork(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := s.RT.RemoveNetwork(cctx, s.network); err != nil {
		s.Logger.Warn("cleanup", "network", s.network, "error", err)
	}
}

// notMeasured marks the figures of every part that cannot be measured on
// this runtime with the reason (Figure.NA), so that the report shows them
// as n/a instead of dropping them.
func (s *Suite) notMeasured() {
	for part, why := range s.na {
		for _, name := range s.partFigures(part) {
			if f := s.report.Figure(name); f != nil {
				f.NA = why
			}
		}
	}
}

// networkCosts samples the owner networks' creations and removals of the
// round that ended.
func (s *Suite) networkCosts() {
	creates, removes := s.timed.drainNetworks()
	for _, d := range creates {
		s.sample(FigNetCreate, ms(d))
	}
	for _, d := range removes {
		s.sample(FigNetRemove, ms(d))
	}
}

// partFigures names the figures a part measures, of those that a runtime
// may not be able to measure (PartImage, PartWarm).
func (s *Suite) partFigures(part string) []string {
	switch part {
	case PartImage:
		return []string{FigImage, FigRawImage}
	case PartWarm:
		return s.warmFigs
	case PartCLI:
		e := quickest(s.Registry)
		return []string{figCLIUp(e), figCLIOwn(e)}
	}
	return nil
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

// hasStore reports whether rt has an image store (runtime.ImageStore).
func hasStore(rt runtime.ContainerRuntime) bool {
	_, ok := runtime.As[runtime.ImageStore](rt)
	return ok
}
