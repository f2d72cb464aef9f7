package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/provision"
)

func (a *app) downCmd() *cobra.Command {
	return a.ownerCmd(&cobra.Command{
		Use:   "down --owner ID",
		Short: "Tear down an owner's sandboxes (idempotent)",
		Long: `Kill and remove every sandbox of owner ID, with its anonymous volumes, and
print the names removed ("removed NAME"); then remove the owner's network
("removed network sbx-..."), unless a container (the agent) is still
attached to it ("kept network ...": the janitor removes it once it is
free). Tearing down an owner with nothing is not an error.

` + lookRuleHelp,
	}, "owner id whose sandboxes to remove (required)", (*provision.Provisioner).Teardown, a.reportDown)
}

// reportDown prints the sandboxes and networks removed; a runtime that
// failed, or could not be looked at, fails the command.
func (a *app) reportDown(run *ownerRun, owner string) error {
	n := a.printNames("removed", run.got)
	nn := a.printNetworks(run)
	a.log.Info("teardown", "owner", run.opts.OwnerName(owner), "removed", n, "networks_removed", nn, "runtimes", len(run.targets))
	if err := joinErrors(append(run.errs, run.missing)...); err != nil {
		return fmt.Errorf("down %s: %w", run.opts.OwnerName(owner), err)
	}
	return nil
}
