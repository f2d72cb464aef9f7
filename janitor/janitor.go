package janitor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/runtime"
)

// DefaultGrace is how long a sandbox is left alone after the runtime
// created it, whatever its owner's state: a sandbox is provisioned before
// its owner starts, and an in-flight provision must never lose what it
// has just made.
const DefaultGrace = 180 * time.Second

// DefaultConcurrency is how many orphans a sweep removes at once.
const DefaultConcurrency = 8

// ErrUndecided is what a sweep reports (in Report.Errors, matched with
// errors.Is) for a sandbox it keeps because nothing could tell whether its
// owner is alive. A sandbox whose owner cannot be read from its labels is
// reported with lifetime.ErrNoOwner or lifetime.ErrMalformedOwner.
var ErrUndecided = errors.New("owner undecided")

// ErrInvalid is the kind of every error of Options.Validate (errors.Is),
// which New returns for invalid options, and of Run's for a bad interval.
var ErrInvalid = errors.New("invalid option")

// Options configure a Janitor. The zero value is usable. The rule for
// every duration and count, as in provision.Options: zero means the
// default, a negative value is invalid, and "none" is said explicitly
// (NoGrace), never by a zero or a negative value.
type Options struct {
	// Prefix is the label prefix (default labels.DefaultPrefix), the same
	// as the provisioner's.
	Prefix string
	// Grace is the age, from the runtime's creation time, under which a
	// sandbox is never removed (default DefaultGrace).
	Grace time.Duration
	// NoGrace sweeps without a grace window: every sandbox whose owner is
	// gone is removed, however young. Grace must then be zero. A creation
	// time on a whole second still stands for the end of that second
	// (it may have been truncated), so a sandbox created within the last
	// second is still skipped.
	NoGrace bool
	// Liveness, when set, judges every owner instead of the default
	// (lifetime.Judge, from the sweep's own snapshot: an owner with a
	// Process is judged by lifetime.ProcessLiveness, any other is alive
	// while a container the runtime's tools know by Owner.Name exists, in
	// any state).
	Liveness lifetime.Liveness
	// Now is the clock ages are measured with (default time.Now).
	Now func() time.Time
	// Logger receives a one-line summary of each sweep in Run (default
	// slog.Default()).
	Logger *slog.Logger
	// DryRun decides without removing anything: Report.Removed then lists
	// what a real sweep would remove.
	DryRun bool
	// Concurrency bounds parallel removals (default DefaultConcurrency).
	Concurrency int
	// NoAdopt leaves adoption (runtime.Adopter: Kubernetes'
	// ownerReferences) to Provision and `sandboxer adopt`: the sweep then
	// never writes to a sandbox it keeps (a janitor without the right to
	// update pods, or a measurement of removal alone).
	NoAdopt bool
	// CallTimeout bounds each runtime call of a sweep: the snapshot, and
	// each removal's look-up and remove (default runtime.DefaultCallTimeout).
	// A runtime that hangs on one container costs that container's
	// removal at most twice this, and never the sweep or the loop.
	CallTimeout time.Duration
	// OnSweep, when set, is told the outcome of each sweep of Run, and how
	// long it took (a sweep cut short by Run's end is not reported): how
	// the CLI's janitor serves its metrics (janitor/metrics).
	OnSweep func(rep Report, err error, took time.Duration)
}

// Validate reports the first invalid option, as an error that matches
// ErrInvalid (and labels.ErrInvalidPrefix for a bad prefix). It checks
// the options as given, before defaults are applied.
func (o Options) Validate() error {
	if o.Prefix != "" {
		if err := labels.ValidatePrefix(o.Prefix); err != nil {
			return fmt.Errorf("janitor: %w: %w", ErrInvalid, err)
		}
	}
	switch {
	case o.Grace < 0:
		return fmt.Errorf("janitor: %w: grace %s: must not be negative (NoGrace: no grace window)", ErrInvalid, o.Grace)
	case o.NoGrace && o.Grace != 0:
		return fmt.Errorf("janitor: %w: grace %s with NoGrace: say one or the other", ErrInvalid, o.Grace)
	case o.Concurrency < 0:
		return fmt.Errorf("janitor: %w: concurrency %d: must not be negative", ErrInvalid, o.Concurrency)
	case o.CallTimeout < 0:
		return fmt.Errorf("janitor: %w: call timeout %s: must not be negative", ErrInvalid, o.CallTimeout)
	}
	return nil
}

// withDefaults fills the zero fields.
func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = labels.DefaultPrefix
	}
	if o.Grace == 0 && !o.NoGrace {
		o.Grace = DefaultGrace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = runtime.DefaultCallTimeout
	}
	return o
}

// Janitor sweeps one runtime for orphaned sandboxes. It is safe for
// concurrent use; concurrent sweeps (of this or another process) at worst
// both try to remove an orphan, which removal tolerates.
type Janitor struct {
	rt   runtime.ContainerRuntime
	opts Options
	keys labels.Keys
}

// New returns a Janitor for rt, with opts' zero fields set to defaults.
// It checks opts (Options.Validate: an invalid option is an ErrInvalid
// error naming it) but does not talk to the runtime.
func New(rt runtime.ContainerRuntime, opts Options) (*Janitor, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	return &Janitor{rt: rt, opts: opts, keys: labels.For(opts.Prefix)}, nil
}

// Sweep makes one pass: one runtime.Snapshot (every "<prefix>.sandbox=1"
// container, and the references of every container of the runtime), skips
// the sandboxes younger than the grace window, judges the distinct owners
// of the rest, and force-removes, with their anonymous volumes, the
// sandboxes whose owner is gone, each by the ID the snapshot listed
// (runtime.Destroy: a newer container under the name is never touched). Unless it is a dry run, it then
// lets a runtime that keeps host state of its own (runtime.Reconciler)
// remove what containers that no longer exist left of it.
//
// Nothing is removed on a guess: a sandbox without an owner label, with a
// malformed one, or whose owner could not be judged is kept and reported
// in Report.Errors. A failure on one container does not stop the sweep: it
// is recorded and the container is left for the next sweep. Every runtime
// call is bounded by Options.CallTimeout. The error is non-nil when the
// snapshot itself failed (the report is then empty) or when Report.Errors
// is not empty (Report.Err).
//
// The sweep then judges the owner networks (provision.OwnerNetworkName)
// alike: one whose owner is gone, past the grace window from its created
// label, that no sandbox left in the snapshot uses, is removed; one a
// container is still attached to (runtime.ErrInUse: the agent) is kept,
// and so is one whose owner is alive or undecided (Report.NetworksKept
// says why). A failure to list the networks is joined to the error.
func (j *Janitor) Sweep(ctx context.Context) (Report, error) {
	rep := Report{DryRun: j.opts.DryRun}
	sctx, cancel := context.WithTimeout(ctx, j.opts.CallTimeout)
	snap, err := j.rt.Snapshot(sctx, j.keys.Sandboxes())
	cancel()
	if err != nil {
		return rep, fmt.Errorf("janitor: list sandboxes: %w", err)
	}
	now := j.opts.Now()

	var orphans []Sandbox
	byOwner := make(map[lifetime.Owner][]Sandbox)
	adoptable := make(map[string][]Sandbox)
	listed := make(map[string]runtime.Container, len(snap.Matched))
	for _, c := range snap.Matched {
		sb, ownerErr := j.sandbox(c, now)
		listed[sb.ID] = c
		if ownerErr == nil && sb.Owner.IsContainer() && c.AdoptedBy != sb.Owner.Name && snap.Exists(sb.Owner.Name) {
			adoptable[sb.Owner.Name] = append(adoptable[sb.Owner.Name], sb)
		}
		switch {
		case c.Created.IsZero():
			// Never remove what cannot be aged: it may be in grace.
			rep.Errors = append(rep.Errors, Failure{sb, fmt.Errorf("janitor: %s: the runtime reports no creation time", sb.Name)})
		case sb.Age < j.opts.Grace:
			rep.Skipped = append(rep.Skipped, sb)
		case ownerErr != nil:
			rep.Errors = append(rep.Errors, Failure{sb, fmt.Errorf("janitor: %s: kept: %w", sb.Name, ownerErr)})
		default:
			byOwner[sb.Owner] = append(byOwner[sb.Owner], sb)
		}
	}

	if len(byOwner) > 0 {
		owners := make([]lifetime.Owner, 0, len(byOwner))
		for o := range byOwner {
			owners = append(owners, o)
		}
		slices.SortFunc(owners, func(a, b lifetime.Owner) int { return cmp.Compare(a.String(), b.String()) })
		actx, cancel := context.WithTimeout(ctx, j.opts.CallTimeout)
		verdicts, lerr := j.alive(actx, owners, snap)
		cancel()
		for _, o := range owners {
			alive, cause := lifetime.Verdict(verdicts, lerr, o)
			switch {
			case cause != nil:
				for _, sb := range byOwner[o] {
					rep.Errors = append(rep.Errors, Failure{sb, fmt.Errorf("janitor: %s: kept: %w: %s: %w", sb.Name, ErrUndecided, o, cause)})
				}
			case alive:
				rep.Kept = append(rep.Kept, byOwner[o]...)
			default:
				orphans = append(orphans, byOwner[o]...)
			}
		}
	}

	if j.opts.DryRun {
		rep.Removed = orphans
	} else {
		j.remove(ctx, orphans, listed, &rep)
		j.adopt(ctx, adoptable, listed, &rep)
	}
	netErr := j.sweepNetworks(ctx, snap, now, &rep)
	if !j.opts.DryRun {
		j.reconcile(ctx)
	}

	for _, l := range [][]Sandbox{rep.Removed, rep.Vanished, rep.Kept, rep.Skipped, rep.Adopted} {
		slices.SortFunc(l, func(a, b Sandbox) int { return cmp.Compare(a.Name, b.Name) })
	}
	slices.SortFunc(rep.Errors, func(a, b Failure) int { return cmp.Compare(a.Sandbox.Name, b.Sandbox.Name) })
	return rep, errors.Join(rep.Err(), netErr)
}

// adopt hands the sandboxes whose owner container exists, and that their
// owner has not adopted yet, to a runtime that removes a container with
// its owner (runtime.Adopter), one call per owner, each within
// Options.CallTimeout. The sandboxes stay in their list (kept, skipped)
// and are added to rep.Adopted; a failure is logged and tried again on the
// next sweep: the janitor still covers the sandbox meanwhile.
func (j *Janitor) adopt(ctx context.Context, adoptable map[string][]Sandbox, listed map[string]runtime.Container, rep *Report) {
	ad, ok := j.rt.(runtime.Adopter)
	if !ok || j.opts.NoAdopt || len(adoptable) == 0 {
		return
	}
	for _, owner := range slices.Sorted(maps.Keys(adoptable)) {
		sbs := adoptable[owner]
		cs := make([]runtime.Container, len(sbs))
		for i, sb := range sbs {
			cs[i] = listed[sb.ID]
		}
		actx, cancel := context.WithTimeout(ctx, j.opts.CallTimeout)
		err := ad.Adopt(actx, owner, cs)
		cancel()
		if err != nil {
			j.opts.Logger.Warn("janitor: adopt sandboxes by their owner", "runtime", j.rt.Name(), "owner", owner, "sandboxes", len(sbs), "err", err)
			continue
		}
		rep.Adopted = append(rep.Adopted, sbs...)
	}
}

// reconcile lets an adapter that keeps host state of its own
// (runtime.Reconciler) remove what containers that are gone left of it,
// within Options.CallTimeout. A failure is logged and left for the next
// sweep: it concerns no sandbox of the report.
func (j *Janitor) reconcile(ctx context.Context) {
	rc, ok := j.rt.(runtime.Reconciler)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, j.opts.CallTimeout)
	defer cancel()
	if err := rc.Reconcile(ctx); err != nil {
		j.opts.Logger.Warn("janitor: reconcile the runtime's host state", "runtime", j.rt.Name(), "err", err)
	}
}

// alive judges owners: with Options.Liveness when set, else by the one
// rule of lifetime.Judge from the sweep's snapshot.
func (j *Janitor) alive(ctx context.Context, owners []lifetime.Owner, snap runtime.Snapshot) (map[lifetime.Owner]bool, error) {
	if j.opts.Liveness != nil {
		return j.opts.Liveness.Alive(ctx, owners)
	}
	return lifetime.Judge(ctx, owners, snap)
}

// sandbox reads a listed container's labels. The error (lifetime.ErrNoOwner,
// lifetime.ErrMalformedOwner) says why the owner cannot be judged.
func (j *Janitor) sandbox(c runtime.Container, now time.Time) (Sandbox, error) {
	sb := Sandbox{
		ID:      c.ID,
		Name:    c.Name,
		Engine:  c.Labels[j.keys.Engine],
		State:   c.State,
		Status:  c.Status(),
		Created: c.Created,
		Age:     now.Sub(latestCreation(c.Created)),
	}
	if sb.Name == "" {
		sb.Name = c.ID
	}
	var err error
	sb.Owner, err = lifetime.FromLabels(j.keys, c.Labels)
	return sb, err
}

// latestCreation is the latest instant a reported creation time may stand
// for. A time on a whole second may have been truncated (Docker's list
// reports seconds only): it is taken as the end of that second, so that
// truncation can never shorten the grace window. A precise time that
// happens to fall on a whole second only gets a little more grace.
func latestCreation(created time.Time) time.Time {
	if created.Nanosecond() == 0 {
		return created.Add(time.Second - time.Nanosecond)
	}
	return created
}

// remove destroys each orphan, in parallel, and files it in rep: removed,
// vanished (gone before its removal), or an error. runtime.Destroy
// removes only the listed container, by its ID, which no other container
// ever gets, so a sandbox that a provisioner created under the same name
// after the snapshot is never touched.
func (j *Janitor) remove(ctx context.Context, orphans []Sandbox, listed map[string]runtime.Container, rep *Report) {
	type result struct {
		outcome runtime.Outcome
		err     error
	}
	res := make([]result, len(orphans))
	g := new(errgroup.Group)
	g.SetLimit(j.opts.Concurrency)
	for i, sb := range orphans {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				// Shutting down: a removal under way finishes (Destroy
				// outlives its caller), the ones not yet started wait
				// for the next sweep.
				res[i] = result{err: err}
				return nil
			}
			out, err := runtime.Destroy(ctx, j.rt, listed[sb.ID], j.opts.CallTimeout)
			res[i] = result{out, err}
			return nil
		})
	}
	_ = g.Wait() // the goroutines report through res
	for i, sb := range orphans {
		switch r := res[i]; {
		case r.err != nil:
			rep.Errors = append(rep.Errors, Failure{sb, fmt.Errorf("janitor: remove orphan %s (owner %s): %w", sb.Name, sb.Owner, r.err)})
		case r.outcome == runtime.Removed:
			rep.Removed = append(rep.Removed, sb)
		default:
			rep.Vanished = append(rep.Vanished, sb)
		}
	}
}

// Run sweeps once at start, then once per interval, until ctx ends; it
// then returns nil. A sweep that fails is logged and retried at the next
// tick: a janitor outlives a runtime restart. Each sweep that removed
// something, or failed on something, logs one summary line. An interval
// that is not positive is returned at once (ErrInvalid), before any sweep.
func (j *Janitor) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("janitor: run: %w: interval must be positive, got %s", ErrInvalid, interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for ctx.Err() == nil {
		j.sweepAndLog(ctx)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return nil
}

// sweepLine is a sweep's summary: the sandboxes', then the networks'.
func sweepLine(rep Report) string {
	if n := rep.NetworksString(); n != "" {
		return rep.String() + "; " + n
	}
	return rep.String()
}

func (j *Janitor) sweepAndLog(ctx context.Context) {
	start := time.Now()
	rep, err := j.Sweep(ctx)
	if ctx.Err() != nil {
		return // shutting down: a cut-short sweep is not news
	}
	took := time.Since(start)
	if j.opts.OnSweep != nil {
		j.opts.OnSweep(rep, err, took)
	}
	attrs := []any{
		"runtime", j.rt.Name(),
		"prefix", j.opts.Prefix,
		"removed", len(rep.Removed),
		"kept", len(rep.Kept),
		"skipped", len(rep.Skipped),
		"errors", len(rep.Errors),
		"adopted", len(rep.Adopted),
		"took", took.Round(time.Millisecond),
	}
	if len(rep.Removed) > 0 {
		attrs = append(attrs, "sandboxes", names(rep.Removed))
	}
	if len(rep.NetworksRemoved)+len(rep.NetworksKept) > 0 {
		attrs = append(attrs, "networks_removed", len(rep.NetworksRemoved), "networks_kept", len(rep.NetworksKept))
	}
	switch {
	case err != nil:
		j.opts.Logger.Warn("janitor: sweep: "+sweepLine(rep), append(attrs, "err", err)...)
	case len(rep.Removed) > 0 || len(rep.NetworksRemoved) > 0:
		j.opts.Logger.Info("janitor: sweep: "+sweepLine(rep), attrs...)
	}
}
