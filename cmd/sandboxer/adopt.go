package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

func (a *app) adoptCmd() *cobra.Command {
	var (
		owner, template string
		timeout         time.Duration
	)
	cmd := &cobra.Command{
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
			adopted := make([][]runtime.Container, len(l.targets))
			unsupported := make([]error, len(l.targets))
			errs := onEach(ctx, l.targets, timeout, func(ctx context.Context, i int, t target) error {
				p, err := provision.New(t.RT, opts)
				if err != nil {
					return err
				}
				adopted[i], err = p.Adopt(ctx, owner)
				if errors.Is(err, runtime.ErrUnsupported) {
					unsupported[i] = err
					return nil
				}
				return err
			})
			n, cannot := 0, 0
			for i, cs := range adopted {
				if unsupported[i] != nil {
					cannot++
					a.log.Info("adopt: the janitor covers this runtime's sandboxes", "runtime", l.targets[i].label)
					continue
				}
				for _, c := range cs {
					n++
					if !a.quiet {
						fmt.Fprintf(a.io.Out, "adopted %s\n", c.Name)
					}
				}
			}
			a.log.Info("adopt", "owner", opts.OwnerName(owner), "adopted", n, "runtimes", len(l.targets))
			if err := joinErrors(append(errs, l.missing)...); err != nil {
				return fmt.Errorf("adopt %s: %w", opts.OwnerName(owner), err)
			}
			if cannot == len(l.targets) && cannot > 0 {
				return fmt.Errorf("adopt %s: %w", opts.OwnerName(owner), errors.Join(unsupported...))
			}
			return nil
		}),
	}
	ownerFlags(cmd.Flags(), &owner, &template, "owner id whose sandboxes to adopt (required)")
	timeoutFlag(cmd.Flags(), &timeout)
	return cmd
}
