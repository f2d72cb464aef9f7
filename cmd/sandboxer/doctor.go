package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
)

// doctorReport is what `doctor` found.
type doctorReport struct {
	Asked      string           `json:"asked"`
	AskedBy    string           `json:"asked_by"`
	Candidates []candidateJSON  `json:"candidates"`
	Chosen     *candidateJSON   `json:"chosen"`
	Reason     string           `json:"reason"`
	Images     []imageCheckJSON `json:"images"`
	// Warm is the warm start mode, and Templates the warm templates of the
	// images in effect (see `sandboxer warm`).
	Warm      string         `json:"warm"`
	Templates []templateJSON `json:"templates"`
	// Readiness says how sandboxes will be judged ready, in host mode and
	// on a sibling network.
	Readiness readinessJSON `json:"readiness"`
	Warnings  []string      `json:"warnings"`
}

type readinessJSON struct {
	Mode    string `json:"mode"`
	Host    string `json:"host_mode"`
	Network string `json:"network_mode"`
}

type candidateJSON struct {
	Runtime       string `json:"runtime"`
	Endpoint      string `json:"endpoint"`
	Namespace     string `json:"namespace,omitempty"`
	Source        string `json:"source"`
	Status        string `json:"status"`
	Detail        string `json:"detail"`
	Version       string `json:"version,omitempty"`
	APIVersion    string `json:"api_version,omitempty"`
	Rootless      bool   `json:"rootless,omitempty"`
	CgroupVersion string `json:"cgroup_version,omitempty"`
	Chosen        bool   `json:"chosen"`
	ElapsedMillis int64  `json:"elapsed_ms"`
}

type imageCheckJSON struct {
	Engine  string `json:"engine"`
	Image   string `json:"image"`
	Source  string `json:"source"`
	Present bool   `json:"present"`
	Error   string `json:"error,omitempty"`
}

func (a *app) doctorCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "doctor [--format text|json]",
		Short: "Which runtimes answer, their versions, why one is chosen, which images are present",
		Long: `Ping every runtime candidate (in the auto-detection order, or only the one
--runtime / SANDBOXER_RUNTIME names), report whether each answered and its
version, which one is chosen and why, whether each engine's image is
present on it, and warnings (limits a rootless runtime cannot enforce,
what the chosen runtime's adapter finds missing on the host, such as CNI
plugins, images that would have to be pulled).
Exits 3 when no runtime answered.`,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return usagef("--format %q: want text or json", format)
			}
			if err := a.provisionOptions().Validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			opts := a.detectOptions()
			opts.All = true
			sel, derr := detect.Detect(ctx, opts)
			if sel == nil {
				return derr
			}
			if sel.Runtime != nil {
				defer sel.Runtime.Close()
			}
			rep := a.diagnose(ctx, sel)
			if format == "json" {
				if err := writeJSON(a.io.Out, rep); err != nil {
					return err
				}
			} else {
				writeDoctor(a.io.Out, rep)
			}
			return derr
		}),
	}
	cmd.Flags().StringVarP(&format, "format", "o", "text", "output: text or json")
	return cmd
}

func (a *app) diagnose(ctx context.Context, sel *detect.Selection) doctorReport {
	rep := doctorReport{Asked: sel.Asked, AskedBy: sel.AskedBy, Reason: sel.Reason, Images: []imageCheckJSON{}, Warnings: []string{},
		Warm: string(a.warm), Templates: []templateJSON{},
		Readiness: readinessJSON{
			Mode:    string(a.readiness),
			Host:    provision.DescribeReadiness(a.readiness, ""),
			Network: provision.DescribeReadiness(a.readiness, "NAME"),
		}}
	for _, p := range sel.Probes {
		c := candidateJSON{
			Runtime: p.Runtime, Endpoint: p.Shown(), Namespace: p.Namespace, Source: p.Source,
			Status: string(p.Status), Detail: p.Describe(), ElapsedMillis: p.Elapsed.Milliseconds(),
		}
		if p.Status == detect.StatusAnswered {
			c.Version, c.APIVersion, c.Rootless, c.CgroupVersion = p.Info.Version, p.Info.APIVersion, p.Info.Rootless, p.Info.CgroupVersion
		}
		if sel.Runtime != nil && p.Candidate == sel.Chosen.Candidate {
			c.Chosen = true
			cc := c
			rep.Chosen = &cc
		} else if p.Status == detect.StatusAnswered {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s at %s also answered; choose it with --runtime %s", p.Runtime, p.Shown(), p.Runtime))
		}
		rep.Candidates = append(rep.Candidates, c)
	}
	if sel.Runtime == nil {
		return rep
	}
	info := sel.Chosen.Info
	if info.Rootless && info.CgroupVersion == "1" && a.unenforcedLimits {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s runs rootless on cgroup v1: memory and CPU limits cannot be enforced, and --unenforced-limits runs sandboxes without them (for enforced limits: cgroup v2 with the memory, cpu and pids controllers delegated to the user, or a rootful runtime)", info.Runtime))
	} else if info.Rootless && info.CgroupVersion == "1" {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s runs rootless on cgroup v1: memory and CPU limits cannot be enforced, so sandboxes fail with %q; use cgroup v2 with the memory, cpu and pids controllers delegated to the user (or a rootful runtime), or accept unenforced limits with --unenforced-limits (%s=1)", info.Runtime, runtime.ErrUnsupported, envUnenforcedLimits))
	} else if info.Rootless {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s runs rootless: limits need cgroup v2 with the memory, cpu and pids controllers delegated to the user", info.Runtime))
	}
	if !info.ReportsOOMKill {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s %s does not report OOM kills: a sandbox killed for memory shows as \"exited (code 137)\" in ls and gc, not \"exited (OOM killed)\"", info.Runtime, info.Version))
	}
	if d, ok := runtime.As[runtime.Diagnoser](sel.Runtime); ok {
		// What the adapter itself knows its backend needs of the host.
		for _, f := range d.Diagnose(ctx) {
			rep.Warnings = append(rep.Warnings, f.Problem)
		}
	}
	for _, e := range a.describeEngines() {
		ic := imageCheckJSON{Engine: e.Name, Image: e.Image, Source: e.ImageSource}
		var ok bool
		store, err := imageStore(sel.Runtime)
		if err == nil {
			ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
			ok, err = store.ImageExists(ictx, e.Image)
			cancel()
		}
		switch {
		case errors.Is(err, runtime.ErrUnsupported):
			// A cluster: the kubelet pulls at run, there is nothing to check.
			ic.Error = "not checked: the runtime pulls images at run (it has no image store)"
		case err != nil:
			ic.Error = oneLine(err.Error())
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: cannot check image %s: %s", e.Name, e.Image, ic.Error))
		case ok:
			ic.Present = true
		default:
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: image %s is not present: the first up pulls it (its registry must be reachable; set --image %s=REF or %s for a mirror)", e.Name, e.Image, e.Name, "SANDBOXER_IMAGE_"+upper(e.Name)))
		}
		rep.Images = append(rep.Images, ic)
	}
	if p, err := provision.New(sel.Runtime, a.provisionOptions()); err == nil {
		for _, name := range p.WarmServices() {
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			t, err := p.LookupTemplate(tctx, name)
			cancel()
			if errors.Is(err, runtime.ErrUnsupported) {
				continue // no image store: warm start is off on this runtime
			}
			if err != nil {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: cannot check the warm template: %s", name, oneLine(err.Error())))
				continue
			}
			rep.Templates = append(rep.Templates, toTemplateJSON(t))
		}
	}
	return rep
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func writeDoctor(w io.Writer, rep doctorReport) {
	defer func() {
		fmt.Fprintf(w, "readiness (%s):\n  host mode: %s\n  --network NAME: %s\n", rep.Readiness.Mode, rep.Readiness.Host, rep.Readiness.Network)
	}()
	fmt.Fprintf(w, "runtime asked for: %s (%s)\n", rep.Asked, rep.AskedBy)
	fmt.Fprintln(w, "candidates, in order:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range rep.Candidates {
		mark := ""
		if c.Chosen {
			mark = "\t<- chosen"
		}
		ep := c.Endpoint
		if c.Namespace != "" {
			ep += " (namespace " + c.Namespace + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s%s\n", c.Runtime, ep, c.Source, c.Detail, mark)
	}
	tw.Flush()
	if rep.Chosen != nil {
		mode := ""
		if rep.Chosen.Rootless {
			mode = " (rootless)"
		}
		fmt.Fprintf(w, "chosen: %s%s at %s, version %s\n", rep.Chosen.Runtime, mode, rep.Chosen.Endpoint, rep.Chosen.Version)
		fmt.Fprintf(w, "why: %s\n", rep.Reason)
		fmt.Fprintf(w, "images on %s:\n", rep.Chosen.Runtime)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, i := range rep.Images {
			state := "present"
			switch {
			case i.Error != "":
				state = "unknown: " + i.Error
			case !i.Present:
				state = "absent"
			}
			fmt.Fprintf(tw, "  %s\t%s\t(%s)\t%s\n", i.Engine, i.Image, i.Source, state)
		}
		tw.Flush()
		fmt.Fprintf(w, "warm start (%s), templates on %s:\n", rep.Warm, rep.Chosen.Runtime)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, t := range rep.Templates {
			state, ref := "absent (built on first use, or by `sandboxer warm`)", t.Ref
			if t.Present {
				state = "present"
			}
			if ref == "" {
				ref = "(base image absent)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.Service, ref, state)
		}
		tw.Flush()
	} else {
		fmt.Fprintf(w, "chosen: none\nwhy: %s\n", rep.Reason)
	}
	if len(rep.Warnings) > 0 {
		fmt.Fprintln(w, "warnings:")
		for _, s := range rep.Warnings {
			fmt.Fprintf(w, "  - %s\n", s)
		}
	}
}
