package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

func (a *app) adoptCmd() *cobra.Command {
	return a.ownerCmd(&cobra.Command{
		Use:   "adopt --owner ID",
		Short: "Hand an owner's sandboxes to the runtime, to be removed with the owner",
		Long: `On a runtime that can remove a container together with its owner
(Kubernetes: the sandbox pods get an ownerReference to the agent pod, and the
cluster's garbage collector deletes them once the agent pod is deleted), tie
every sandbox of owner ID to the owner, which must exist by now, and print the
names adopted. Sandboxes adopted already are left as they are; adopting twice
is not an error. Sandboxes are usually provisioned before their agent exists:
run this once the agent pod is created (provisioning adopts by itself when the
owner exists already, and the janitor adopts on each sweep).

On a runtime that cannot (Docker, Podman, containerd) nothing is changed: the
janitor is what removes a gone owner's sandboxes there; that is an error
(exit 1) only when every runtime looked at is such a runtime.

` + lookRuleHelp,
	}, "owner id whose sandboxes to adopt (required)", (*provision.Provisioner).Adopt, a.reportAdopted)
}

// reportAdopted prints the sandboxes adopted; a runtime that cannot adopt
// fails the command only when every runtime looked at is one.
func (a *app) reportAdopted(run *ownerRun, owner string) error {
	// A runtime that cannot adopt is no failure while another one
	// looked at can: the janitor covers its sandboxes.
	var unsupported, failed []error
	for i, err := range run.errs {
		switch {
		case errors.Is(err, runtime.ErrUnsupported):
			unsupported = append(unsupported, err)
			a.log.Info("adopt: the janitor covers this runtime's sandboxes", "runtime", run.targets[i].label)
		case err != nil:
			failed = append(failed, err)
		}
	}
	n := a.printNames("adopted", run.got)
	a.log.Info("adopt", "owner", run.opts.OwnerName(owner), "adopted", n, "runtimes", len(run.targets))
	if err := joinErrors(append(failed, run.missing)...); err != nil {
		return fmt.Errorf("adopt %s: %w", run.opts.OwnerName(owner), err)
	}
	if len(unsupported) > 0 && len(unsupported) == len(run.targets) {
		return fmt.Errorf("adopt %s: %w", run.opts.OwnerName(owner), errors.Join(unsupported...))
	}
	return nil
}
