package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

func (a *app) downCmd() *cobra.Command {
	var (
		owner, template string
		timeout         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "down --owner ID",
		Short: "Tear down an owner's sandboxes (idempotent)",
		Long: `Kill and remove every sandbox of owner ID, with its anonymous volumes, and
print the names removed. Tearing down an owner with nothing is not an error.

` + lookRuleHelp,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			if owner == "" {
				return usagef("--owner is required")
			}
			if err := checkTimeout(timeout); err != nil {
				return err
			}
			opts := a.provisionOptions()
			opts.OwnerTemplate = template
			if err := opts.Validate(); err != nil {
				return err
			}
			if err := opts.ValidateOwnerID(owner); err != nil {
				return err
			}
			ctx := cmd.Context()
			l, err := a.lookAt(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			removed := make([][]runtime.Container, len(l.targets))
			errs := onEach(ctx, l.targets, timeout, func(ctx context.Context, i int, t target) error {
				p, err := provision.New(t.RT, opts)
				if err != nil {
					return err
				}
				removed[i], err = p.Teardown(ctx, owner)
				return err
			})
			// The same container may be reached through two endpoints
			// (Podman's Docker-compatible socket): print it once.
			seen := map[string]bool{}
			n := 0
			for _, cs := range removed {
				for _, c := range cs {
					if seen[c.ID] {
						continue
					}
					seen[c.ID] = true
					n++
					if !a.quiet {
						fmt.Fprintf(a.io.Out, "removed %s\n", c.Name)
					}
				}
			}
			a.log.Info("teardown", "owner", opts.OwnerName(owner), "removed", n, "runtimes", len(l.targets))
			if err := joinErrors(append(errs, l.missing)...); err != nil {
				return fmt.Errorf("down %s: %w", opts.OwnerName(owner), err)
			}
			return nil
		}),
	}
	ownerFlags(cmd.Flags(), &owner, &template, "owner id whose sandboxes to remove (required)")
	timeoutFlag(cmd.Flags(), &timeout)
	return cmd
}
