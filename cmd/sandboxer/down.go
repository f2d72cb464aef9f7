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
print the names removed ("removed NAME"); then remove the owner's network
("removed network sbx-..."), unless a container (the agent) is still
attached to it ("kept network ...": the janitor removes it once it is
free). Tearing down an owner with nothing is not an error.

` + lookRuleHelp,
		Args: cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			run, err := a.forOwner(cmd, owner, template, timeout, func(ctx context.Context, p *provision.Provisioner) ([]runtime.Container, error) {
				return p.Teardown(ctx, owner)
			})
			if err != nil {
				return err
			}
			n := a.printNames("removed", run.got)
			nn := a.printNetworks(run)
			a.log.Info("teardown", "owner", run.opts.OwnerName(owner), "removed", n, "networks_removed", nn, "runtimes", len(run.targets))
			if err := joinErrors(append(run.errs, run.missing)...); err != nil {
				return fmt.Errorf("down %s: %w", run.opts.OwnerName(owner), err)
			}
			return nil
		}),
	}
	ownerFlags(cmd.Flags(), &owner, &template, "owner id whose sandboxes to remove (required)")
	timeoutFlag(cmd.Flags(), &timeout)
	return cmd
}
