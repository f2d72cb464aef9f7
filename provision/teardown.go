package provision

import (
	"context"
	"fmt"

	"github.com/roboco/sandboxer/runtime"
)

// Teardown removes every sandbox of ownerID: it lists by the owner label
// (the one round trip the owner rule needs: the sandboxes are found by
// their label, in whatever process made them), then force-removes each
// one (with its anonymous volumes) in parallel, without waiting out a
// graceful stop, by the ID the list saw (a newer same-named sandbox,
// provisioned meanwhile, has another ID and is left alone). That is
// runtime.Destroy: one look-up, which tells removed from gone, and one
// forced remove by the listed ID.
//
// Teardown is clean-up: it runs to its end even when ctx has already been
// cancelled (a signal, a caller that gave up), and each runtime call is
// bounded by Options.CallTimeout instead, so a hung runtime makes it fail
// with an error naming the container rather than wait forever. It is
// idempotent: a second teardown, or one for an owner with nothing,
// succeeds and removes nothing. It returns the sandboxes it removed; a
// failure on one does not stop the others. Once they are all gone, it
// removes the owner's network (OwnerNetworkName), unless a container (the
// agent) is still on it: that one the janitor removes later.
func (p *Provisioner) Teardown(ctx context.Context, ownerID string) ([]runtime.Container, error) {
	if err := p.opts.ValidateOwnerID(ownerID); err != nil {
		return nil, err
	}
	owner := p.opts.OwnerName(ownerID)
	removed, err := p.teardown(ctx, owner, p.keys.OwnedBy(owner))
	if err != nil {
		return removed, err
	}
	// Every sandbox of the owner is gone: so goes its network, unless a
	// container (the agent) is still on it.
	if err := p.removeOwnerNetwork(ctx, owner); err != nil {
		return removed, fmt.Errorf("teardown %s: %w", owner, err)
	}
	return removed, nil
}

// TeardownSandbox removes the sandboxes of sb, which one Provision call
// returned, and no other sandbox of its owner: what an earlier call made
// for the same owner (an `up --owner 42` for a live agent) stays, and so
// does a same-named sandbox a later call made in its place. It is how a
// caller undoes its own provision once that has succeeded (the env could
// not be handed out, the command it was made for is done). It lists by
// the call label, as Provision's rollback does, and removes as Teardown
// does: bounded calls that run to their end after ctx is cancelled,
// idempotent, the removed sandboxes returned. When no sandbox of the owner
// is left, the owner's network goes too, as in Teardown. A Sandbox that no Provision
// returned has no call: ErrInvalid, nothing touched.
func (p *Provisioner) TeardownSandbox(ctx context.Context, sb Sandbox) ([]runtime.Container, error) {
	if err := p.opts.ValidateOwnerID(sb.OwnerID); err != nil {
		return nil, err
	}
	owner := p.opts.OwnerName(sb.OwnerID)
	if sb.call == "" {
		return nil, invalid("sandbox", owner, "not returned by Provision: it names no call to tear down")
	}
	sel := p.keys.OwnedBy(owner)
	sel[p.keys.Call] = sb.call
	removed, err := p.teardown(ctx, owner, sel)
	if err != nil {
		return removed, err
	}
	if err := p.removeIfLast(ctx, owner); err != nil {
		return removed, fmt.Errorf("teardown %s: %w", owner, err)
	}
	return removed, nil
}

// teardown removes the sandboxes of owner that selector lists.
func (p *Provisioner) teardown(ctx context.Context, owner string, selector map[string]string) ([]runtime.Container, error) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.CallTimeout)
	list, err := p.rt.List(lctx, selector)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("teardown %s: list: %w", owner, err)
	}
	outcomes, err := p.destroyAll(ctx, list)
	var removed []runtime.Container
	for i, c := range list {
		if outcomes[i] == runtime.Removed {
			removed = append(removed, c)
			p.emit(ctx, Event{Kind: EventRemoved, Owner: owner, Service: c.Labels[p.keys.Engine], Container: c.Name, Image: c.Image})
		}
	}
	if err != nil {
		return removed, fmt.Errorf("teardown %s: %w", owner, err)
	}
	return removed, nil
}
