package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/roboco/sandboxer/runtime"
)

// Remove force-removes a container (killing it if it runs) together with
// its anonymous volumes. An absent container is not an error.
func (r *Runtime) Remove(ctx context.Context, ref string) error {
	if err := r.negotiate(ctx, runtime.OpRemove, ref); err != nil {
		return err
	}
	err := r.cli.ContainerRemove(ctx, ref, container.RemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
		return nil
	case cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress"):
		// Another caller is removing it; idempotent callers want it gone,
		// so wait for that removal rather than report a conflict.
		return r.waitGone(ctx, ref)
	default:
		return r.wrap(runtime.OpRemove, ref, err)
	}
}

// waitGone polls until ref no longer exists or ctx ends.
func (r *Runtime) waitGone(ctx context.Context, ref string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := r.cli.ContainerInspect(ctx, ref)
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return r.wrap(runtime.OpRemove, ref, err)
		}
		select {
		case <-ctx.Done():
			return r.wrap(runtime.OpRemove, ref, fmt.Errorf("waiting for a removal already in progress: %w", ctx.Err()))
		case <-tick.C:
		}
	}
}
