package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/janitor"
)

// janitorGrace converts the --grace flag: janitor.Options treats 0 as "the
// default", so an explicit 0s ("no grace") becomes the smallest positive
// grace.
func janitorGrace(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Nanosecond
	}
	return d
}

// sweptJSON is one sandbox of a sweep report, for --format json.
type sweptJSON struct {
	Name       string `json:"name"`
	ID         string `json:"id"`
	Engine     string `json:"engine"`
	Owner      string `json:"owner"`
	State      string `json:"state"`
	AgeSeconds int64  `json:"age_seconds"`
	Error      string `json:"error,omitempty"`
}

type reportJSON struct {
	DryRun  bool        `json:"dry_run"`
	Removed []sweptJSON `json:"removed"`
	Kept    []sweptJSON `json:"kept"`
	Skipped []sweptJSON `json:"skipped"`
	Errors  []sweptJSON `json:"errors"`
	Summary string      `json:"summary"`
}

func swept(sbs []janitor.Sandbox) []sweptJSON {
	out := make([]sweptJSON, 0, len(sbs))
	for _, s := range sbs {
		out = append(out, sweptOf(s))
	}
	return out
}

func sweptOf(s janitor.Sandbox) sweptJSON {
	return sweptJSON{Name: s.Name, ID: s.ID, Engine: s.Engine, Owner: s.Owner.String(), State: string(s.State), AgeSeconds: int64(s.Age / time.Second)}
}

func (a *app) gcCmd() *cobra.Command {
	var (
		grace  time.Duration
		dryRun bool
		format string
	)
	cmd := &cobra.Command{
		Use:   "gc [--grace 180s] [--dry-run]",
		Short: "One janitor sweep: remove sandboxes whose owner is gone",
		Long: `Make one janitor sweep over this label prefix's sandboxes: those whose owner
(a container, or the process of a ` + "`run`" + `) is gone and that are older than the
grace window are killed and removed. Prints what it removed (or, with
--dry-run, would remove), kept (owner alive), skipped (in grace) and could
not decide. Exits 1 when a sandbox could not be judged or removed.`,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			if err := durationFlag("grace", grace); err != nil {
				return err
			}
			if format != "text" && format != "json" {
				return usagef("--format %q: want text or json", format)
			}
			if err := checkOptions(a.provisionOptions()); err != nil {
				return err
			}
			ctx := cmd.Context()
			rt, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer rt.Close()
			j := janitor.New(rt, janitor.Options{Prefix: a.labelPrefix, Grace: janitorGrace(grace), DryRun: dryRun, Logger: a.log})
			rep, err := j.Sweep(ctx)
			if format == "json" {
				out := reportJSON{DryRun: rep.DryRun, Removed: swept(rep.Removed), Kept: swept(rep.Kept), Skipped: swept(rep.Skipped), Errors: []sweptJSON{}, Summary: rep.String()}
				for _, f := range rep.Errors {
					s := sweptOf(f.Sandbox)
					s.Error = oneLine(f.Err.Error())
					out.Errors = append(out.Errors, s)
				}
				if werr := writeJSON(a.io.Out, out); werr != nil {
					return werr
				}
			} else if !a.quiet || err != nil {
				writeReport(a.io.Out, rep)
			}
			if err != nil {
				return fmt.Errorf("gc: %w", err)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.DurationVar(&grace, "grace", janitor.DefaultGrace, "leave sandboxes younger than this alone (0s: none)")
	f.BoolVar(&dryRun, "dry-run", false, "report what would be removed, remove nothing")
	f.StringVarP(&format, "format", "o", "text", "output: text or json")
	return cmd
}

// writeReport prints one line per sandbox, then the summary.
func writeReport(w io.Writer, rep janitor.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
	}
	line := func(what string, s janitor.Sandbox, extra string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\towner %s\tage %s%s\n", what, s.Name, s.Engine, s.Owner, humanAge(s.Age), extra)
	}
	for _, s := range rep.Removed {
		line(verb, s, "")
	}
	for _, s := range rep.Kept {
		line("kept", s, "")
	}
	for _, s := range rep.Skipped {
		line("skipped", s, "\t(in grace)")
	}
	for _, f := range rep.Errors {
		line("error", f.Sandbox, "\t"+oneLine(f.Err.Error()))
	}
	tw.Flush()
	fmt.Fprintln(w, rep.String())
}

func (a *app) janitorCmd() *cobra.Command {
	var grace, interval time.Duration
	cmd := &cobra.Command{
		Use:   "janitor [--interval 30s] [--grace 180s]",
		Short: "Sweep for orphaned sandboxes at start and on every tick, until SIGINT/SIGTERM",
		Long: `Run the janitor loop: a sweep at start, then one per --interval, until
SIGINT or SIGTERM (then exit 0). A failed sweep is logged and retried at the
next tick, so the loop outlives a runtime restart. It needs no container of
its own: run it as a service next to the runtime, or inside the orchestrator.`,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			if err := durationFlag("grace", grace); err != nil {
				return err
			}
			if interval <= 0 {
				return usagef("--interval %s: must be positive", interval)
			}
			if err := checkOptions(a.provisionOptions()); err != nil {
				return err
			}
			ctx := cmd.Context()
			rt, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer rt.Close()
			a.log.Info("janitor started", "runtime", rt.Name(), "endpoint", rt.Endpoint(), "prefix", a.labelPrefix, "interval", interval, "grace", grace)
			j := janitor.New(rt, janitor.Options{Prefix: a.labelPrefix, Grace: janitorGrace(grace), Logger: a.log})
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
	return cmd
}
