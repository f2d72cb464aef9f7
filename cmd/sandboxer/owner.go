package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// ownerRun is what an owner command (down, adopt) did on each runtime it
// looked at.
type ownerRun struct {
	// opts are the provision options the command ran with.
	opts provision.Options
	// targets are the runtimes looked at; got and errs are by target.
	targets []target
	got     [][]runtime.Container
	errs    []error
	// missing: the runtimes of the look rule that could not be looked at.
	missing error

	// mu guards networks: the owner networks the command removed or kept
	// (provision's EventNetworkRemoved, EventNetworkKept), on any runtime.
	mu       sync.Mutex
	networks []provision.Event
}

// record keeps the owner network events.
func (r *ownerRun) record(ev provision.Event) {
	if ev.Kind != provision.EventNetworkRemoved && ev.Kind != provision.EventNetworkKept {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.networks = append(r.networks, ev)
}

// printNetworks writes one line per owner network the command removed
// ("removed network NAME") or left for the janitor because a container is
// still attached ("kept network NAME (...)"), unless quiet, and returns
// how many it removed.
func (a *app) printNetworks(r *ownerRun) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.networks {
		if ev.Kind == provision.EventNetworkRemoved {
			n++
		}
		if a.quiet {
			continue
		}
		if ev.Kind == provision.EventNetworkRemoved {
			fmt.Fprintf(a.io.Out, "removed network %s\n", ev.Network)
		} else {
			fmt.Fprintf(a.io.Out, "kept network %s (a container is still attached: the janitor removes it once it is free)\n", ev.Network)
		}
	}
	return n
}

// ownerVerb is what an owner command does on one runtime's provisioner,
// e.g. (*provision.Provisioner).Teardown.
type ownerVerb func(p *provision.Provisioner, ctx context.Context, owner string) ([]runtime.Container, error)

// ownerCmd completes cmd (its Use and help) as an owner command: the flags
// --owner (helped by ownerHelp), --owner-template and --timeout, and a body
// that runs verb on every runtime of the look rule (forOwner), then hands
// what it did to report.
func (a *app) ownerCmd(cmd *cobra.Command, ownerHelp string, verb ownerVerb, report func(run *ownerRun, owner string) error) *cobra.Command {
	var (
		owner, template string
		timeout         time.Duration
	)
	cmd.Args = cobra.NoArgs
	cmd.RunE = a.command(func(cmd *cobra.Command, _ []string) error {
		run, err := a.forOwner(cmd, owner, template, timeout, func(ctx context.Context, p *provision.Provisioner) ([]runtime.Container, error) {
			return verb(p, ctx, owner)
		})
		if err != nil {
			return err
		}
		return report(run, owner)
	})
	ownerFlags(cmd.Flags(), &owner, &template, ownerHelp)
	timeoutFlag(cmd.Flags(), &timeout)
	return cmd
}

// forOwner is the body every owner command shares: it checks --owner,
// --timeout and the provision options (usage errors, before any runtime is
// contacted), looks at the runtimes of the look rule, and runs do with a
// provisioner on each of them in parallel, within timeout.
func (a *app) forOwner(cmd *cobra.Command, owner, template string, timeout time.Duration, do func(context.Context, *provision.Provisioner) ([]runtime.Container, error)) (*ownerRun, error) {
	if owner == "" {
		return nil, usagef("--owner is required")
	}
	if err := checkTimeout(timeout); err != nil {
		return nil, err
	}
	opts := a.provisionOptions()
	opts.OwnerTemplate = template
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := opts.ValidateOwnerID(owner); err != nil {
		return nil, err
	}
	ctx := cmd.Context()
	l, err := a.lookAt(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	run := &ownerRun{opts: opts, targets: l.targets, got: make([][]runtime.Container, len(l.targets)), missing: l.missing}
	popts := opts
	popts.OnEvent = run.record
	run.errs = onEach(ctx, l.targets, timeout, func(ctx context.Context, i int, t target) error {
		p, err := provision.New(t.RT, popts)
		if err != nil {
			return err
		}
		run.got[i], err = do(ctx, p)
		return err
	})
	return run, nil
}

// printNames writes one "<verb> NAME" line per container (unless quiet) and
// returns how many there were. The same container may be reached through
// two endpoints (Podman's Docker-compatible socket): it is counted and
// printed once.
func (a *app) printNames(verb string, got [][]runtime.Container) int {
	seen := map[string]bool{}
	n := 0
	for _, cs := range got {
		for _, c := range cs {
			if seen[c.ID] {
				continue
			}
			seen[c.ID] = true
			n++
			if !a.quiet {
				fmt.Fprintf(a.io.Out, "%s %s\n", verb, c.Name)
			}
		}
	}
	return n
}
