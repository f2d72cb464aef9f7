package provision

import (
	"context"
	"fmt"

	"github.com/roboco/sandboxer/runtime"
)

// Teardown removes every sandbox of ownerID: it lists by the owner label,
// then kills and removes each one (with its anonymous volumes) in
// parallel, without waiting out a graceful stop. It is idempotent: a
// second teardown, or one for an owner with nothing, succeeds and removes
// nothing. It returns the sandboxes it removed; a failure on one does not
// stop the others.
func (p *Provisioner) Teardown(ctx context.Context, ownerID string) ([]runtime.Container, error) {
	if !ownerIDRE.MatchString(ownerID) {
		return nil, invalid("owner id", ownerID, "want 1..64 letters, digits, '_', '.' or '-', starting with a letter or digit")
	}
	owner := p.opts.ownerName(ownerID)
	list, err := p.rt.List(ctx, map[string]string{p.keys.Sandbox: "1", p.keys.Owner: owner})
	if err != nil {
		return nil, fmt.Errorf("teardown %s: list: %w", owner, err)
	}
	refs := make([]string, len(list))
	for i, c := range list {
		refs[i] = c.ID
	}
	gone, err := p.destroyAll(ctx, refs)
	var removed []runtime.Container
	for i, c := range list {
		if gone[i] {
			removed = append(removed, c)
			p.emit(ctx, Event{Kind: EventRemoved, Owner: owner, Service: c.Labels[p.keys.Engine], Container: c.Name, Image: c.Image})
		}
	}
	if err != nil {
		return removed, fmt.Errorf("teardown %s: %w", owner, err)
	}
	return removed, nil
}
