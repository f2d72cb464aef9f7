package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/janitor/metrics"
)

// janitorOptions are the janitor options of gc and janitor: the label
// prefix, and --grace, where 0s means no grace window at all. They are
// checked before any runtime is contacted.
func (a *app) janitorOptions(grace time.Duration) (janitor.Options, error) {
	if err := durationFlag("grace", grace); err != nil {
		return janitor.Options{}, err
	}
	opts := janitor.Options{Prefix: a.labelPrefix, Grace: grace, NoGrace: grace == 0, Logger: a.log}
	if err := opts.Validate(); err != nil {
		return janitor.Options{}, &usageError{err}
	}
	return opts, nil
}

// sweptJSON is one sandbox of a sweep report, for --format json.
type sweptJSON struct {
	Name   string `json:"name"`
	ID     string `json:"id"`
	Engine string `json:"engine"`
	Owner  string `json:"owner"`
	State  string `json:"state"`
	// Status is the state with why an exited sandbox ended, as ls says it.
	Status     string `json:"status"`
	AgeSeconds int64  `json:"age_seconds"`
	Error      string `json:"error,omitempty"`
	// Runtime is the runtime the sandbox is on, as ls names it.
	Runtime string `json:"runtime"`
}

type reportJSON struct {
	DryRun  bool        `json:"dry_run"`
	Removed []sweptJSON `json:"removed"`
	// Vanished: orphans that were gone when the sweep came to remove
	// them.
	Vanished []sweptJSON `json:"vanished"`
	Kept     []sweptJSON `json:"kept"`
	Skipped  []sweptJSON `json:"skipped"`
	Errors   []sweptJSON `json:"errors"`
	// Adopted: sandboxes (also kept or skipped) the sweep handed to their
	// owner, on a runtime that removes them itself with the owner.
	Adopted []sweptJSON `json:"adopted"`
	// NetworksRemoved and NetworksKept are the owner networks the sweep
	// removed (in a dry run: would remove) and kept, with why.
	NetworksRemoved []networkJSON `json:"networks_removed"`
	NetworksKept    []networkJSON `json:"networks_kept"`
	Summary         string        `json:"summary"`
	// Runtimes are the runtimes swept, as ls names them.
	Runtimes []string `json:"runtimes"`
}

// networkJSON is one owner network of a sweep report, for --format json.
type networkJSON struct {
	Name       string `json:"name"`
	Owner      string `json:"owner"`
	AgeSeconds int64  `json:"age_seconds"`
	// Why says why a kept network was kept.
	Why     string `json:"why,omitempty"`
	Error   string `json:"error,omitempty"`
	Runtime string `json:"runtime"`
}

func networksJSON(ns []janitor.Network, on string) []networkJSON {
	out := make([]networkJSON, 0, len(ns))
	for _, n := range ns {
		j := networkJSON{Name: n.Name, Owner: n.Owner.String(), AgeSeconds: int64(n.Age / time.Second), Why: n.Why, Runtime: on}
		if n.Err != nil {
			j.Error = oneLine(n.Err.Error())
		}
		out = append(out, j)
	}
	return out
}

// sweep is one runtime's sweep.
type sweep struct {
	on  string // the target's label
	rep janitor.Report
}

func swept(sbs []janitor.Sandbox, on string) []sweptJSON {
	out := make([]sweptJSON, 0, len(sbs))
	for _, s := range sbs {
		out = append(out, sweptOf(s, on))
	}
	return out
}

func sweptOf(s janitor.Sandbox, on string) sweptJSON {
	return sweptJSON{Name: s.Name, ID: s.ID, Engine: s.Engine, Owner: s.Owner.String(), State: string(s.State), Status: s.Status, AgeSeconds: int64(s.Age / time.Second), Runtime: on}
}

// sandboxLists are the sandbox lists of a sweep's report, in the order
// gc prints them, each with the word its text lines start with ("" : the
// removal verb), what those lines end with, and its list in the JSON
// report. Report.Errors, whose entries carry their error, follows them.
var sandboxLists = []struct {
	word, note string
	of         func(*janitor.Report) *[]janitor.Sandbox
	json       func(*reportJSON) *[]sweptJSON
}{
	{"", "", func(r *janitor.Report) *[]janitor.Sandbox { return &r.Removed }, func(j *reportJSON) *[]sweptJSON { return &j.Removed }},
	{"vanished", "(gone before its removal)", func(r *janitor.Report) *[]janitor.Sandbox { return &r.Vanished }, func(j *reportJSON) *[]sweptJSON { return &j.Vanished }},
	{"kept", "", func(r *janitor.Report) *[]janitor.Sandbox { return &r.Kept }, func(j *reportJSON) *[]sweptJSON { return &j.Kept }},
	{"skipped", "(in grace)", func(r *janitor.Report) *[]janitor.Sandbox { return &r.Skipped }, func(j *reportJSON) *[]sweptJSON { return &j.Skipped }},
	{"adopted", "(removed with its owner from now on)", func(r *janitor.Report) *[]janitor.Sandbox { return &r.Adopted }, func(j *reportJSON) *[]sweptJSON { return &j.Adopted }},
}

// total adds the sweeps up, for the summary line.
func total(sweeps []sweep, dryRun bool) janitor.Report {
	sum := janitor.Report{DryRun: dryRun}
	for _, s := range sweeps {
		for _, l := range sandboxLists {
			*l.of(&sum) = append(*l.of(&sum), *l.of(&s.rep)...)
		}
		sum.Errors = append(sum.Errors, s.rep.Errors...)
		sum.NetworksRemoved = append(sum.NetworksRemoved, s.rep.NetworksRemoved...)
		sum.NetworksKept = append(sum.NetworksKept, s.rep.NetworksKept...)
	}
	return sum
}

// summary is the total's one line, with the runtimes swept.
func summary(sweeps []sweep, dryRun bool) string {
	ons := make([]string, len(sweeps))
	for i, s := range sweeps {
		ons[i] = s.on
	}
	sum := total(sweeps, dryRun)
	line := sum.String() + " on " + strings.Join(ons, ", ")
	if n := sum.NetworksString(); n != "" {
		line += "; " + n
	}
	return line
}

func (a *app) gcCmd() *cobra.Command {
	var (
		grace   time.Duration
		dryRun  bool
		noAdopt bool
		format  string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "gc [--grace 180s] [--dry-run]",
		Short: "One janitor sweep: remove sandboxes whose owner is gone",
		Long: `Make one janitor sweep over this label prefix's sandboxes: those whose owner
(a container, or the process of a ` + "`run`" + `) is gone and that are older than the
grace window are killed and removed. Prints what it removed (or, with
--dry-run, would remove), vanished (gone before the sweep removed it), kept
(owner alive), skipped (in grace) and could not decide, each with the
runtime it is on. Then the owner networks alike: removed once their owner
is gone, they are past the grace window and no sandbox is on them; kept,
with why (in grace, a sandbox on it, owner alive or undecided, a container
still attached). Exits 1 when a sandbox or a network could not be judged
or removed.

` + lookRuleHelp,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			jopts, err := a.janitorOptions(grace)
			if err != nil {
				return err
			}
			jopts.NoAdopt = noAdopt
			jopts.DryRun = dryRun
			if err := checkTimeout(timeout); err != nil {
				return err
			}
			if format != "text" && format != "json" {
				return usagef("--format %q: want text or json", format)
			}
			if err := a.provisionOptions().Validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			l, err := a.lookAt(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			sweeps := make([]sweep, len(l.targets))
			errs := onEach(ctx, l.targets, timeout, func(ctx context.Context, i int, t target) error {
				o := jopts
				o.Logger = a.log.With("runtime", t.label)
				sweeps[i].on = t.label
				j, err := janitor.New(t.RT, o)
				if err != nil {
					return err
				}
				sweeps[i].rep, err = j.Sweep(ctx)
				return err
			})
			err = joinErrors(append(errs, l.missing)...)
			if format == "json" {
				out := gcJSON(sweeps, dryRun)
				if werr := writeJSON(a.io.Out, out); werr != nil {
					return joinErrors(werr, err)
				}
			} else if !a.quiet || err != nil {
				writeReport(a.io.Out, sweeps, dryRun)
			}
			if err != nil {
				return fmt.Errorf("gc: %w", err)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.DurationVar(&grace, "grace", janitor.DefaultGrace, "leave sandboxes younger than this alone (0s: none)")
	f.BoolVar(&noAdopt, "no-adopt", false, "never adopt kept sandboxes by their owner (Kubernetes ownerReferences): leave it to up/spawn and `sandboxer adopt`")
	f.BoolVar(&dryRun, "dry-run", false, "report what would be removed, remove nothing")
	f.StringVarP(&format, "format", "o", "text", "output: text or json")
	timeoutFlag(f, &timeout)
	return cmd
}

// gcJSON is gc's report of sweeps for --format json: every list is [],
// not null, when it is empty.
func gcJSON(sweeps []sweep, dryRun bool) reportJSON {
	out := reportJSON{DryRun: dryRun, Errors: []sweptJSON{}, NetworksRemoved: []networkJSON{}, NetworksKept: []networkJSON{}, Summary: summary(sweeps, dryRun), Runtimes: []string{}}
	for _, l := range sandboxLists {
		*l.json(&out) = []sweptJSON{}
	}
	for _, s := range sweeps {
		out.Runtimes = append(out.Runtimes, s.on)
		for _, l := range sandboxLists {
			*l.json(&out) = append(*l.json(&out), swept(*l.of(&s.rep), s.on)...)
		}
		for _, f := range s.rep.Errors {
			e := sweptOf(f.Sandbox, s.on)
			e.Error = oneLine(f.Err.Error())
			out.Errors = append(out.Errors, e)
		}
		out.NetworksRemoved = append(out.NetworksRemoved, networksJSON(s.rep.NetworksRemoved, s.on)...)
		out.NetworksKept = append(out.NetworksKept, networksJSON(s.rep.NetworksKept, s.on)...)
	}
	return out
}

// writeReport prints one line per sandbox, list by list (sandboxLists,
// then the errors), each list across the sweeps in order; then the owner
// networks alike; then the summary.
func writeReport(w io.Writer, sweeps []sweep, dryRun bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	line := func(what string, s janitor.Sandbox, on, note string) {
		if note != "" {
			note = "\t" + note
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\towner %s\t%s\tage %s\ton %s%s\n", cmp.Or(what, verb), s.Name, s.Engine, s.Owner, s.Status, humanAge(s.Age), on, note)
	}
	for _, l := range sandboxLists {
		for _, sw := range sweeps {
			for _, s := range *l.of(&sw.rep) {
				line(l.word, s, sw.on, l.note)
			}
		}
	}
	for _, sw := range sweeps {
		for _, f := range sw.rep.Errors {
			line("error", f.Sandbox, sw.on, oneLine(f.Err.Error()))
		}
	}
	for _, sw := range sweeps {
		for _, n := range sw.rep.NetworksRemoved {
			fmt.Fprintf(tw, "%s\tnetwork %s\towner %s\tage %s\ton %s\n", verb, n.Name, n.Owner, humanAge(n.Age), sw.on)
		}
	}
	for _, sw := range sweeps {
		for _, n := range sw.rep.NetworksKept {
			note := "(" + n.Why + ")"
			if n.Err != nil {
				note += "\t" + oneLine(n.Err.Error())
			}
			fmt.Fprintf(tw, "kept\tnetwork %s\towner %s\tage %s\ton %s\t%s\n", n.Name, n.Owner, humanAge(n.Age), sw.on, note)
		}
	}
	tw.Flush()
	fmt.Fprintln(w, summary(sweeps, dryRun))
}

func (a *app) janitorCmd() *cobra.Command {
	var (
		grace, interval time.Duration
		noAdopt         bool
		metricsAddr     string
		metricsPublic   bool
	)
	cmd := &cobra.Command{
		Use:   "janitor [--interval 30s] [--grace 180s] [--metrics-addr 127.0.0.1:9464]",
		Short: "Sweep for orphaned sandboxes at start and on every tick, until a signal stops it",
		Long: `Run the janitor loop: a sweep at start, then one per --interval, until
SIGINT, SIGTERM, SIGHUP or SIGQUIT (then exit 0). A failed sweep is logged
and retried at the next tick, so the loop outlives a runtime restart. It
needs no container of its own: run it as a service next to the runtime, or
inside the orchestrator. It sweeps one runtime, chosen as up chooses it:
run one janitor per runtime (--runtime) on a host with several.

--metrics-addr serves Prometheus metrics at /metrics (off by default):
sandboxer_janitor_sandboxes{state,engine}, _last_sweep_sandboxes{outcome},
_sandboxes_total{outcome}, _sweeps_total{result}, _sweep_duration_seconds
and _last_success_timestamp_seconds. A bare port (":9464") listens on
127.0.0.1; a host that is not a loopback address is refused unless
--metrics-public says so (the metrics are served without authentication).`,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			jopts, err := a.janitorOptions(grace)
			if err != nil {
				return err
			}
			jopts.NoAdopt = noAdopt
			if interval <= 0 {
				return usagef("--interval %s: must be positive", interval)
			}
			if err := a.provisionOptions().Validate(); err != nil {
				return err
			}
			var listen string
			if metricsAddr != "" {
				if listen, err = metrics.ListenAddr(metricsAddr, metricsPublic); err != nil {
					return usagef("--metrics-addr: %v", err)
				}
			}
			ctx := cmd.Context()
			rt, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer rt.Close()
			if listen != "" {
				m := metrics.New(rt.Name())
				addr, served, err := m.Serve(ctx, listen)
				if err != nil {
					return err
				}
				go func() {
					if err := <-served; err != nil {
						a.log.Error("janitor: metrics server stopped", "err", err)
					}
				}()
				jopts.OnSweep = m.Observe
				a.log.Info("janitor metrics", "url", "http://"+addr+"/metrics")
			}
			a.log.Info("janitor started", "runtime", rt.Name(), "endpoint", rt.Endpoint(), "prefix", a.labelPrefix, "interval", interval, "grace", grace)
			j, err := janitor.New(rt, jopts)
			if err != nil {
				return err
			}
			if err := j.Run(ctx, interval); err != nil {
				return err
			}
			a.log.Info("janitor stopped")
			return nil
		}),
	}
	f := cmd.Flags()
	f.DurationVar(&interval, "interval", 30*time.Second, "time between sweeps")
	f.DurationVar(&grace, "grace", janitor.DefaultGrace, "leave sandboxes younger than this alone (0s: none)")
	f.StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (off by default; a bare :PORT listens on 127.0.0.1)")
	f.BoolVar(&metricsPublic, "metrics-public", false, "allow --metrics-addr on a host that is not a loopback address")
	f.BoolVar(&noAdopt, "no-adopt", false, "never adopt kept sandboxes by their owner (Kubernetes ownerReferences): leave it to up/spawn and `sandboxer adopt`")
	return cmd
}
