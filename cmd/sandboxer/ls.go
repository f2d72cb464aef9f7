package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/runtime"
)

// listed is one sandbox as ls reports it.
type listed struct {
	Name   string `json:"name"`
	ID     string `json:"id"`
	Engine string `json:"engine"`
	Image  string `json:"image"`
	Owner  string `json:"owner"`
	// OwnerPID is the owning process for sandboxes of `run` and the Go
	// test helper (0: owned by a container).
	OwnerPID int `json:"owner_pid,omitempty"`
	// OwnerRun is the run file of the run that owns the sandbox: a shared
	// sandbox of the Go test helper, used by every test binary of a `go
	// test ./...` ("": not owned by a run).
	OwnerRun string        `json:"owner_run,omitempty"`
	State    runtime.State `json:"state"`
	// Status is State as the table says it, with why an exited sandbox
	// ended: "exited (OOM killed)", "exited (code 1)" (runtime.Container's
	// Status); ExitCode and OOMKilled are the same for scripts.
	Status    string `json:"status"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	OOMKilled bool   `json:"oom_killed"`
	// AdoptedBy: the owner the runtime itself removes the sandbox with
	// (Kubernetes adoption), when adopted.
	AdoptedBy  string            `json:"adopted_by,omitempty"`
	Created    time.Time         `json:"created"`
	AgeSeconds int64             `json:"age_seconds"`
	Endpoint   *engines.Endpoint `json:"endpoint"`
	// Networks are the networks the sandbox is on, by name, sorted (the
	// owner's own network `sbx-<owner>`, or the caller's `--network`), as
	// the runtime reports them.
	Networks []string `json:"networks"`
	// Exposed: a port is published beyond loopback (0.0.0.0, an
	// interface's own address), where every host interface reaches it;
	// Endpoint then shows the address as the runtime reported it.
	Exposed bool `json:"exposed,omitempty"`
	// Runtime is the runtime the sandbox is on, as the RUNTIME column
	// names it ("docker"; with the candidate's source when two answering
	// runtimes share a name), and RuntimeEndpoint where it answered.
	Runtime         string `json:"runtime"`
	RuntimeEndpoint string `json:"runtime_endpoint"`
}

func (a *app) lsCmd() *cobra.Command {
	var (
		owner, template, format string
		timeout                 time.Duration
	)
	cmd := &cobra.Command{
		Use:   "ls [--owner ID] [--format table|json]",
		Short: "List sandboxes with owner, engine, state, age, endpoint and runtime",
		Long: `List the sandboxes of this label prefix (all owners, or one with --owner):
name, engine, owner, state, age, the endpoint consumers connect to (the
published port on the host, else the address on the container's network),
the networks it is on (the owner's sbx-<owner>, or the caller's --network)
and the runtime the sandbox is on. A port published beyond loopback
(0.0.0.0 or an interface's address, which sandboxer never asks for) is shown
as the runtime reports it, marked (EXPOSED) (JSON "exposed": true), with a
warning on stderr.

` + lookRuleHelp,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			if format != "table" && format != "json" {
				return usagef("--format %q: want table or json", format)
			}
			if err := checkTimeout(timeout); err != nil {
				return err
			}
			opts := a.provisionOptions()
			opts.OwnerTemplate = template
			if err := opts.Validate(); err != nil {
				return err
			}
			keys := labels.For(a.labelPrefix)
			selector := keys.Sandboxes()
			if owner != "" {
				if err := opts.ValidateOwnerID(owner); err != nil {
					return err
				}
				selector[keys.Owner] = opts.OwnerName(owner)
			}
			ctx := cmd.Context()
			l, err := a.lookAt(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			found := make([][]runtime.Container, len(l.targets))
			errs := onEach(ctx, l.targets, timeout, func(ctx context.Context, i int, t target) error {
				var err error
				found[i], err = t.RT.List(ctx, selector)
				return err
			})
			now := time.Now()
			rows := []listed{}
			seen := map[string]bool{}
			for i, cs := range found {
				for _, c := range cs {
					// The same container may be reached through two
					// endpoints (Podman's Docker-compatible socket).
					if seen[c.ID] {
						continue
					}
					seen[c.ID] = true
					rows = append(rows, a.listedOf(c, l.targets[i], now))
				}
			}
			slices.SortFunc(rows, func(x, y listed) int { return strings.Compare(x.Name, y.Name) })
			for _, r := range rows {
				if r.Exposed {
					a.log.Warn("sandbox published beyond loopback: other hosts may reach it", "name", r.Name, "runtime", r.Runtime)
				}
			}
			if format == "json" {
				err = writeJSON(a.io.Out, rows)
			} else {
				err = writeTable(a.io.Out, rows)
			}
			if err := joinErrors(append(errs, err, l.missing)...); err != nil {
				return fmt.Errorf("ls: %w", err)
			}
			return nil
		}),
	}
	ownerFlags(cmd.Flags(), &owner, &template, "only this owner id's sandboxes")
	cmd.Flags().StringVarP(&format, "format", "o", "table", "output: table or json")
	timeoutFlag(cmd.Flags(), &timeout)
	return cmd
}

// listedOf reads a sandbox's labels, state and endpoint; it is on the
// runtime on.
func (a *app) listedOf(c runtime.Container, on target, now time.Time) listed {
	keys := labels.For(a.labelPrefix)
	engine := c.Labels[keys.Engine]
	l := listed{
		Name:            c.Name,
		ID:              c.ID,
		Engine:          engine,
		Image:           c.Image,
		Owner:           c.Labels[keys.Owner],
		State:           c.State,
		Status:          c.Status(),
		OOMKilled:       c.OOMKilled,
		AdoptedBy:       c.AdoptedBy,
		Created:         c.Created,
		Runtime:         on.label,
		RuntimeEndpoint: on.Shown(),
		Networks:        slices.Sorted(maps.Keys(c.Networks)),
	}
	if l.Networks == nil {
		l.Networks = []string{}
	}
	if c.State == runtime.StateExited {
		code := c.ExitCode
		l.ExitCode = &code
	}
	if pid, err := strconv.Atoi(c.Labels[keys.OwnerPID]); err == nil {
		l.OwnerPID = pid
	}
	l.OwnerRun = c.Labels[keys.OwnerRun]
	if !c.Created.IsZero() {
		l.AgeSeconds = int64(now.Sub(c.Created) / time.Second)
	}
	port := 0
	if e, ok := a.registry.Lookup(engine); ok {
		port = e.Spec().Port
	}
	l.Exposed = runtime.CheckLoopback(c.Ports, 0) != nil
	for _, b := range c.Ports {
		if (port == 0 || b.ContainerPort == port) && b.HostPort != 0 && (b.Protocol == "" || b.Protocol == "tcp") {
			host := b.HostIP
			if host == "" {
				host = "0.0.0.0" // Docker and Podman: every interface
			}
			l.Endpoint = &engines.Endpoint{Host: host, Port: b.HostPort}
			return l
		}
	}
	if port != 0 {
		for _, n := range slices.Sorted(maps.Keys(c.Networks)) {
			if ip := c.Networks[n]; ip != "" {
				l.Endpoint = &engines.Endpoint{Host: ip, Port: port}
				break
			}
		}
	}
	return l
}

func writeTable(w io.Writer, rows []listed) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tENGINE\tOWNER\tSTATE\tAGE\tENDPOINT\tNETWORK\tRUNTIME")
	for _, r := range rows {
		owner := r.Owner
		if r.OwnerPID != 0 {
			owner += fmt.Sprintf(" (pid %d)", r.OwnerPID)
		}
		if r.OwnerRun != "" {
			owner += fmt.Sprintf(" (run %s)", filepath.Base(r.OwnerRun))
		}
		if owner == "" {
			owner = "-"
		}
		ep := "-"
		if r.Endpoint != nil {
			ep = net.JoinHostPort(r.Endpoint.Host, strconv.Itoa(r.Endpoint.Port))
		}
		if r.Exposed {
			ep += " (EXPOSED)"
		}
		engine := r.Engine
		if engine == "" {
			engine = "-"
		}
		nets := strings.Join(r.Networks, ",")
		if nets == "" {
			nets = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, engine, owner, r.Status, humanAge(time.Duration(r.AgeSeconds)*time.Second), ep, nets, r.Runtime)
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// humanAge renders 42s, 5m, 3h, 2d.
func humanAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}
