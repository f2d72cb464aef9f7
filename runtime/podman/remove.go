package podman

import (
	"context"

	"github.com/roboco/sandboxer/runtime"
)

// Remove force-removes a container (killing it if it runs) together with
// its anonymous volumes. An absent container is not an error.
func (r *Runtime) Remove(ctx context.Context, container string) error {
	const op = runtime.OpRemove
	conn, svc, err := r.connect(ctx, op, container)
	if err != nil {
		return err
	}
	if err := removeContainer(ctx, conn, svc, container); err != nil {
		return r.wrap(op, container, err)
	}
	return nil
}
