package provision

import (
	"context"
	"errors"
	"fmt"

	"github.com/roboco/sandboxer/runtime"
)

// Adopt hands the lifetime of ownerID's sandboxes to the runtime, where the
// runtime can remove a container with its owner (runtime.Adopter:
// Kubernetes' ownerReferences). Afterwards the sandboxes go when the owner
// goes, with no sandboxer process running; before, only the janitor (after
// its grace window) removes them.
//
// It lists the owner's sandboxes and adopts those not adopted by the owner
// yet, and returns them (none: every sandbox was adopted already, or the
// owner has none). The owner must exist: an absent owner is an error that
// matches runtime.ErrNotFound, and nothing is changed. On a runtime that
// cannot adopt, the error matches runtime.ErrUnsupported: the janitor is
// what removes a gone owner's sandboxes there. Each runtime call is bounded
// by Options.CallTimeout.
func (p *Provisioner) Adopt(ctx context.Context, ownerID string) ([]runtime.Container, error) {
	if err := p.opts.ValidateOwnerID(ownerID); err != nil {
		return nil, err
	}
	owner := p.opts.OwnerName(ownerID)
	ad, ok := p.rt.(runtime.Adopter)
	if !ok {
		return nil, fmt.Errorf("adopt %s: %s cannot remove a sandbox with its owner (its janitor does): %w", owner, p.rt.Name(), runtime.ErrUnsupported)
	}
	lctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	list, err := p.rt.List(lctx, p.keys.OwnedBy(owner))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("adopt %s: list: %w", owner, err)
	}
	var todo []runtime.Container
	for _, c := range list {
		if c.AdoptedBy != owner {
			todo = append(todo, c)
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	actx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	defer cancel()
	if err := ad.Adopt(actx, owner, todo); err != nil {
		return nil, fmt.Errorf("adopt %s: %w", owner, err)
	}
	for _, c := range todo {
		p.emit(ctx, Event{Kind: EventAdopted, Owner: owner, Service: c.Labels[p.keys.Engine], Container: c.Name, Image: c.Image})
	}
	return todo, nil
}

// adoptCreated adopts what a provision has just created, when the runtime
// can adopt and the owner exists already, and reports whether it did. An
// owner that does not exist yet is the usual case (sandboxes are made
// before their agent): the janitor, `sandboxer adopt` or a later Adopt
// call take over. Any other failure is logged, not returned: the sandboxes
// are ready, and the janitor still covers them.
func (p *Provisioner) adoptCreated(ctx context.Context, owner string, created []runtime.Container) bool {
	ad, ok := p.rt.(runtime.Adopter)
	if !ok {
		return false
	}
	actx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	defer cancel()
	err := ad.Adopt(actx, owner, created)
	switch {
	case err == nil:
		for _, c := range created {
			p.emit(ctx, Event{Kind: EventAdopted, Owner: owner, Service: c.Labels[p.keys.Engine], Container: c.Name, Image: c.Image})
		}
		return true
	case errors.Is(err, runtime.ErrNotFound):
		return false
	default:
		if p.opts.Logger != nil {
			p.opts.Logger.Warn("provision: adopt by the owner", "owner", owner, "err", err)
		}
		return false
	}
}
