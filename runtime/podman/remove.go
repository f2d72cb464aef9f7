package podman

import (
	"context"
	"errors"

	"github.com/roboco/sandboxer/runtime"
)

// Remove force-removes a container (killing it if it runs) together with
// its anonymous volumes. An absent container is not an error.
func (r *Runtime) Remove(ctx context.Context, container string) error {
	const op = runtime.OpRemove
	c, err := r.connect(ctx, op, container)
	if err != nil {
		return err
	}
	if err := c.remove(ctx, container); err != nil {
		return r.wrap(op, container, err)
	}
	return nil
}

// remove force-removes a container and its anonymous volumes; an absent
// container is not an error.
func (c *client) remove(ctx context.Context, ref string) error {
	err := c.removeContainer(ctx, ref, true)
	if err != nil && errors.Is(kindOf(runtime.OpRemove, err), runtime.ErrNotFound) {
		return nil
	}
	return err
}
