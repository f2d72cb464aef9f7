package docker

import (
	"context"
	"errors"
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
	_, err := r.remove(ctx, ref)
	return err
}

// RemoveByID implements runtime.IDRemover: Docker chooses a container's ID
// at random (64 hex digits) and never gives it to another container, so a
// forced remove by a full ID removes that container or finds none. An
// absent container is ErrNotFound; a name or an ID prefix is ErrInvalid,
// and nothing is asked of the daemon.
func (r *Runtime) RemoveByID(ctx context.Context, id string) error {
	if !runtime.IsFullID(id) {
		return runtime.NewError(Name, runtime.OpRemove, id, runtime.ErrInvalid, errors.New("not a full container ID"))
	}
	gone, err := r.remove(ctx, id)
	if err == nil && gone {
		return runtime.NewError(Name, runtime.OpRemove, id, runtime.ErrNotFound, nil)
	}
	return err
}

// remove is Remove; gone reports that the container was not there to
// remove (absent, or removed meanwhile by another caller).
func (r *Runtime) remove(ctx context.Context, ref string) (gone bool, err error) {
	if err := r.negotiate(ctx, runtime.OpRemove, ref); err != nil {
		return false, err
	}
	err = r.cli.ContainerRemove(ctx, ref, container.RemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil:
		return false, nil
	case cerrdefs.IsNotFound(err):
		return true, nil
	case cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress"):
		// Another caller is removing it; idempotent callers want it gone,
		// so wait for that removal rather than report a conflict.
		return true, r.waitGone(ctx, ref)
	default:
		return false, r.wrap(runtime.OpRemove, ref, err)
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
