package janitor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/runtime"
)

// DefaultGrace is how long a sandbox is left alone after the runtime
// created it, whatever its owner's state: a sandbox is provisioned before
// its owner starts, and an in-flight provision must never lose what it
// has just made.
const DefaultGrace = 180 * time.Second

// DefaultConcurrency is how many orphans a sweep removes at once.
const DefaultConcurrency = 8

// Options configure a Janitor. The zero value is usable.
type Options struct {
	// Prefix is the label prefix (default DefaultPrefix), the same as the
	// provisioner's.
	Prefix string
	// Grace is the age, from the runtime's creation time, under which a
	// sandbox is never removed (default DefaultGrace).
	Grace time.Duration
	// Liveness judges owners (default DefaultLiveness on the runtime).
	Liveness Liveness
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
}

// Janitor sweeps one runtime for orphaned sandboxes. It is safe for
// concurrent use; concurrent sweeps (of this or another process) at worst
// both try to remove an orphan, which removal tolerates.
type Janitor struct {
	rt   runtime.ContainerRuntime
	opts Options
}

// New returns a Janitor for rt, with opts' zero fields set to defaults.
func New(rt runtime.ContainerRuntime, opts Options) *Janitor {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Liveness == nil {
		opts.Liveness = DefaultLiveness(rt)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	return &Janitor{rt: rt, opts: opts}
}

// Sweep makes one pass: it lists every "<prefix>.sandbox=1" container (one
// List call), skips those younger than the grace window, asks the
// Liveness about the distinct owners of the rest (one call), and kills
// then removes, with their anonymous volumes, the sandboxes whose owner is
// gone or missing.
//
// A failure on one container does not stop the sweep: it is recorded in
// Report.Errors and the container is left for the next sweep. The error
// is non-nil when the list itself failed (the report is then empty) or
// when Report.Errors is not empty (Report.Err).
func (j *Janitor) Sweep(ctx context.Context) (Report, error) {
	rep := Report{DryRun: j.opts.DryRun}
	listed, err := j.rt.List(ctx, map[string]string{SandboxLabel(j.opts.Prefix): "1"})
	if err != nil {
		return rep, fmt.Errorf("janitor: list sandboxes: %w", err)
	}
	now := j.opts.Now()

	var orphans []Sandbox
	byOwner := make(map[Owner][]Sandbox)
	for _, c := range listed {
		sb, ownerErr := j.sandbox(c, now)
		switch {
		case c.Created.IsZero():
			// Never remove what cannot be aged: it may be in grace.
			rep.Errors = append(rep.Errors, Failure{sb, fmt.Errorf("janitor: %s: the runtime reports no creation time", sb.Name)})
		case sb.Age < j.opts.Grace:
			rep.Skipped = append(rep.Skipped, sb)
		case ownerErr != nil || sb.Owner == (Owner{}):
			// No (usable) owner label: nobody can claim it.
			orphans = append(orphans, sb)
		default:
			byOwner[sb.Owner] = append(byOwner[sb.Owner], sb)
		}
	}

	if len(byOwner) > 0 {
		owners := make([]Owner, 0, len(byOwner))
		for o := range byOwner {
			owners = append(owners, o)
		}
		slices.SortFunc(owners, func(a, b Owner) int { return cmp.Compare(a.String(), b.String()) })
		verdicts, lerr := j.opts.Liveness.Alive(ctx, owners)
		for _, o := range owners {
			alive, ok := verdicts[o]
			switch {
			case !ok:
				cause := lerr
				if cause == nil {
					cause = errors.New("liveness gave no verdict")
				}
				for _, sb := range byOwner[o] {
					rep.Errors = append(rep.Errors, Failure{sb, fmt.Errorf("janitor: %s: owner %s undecided: %w", sb.Name, o, cause)})
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
		rep.Removed, rep.Errors = j.remove(ctx, orphans, rep.Errors)
	}

	for _, l := range [][]Sandbox{rep.Removed, rep.Kept, rep.Skipped} {
		slices.SortFunc(l, func(a, b Sandbox) int { return cmp.Compare(a.Name, b.Name) })
	}
	slices.SortFunc(rep.Errors, func(a, b Failure) int { return cmp.Compare(a.Sandbox.Name, b.Sandbox.Name) })
	return rep, rep.Err()
}

// sandbox reads a listed container's labels. The error reports a malformed
// process identity, which makes the sandbox ownerless.
func (j *Janitor) sandbox(c runtime.Container, now time.Time) (Sandbox, error) {
	p := j.opts.Prefix
	sb := Sandbox{
		ID:      c.ID,
		Name:    c.Name,
		Engine:  c.Labels[EngineLabel(p)],
		State:   c.State,
		Created: c.Created,
		Age:     now.Sub(latestCreation(c.Created)),
	}
	if sb.Name == "" {
		sb.Name = c.ID
	}
	proc, _, err := processFromLabels(p, c.Labels)
	if err != nil {
		return sb, err
	}
	sb.Owner = Owner{Name: c.Labels[OwnerLabel(p)], Process: proc}
	return sb, nil
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

// remove kills then removes each orphan, in parallel. It removes by ID, so
// that a same-named sandbox that a provisioner created after the list
// (replacing a stale one) is never touched.
func (j *Janitor) remove(ctx context.Context, orphans []Sandbox, failures []Failure) ([]Sandbox, []Failure) {
	errs := make([]error, len(orphans))
	g := new(errgroup.Group)
	g.SetLimit(j.opts.Concurrency)
	for i, sb := range orphans {
		g.Go(func() error {
			errs[i] = j.removeOne(ctx, sb)
			return nil
		})
	}
	_ = g.Wait() // the goroutines report through errs
	var removed []Sandbox
	for i, sb := range orphans {
		if errs[i] != nil {
			failures = append(failures, Failure{sb, errs[i]})
		} else {
			removed = append(removed, sb)
		}
	}
	return removed, failures
}

func (j *Janitor) removeOne(ctx context.Context, sb Sandbox) error {
	ref := sb.ID
	if ref == "" {
		ref = sb.Name
	}
	// Kill first: the data is on tmpfs and is thrown away, so there is
	// nothing to wait a graceful stop out for. A kill that fails for any
	// reason but absence does not stop the forced remove.
	killErr := j.rt.Kill(ctx, ref)
	if errors.Is(killErr, runtime.ErrNotFound) {
		killErr = nil
	}
	if err := j.rt.Remove(ctx, ref); err != nil {
		return fmt.Errorf("janitor: remove orphan %s (owner %q): %w", sb.Name, sb.Owner, errors.Join(err, killErr))
	}
	return nil
}

// Run sweeps once at start, then once per interval, until ctx ends; it
// then returns nil. A sweep that fails is logged and retried at the next
// tick: a janitor outlives a runtime restart. Each sweep that removed
// something, or failed on something, logs one summary line.
func (j *Janitor) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("janitor: run: interval must be positive, got %s", interval)
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

func (j *Janitor) sweepAndLog(ctx context.Context) {
	start := time.Now()
	rep, err := j.Sweep(ctx)
	if ctx.Err() != nil {
		return // shutting down: a cut-short sweep is not news
	}
	attrs := []any{
		"runtime", j.rt.Name(),
		"prefix", j.opts.Prefix,
		"removed", len(rep.Removed),
		"kept", len(rep.Kept),
		"skipped", len(rep.Skipped),
		"errors", len(rep.Errors),
		"took", time.Since(start).Round(time.Millisecond),
	}
	if len(rep.Removed) > 0 {
		attrs = append(attrs, "sandboxes", names(rep.Removed))
	}
	switch {
	case err != nil:
		j.opts.Logger.Warn("janitor: sweep: "+rep.String(), append(attrs, "err", err)...)
	case len(rep.Removed) > 0:
		j.opts.Logger.Info("janitor: sweep: "+rep.String(), attrs...)
	}
}
