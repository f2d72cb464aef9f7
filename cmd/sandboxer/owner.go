package main

import (
	"context"
	"fmt"
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
}

// forOwner is the body every owner command shares: it checks --owner,
// --timeout and the provision options (usage errors, before any runtime is
// contacted), looks at the runtimes of the look rule, and runs do with a
// provisioner on each of them in parallel, within timeout.
func (a *app) forOwner(cmd *cobra.Command, owner, template string, timeout time.Duration, do func(context.Context, *provision.Provisioner) ([]runtime.Container, error)) (ownerRun, error) {
	if owner == "" {
		return ownerRun{}, usagef("--owner is required")
	}
	if err := checkTimeout(timeout); err != nil {
		return ownerRun{}, err
	}
	opts := a.provisionOptions()
	opts.OwnerTemplate = template
	if err := opts.Validate(); err != nil {
		return ownerRun{}, err
	}
	if err := opts.ValidateOwnerID(owner); err != nil {
		return ownerRun{}, err
	}
	ctx := cmd.Context()
	l, err := a.lookAt(ctx)
	if err != nil {
		return ownerRun{}, err
	}
	defer l.Close()
	run := ownerRun{opts: opts, targets: l.targets, got: make([][]runtime.Container, len(l.targets)), missing: l.missing}
	run.errs = onEach(ctx, l.targets, timeout, func(ctx context.Context, i int, t target) error {
		p, err := provision.New(t.RT, opts)
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
