package bench

import "fmt"

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
	FigOwnersOK      = "owners at once: provisioned"
	FigOwnersP50     = "owners at once: p50"
	FigOwnersP95     = "owners at once: p95"
	FigOwnersExecs   = "owners at once: probe execs"
	FigOwnersExecMed = "owners at once: one probe exec, median"
	FigRawOwnersOK   = "baseline: owners at once: logged in"
	FigRawOwnersP50  = "baseline: owners at once: p50"
	FigRawOwnersP95  = "baseline: owners at once: p95"
	FigNetCreate     = "  owner network: create"
	FigNetRemove     = "  owner network: remove"
)

// FigRealKept is the name of the real sweep of n sandboxes whose owner lives.
func FigRealKept(n int) string { return fmt.Sprintf("janitor sweep, %d real, owners alive", n) }

// FigRawList is the name of the floor's list of n sandboxes.
func FigRawList(n int) string { return fmt.Sprintf("baseline: list %d", n) }

// FigRealGone is the name of the real sweep of n orphans.
func FigRealGone(n int) string { return fmt.Sprintf("janitor sweep, %d real, all orphans", n) }

// FigRawRemoveN is the name of the floor's forced removal of n sandboxes.
func FigRawRemoveN(n int) string { return fmt.Sprintf("baseline: force-remove %d, 8 at once", n) }

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
func figRun(engine string) string {
	return "  " + engine + ": the run request (create, start, inspect)"
}
func figBeforeRun(engine string) string {
	return "  " + engine + ": call start to run request (validate, list, image check)"
}
func figRawRun(engine string) string {
	return "  baseline: " + engine + " run only (create, start, port)"
}
func figAttempts(engine string) string { return "  " + engine + ": readiness attempts" }
func figPassing(engine string) string  { return "  " + engine + ": the passing probe attempt (exec)" }
func figExecTime(engine string) string {
	return "  " + engine + ": time inside probe execs, all attempts"
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
		add(&Figure{Name: FigProvision(n), Unit: UnitMS, Baseline: FigBaseline(n), Target: ratio(1.05), Note: "Provision, " + string(s.mode) + " mode, until it returns ready"})
		add(&Figure{Name: figStarted(n), Unit: UnitMS, Baseline: figRawRun(n), Note: "validate, list, image check, run (create, start, inspect)"})
		add(&Figure{Name: figBeforeRun(n), Unit: UnitMS, Note: "what a provision does before its Run; the list runs beside the image check"})
		add(&Figure{Name: figRun(n), Unit: UnitMS, Baseline: figRawRun(n), Note: "the provisioner's Run, as the runtime answered it"})
		add(&Figure{Name: figRawRun(n), Unit: UnitMS, Note: "the baseline's run request alone"})
		add(&Figure{Name: figReady(n), Unit: UnitMS})
		add(&Figure{Name: figAttempts(n), Unit: UnitCount})
		add(&Figure{Name: figPassing(n), Unit: UnitMS, Note: "every step of the last attempt, exec included"})
		add(&Figure{Name: figExecTime(n), Unit: UnitMS, Note: "the rest of started-to-ready is the pauses between attempts and the port check"})
	}
	add(&Figure{Name: FigTrio, Unit: UnitMS, Target: ratio(1.10), Compare: FigRawTrio, Note: "vs the slowest single-engine baseline"})
	add(&Figure{Name: FigRawTrio, Unit: UnitMS, Note: "runtime API, the three started together; until the last login"})
	add(&Figure{Name: FigTrioSeq, Unit: UnitMS, Baseline: FigTrio, Note: "three Provision calls in a row; the ratio is what parallelism buys"})
	add(&Figure{Name: FigTeardown, Unit: UnitMS, Baseline: FigRawRemoveTrio, Target: ratio(1.05), Note: "Teardown of a ready trio (list; per sandbox: one look-up and one forced remove by its ID)"})
	add(&Figure{Name: FigRawRemoveTrio, Unit: UnitMS, Note: "runtime API remove --force of a ready trio"})
	add(&Figure{Name: FigNetCreate, Unit: UnitMS, Note: "the runtime's CreateNetwork of an owner network, every provision of the rounds (inside the provision and trio figures)"})
	add(&Figure{Name: FigNetRemove, Unit: UnitMS, Note: "the runtime's RemoveNetwork of an owner network with its last sandbox (inside the teardown figures)"})
	s.declareCLI()
	add(&Figure{Name: FigImage, Unit: UnitMS, Baseline: FigRawImage, Target: maxMS(10), Note: "the adapter's ImageExists (what Provision asks first)"})
	add(&Figure{Name: FigRawImage, Unit: UnitMS, Note: "runtime API image inspect"})
	add(&Figure{Name: FigFakeKept, Unit: UnitMS, Baseline: FigFakeList, Target: maxMS(50), Note: fmt.Sprintf("%d sandboxes of %d live owners", s.FakeSweep, s.FakeSweep/2)})
	add(&Figure{Name: FigFakeKeptList, Unit: UnitCount, Target: maxMS(1), Note: "Snapshot + List calls: one Snapshot holds the sandboxes and every owner"})
	add(&Figure{Name: FigFakeGone, Unit: UnitMS, Baseline: FigFakeList, Target: maxMS(50), Note: "every sandbox killed and removed"})
	add(&Figure{Name: FigFakeGoneList, Unit: UnitCount, Target: maxMS(1), Note: "removal adds, per orphan, one look-up by ID (removed or gone) before its remove"})
	add(&Figure{Name: FigFakeList, Unit: UnitMS, Note: "one List by label on the fake"})
	add(&Figure{Name: FigRealKept(s.RealSweep), Unit: UnitMS, Baseline: FigRawList(s.RealSweep), Note: fmt.Sprintf("%d %s sandboxes, owner container running", s.RealSweep, s.SweepEngine)})
	add(&Figure{Name: FigRawList(s.RealSweep), Unit: UnitMS, Note: "runtime API list by label"})
	add(&Figure{Name: FigRealGone(s.RealSweep), Unit: UnitMS, Baseline: FigRawRemoveN(s.RealSweep), Note: "owner gone: kill and remove every sandbox"})
	add(&Figure{Name: FigRawRemoveN(s.RealSweep), Unit: UnitMS, Note: "runtime API remove --force, as many at once as the janitor"})
	add(&Figure{Name: FigOwnersOK, Unit: UnitCount, Target: &Target{Kind: TargetMin, Value: float64(s.Owners)}, Note: fmt.Sprintf("of %d owners provisioning %s at once", s.Owners, s.OwnersEngine)})
	add(&Figure{Name: FigOwnersP50, Unit: UnitMS, Baseline: FigRawOwnersP50, Target: ratio(1.10), Note: "latency of each owner's Provision from the common start"})
	add(&Figure{Name: FigOwnersP95, Unit: UnitMS, Baseline: FigRawOwnersP95, Target: ratio(1.10)})
	add(&Figure{Name: FigOwnersExecs, Unit: UnitCount, Note: "docker/podman/ctr exec calls made by the probes of all owners"})
	add(&Figure{Name: FigOwnersExecMed, Unit: UnitMS, Note: "one " + s.OwnersEngine + " probe exec under that load"})
	add(&Figure{Name: FigRawOwnersOK, Unit: UnitCount, Note: fmt.Sprintf("of %d runtime API runs + logins at once", s.Owners)})
	add(&Figure{Name: FigRawOwnersP50, Unit: UnitMS})
	add(&Figure{Name: FigRawOwnersP95, Unit: UnitMS})
	for _, n := range names {
		add(&Figure{Name: FigCapacity(n, s.memory(n)), Unit: UnitMiB, Note: "1 kB records through the real client until the engine's own full error"})
	}
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
	if f := s.report.Figure(FigWarmTrio); f != nil {
		f.Baseline = slowest
	}
}

// sample records one measurement.
// note sets a declared figure's note.
func (s *Suite) note(name, note string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.report.Figure(name); f != nil {
		f.Note = note
	}
}

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
