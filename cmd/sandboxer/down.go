package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/provision"
)

func (a *app) downCmd() *cobra.Command {
	var owner, template string
	cmd := &cobra.Command{
		Use:   "down --owner ID",
		Short: "Tear down an owner's sandboxes (idempotent)",
		Long: `Kill and remove every sandbox of owner ID, with its anonymous volumes, and
print the names removed. Tearing down an owner with nothing is not an error.`,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			if owner == "" {
				return usagef("--owner is required")
			}
			opts := a.provisionOptions()
			opts.OwnerTemplate = template
			if err := checkOptions(opts); err != nil {
				return err
			}
			if _, err := provision.Validate(a.registry, owner, a.registry.Names()); err != nil {
				return err
			}
			ctx := cmd.Context()
			rt, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer rt.Close()
			p, err := provision.New(rt, opts)
			if err != nil {
				return err
			}
			removed, err := p.Teardown(ctx, owner)
			if !a.quiet {
				for _, c := range removed {
					fmt.Fprintf(a.io.Out, "removed %s\n", c.Name)
				}
			}
			a.log.Info("teardown", "owner", p.OwnerName(owner), "removed", len(removed))
			return err
		}),
	}
	ownerFlags(cmd.Flags(), &owner, &template, "owner id whose sandboxes to remove (required)")
	return cmd
}
