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

// RemoveByID implements runtime.IDRemover: Podman chooses a container's
// ID at random (64 hex digits) and never gives it to another container, so
// a forced remove by a full ID removes that container or finds none. An
// absent container is ErrNotFound; a name or an ID prefix is ErrInvalid,
// and nothing is asked of the service.
func (r *Runtime) RemoveByID(ctx context.Context, id string) error {
	const op = runtime.OpRemove
	if !runtime.IsFullID(id) {
		return runtime.NewError(Name, op, id, runtime.ErrInvalid, errors.New("not a full container ID"))
	}
	c, err := r.connect(ctx, op, id)
	if err != nil {
		return err
	}
	if err := c.removeContainer(ctx, id, false); err != nil {
		return r.wrap(op, id, err)
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
