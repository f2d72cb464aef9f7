package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/provision"
)

// templateJSON is one warm template as `warm` and `doctor` report it.
type templateJSON struct {
	Service string `json:"service"`
	Base    string `json:"base"`
	BaseID  string `json:"base_id,omitempty"`
	Ref     string `json:"template,omitempty"`
	Present bool   `json:"present"`
	Built   bool   `json:"built,omitempty"`
	Removed bool   `json:"removed,omitempty"`
	// Seconds is how long building (or finding) it took.
	Seconds float64 `json:"seconds,omitempty"`
}

func toTemplateJSON(t provision.Template) templateJSON {
	return templateJSON{Service: t.Engine, Base: t.Base, BaseID: t.BaseID, Ref: t.Ref, Present: t.Present, Built: t.Built,
		Seconds: t.Elapsed.Round(time.Millisecond).Seconds()}
}

func (a *app) warmCmd() *cobra.Command {
	var (
		services []string
		list     bool
		remove   bool
		format   string
	)
	cmd := &cobra.Command{
		Use:   "warm [--services LIST] [--list | --remove] [--format text|json]",
		Short: "Build (or list, or remove) the warm-start templates",
		Long: `A warm start skips the image's first-start initialisation (postgres's initdb):
the sandbox starts from a template of the initialised data, an image derived
from the engine's image (localhost/sandboxer-warm/<engine>:<key>, one per base
image), kept in the runtime's own image store. Provisioning builds it on first
use; warm builds it now (for every engine that can start warm, or those of
--services), --list says which are present, --remove removes them (the next
warm provision builds them again). Mongo and redis always start cold.`,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return usagef("--format %q: want text or json", format)
			}
			if list && remove {
				return usagef("--list and --remove: say one or the other")
			}
			opts := a.provisionOptions()
			ctx := cmd.Context()
			rt, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer rt.Close()
			p, err := provision.New(rt, opts)
			if err != nil {
				return &usageError{err}
			}
			names := provision.ParseServices(strings.Join(services, ","))
			if len(names) == 0 {
				names = p.WarmServices()
			}
			var out []templateJSON
			for _, name := range names {
				var t provision.Template
				switch {
				case list:
					t, err = p.LookupTemplate(ctx, name)
				case remove:
					var was provision.Template
					if was, err = p.LookupTemplate(ctx, name); err == nil {
						t, err = p.RemoveTemplate(ctx, name)
						if err == nil && was.Present {
							j := toTemplateJSON(t)
							j.Removed = true
							out = append(out, j)
							continue
						}
					}
				default:
					a.log.Info("finding or building the warm template (a build runs the image once: a cold start plus a few seconds)", "service", name)
					t, err = p.EnsureTemplate(ctx, name)
				}
				if err != nil {
					if errors.Is(err, provision.ErrInvalid) {
						return &usageError{err}
					}
					return err
				}
				out = append(out, toTemplateJSON(t))
			}
			if format == "json" {
				return writeJSON(a.io.Out, out)
			}
			tw := tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SERVICE\tBASE\tTEMPLATE\tSTATE")
			for _, t := range out {
				state := "absent"
				switch {
				case t.Removed:
					state = "removed"
				case t.Built:
					state = fmt.Sprintf("built in %.1fs", t.Seconds)
				case t.Present:
					state = "present"
				}
				ref := t.Ref
				if ref == "" {
					ref = "(base image absent)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Service, t.Base, ref, state)
			}
			return tw.Flush()
		}),
	}
	f := cmd.Flags()
	f.StringSliceVarP(&services, "services", "s", nil, "services whose template to build, list or remove (default: every one that can start warm)")
	f.BoolVar(&list, "list", false, "list the templates of the images in effect, present or not")
	f.BoolVar(&remove, "remove", false, "remove the templates of the images in effect")
	f.StringVar(&format, "format", "text", "output: text or json")
	return cmd
}
