package containerd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/containerd/containerd/v2/client"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/roboco/sandboxer/runtime"
)

// Remove force-removes a container, by ID or name (see getContainer): it
// leaves its network first (CNI DEL,
// while the task's network namespace still exists; a DEL that fails leaves
// a network lease, which a later Reconcile retries), then kills and deletes
// the task, deletes the container with its snapshot, its anonymous volumes,
// its log and its host port reservation. An absent container is not an error.
func (r *Runtime) Remove(ctx context.Context, ref string) error {
	const op = runtime.OpRemove
	ctx = r.ctx(ctx)
	if err := r.ready(ctx, op, ref); err != nil {
		return err
	}
	return r.wrap(op, ref, r.remove(ctx, ref))
}

func (r *Runtime) remove(ctx context.Context, ref string) error {
	info, err := r.getContainer(ctx, runtime.OpRemove, ref)
	if errors.Is(err, runtime.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	rec, err := recordOf(info)
	if err != nil {
		return err
	}
	c, err := r.client.LoadContainer(ctx, info.ID)
	if cerrdefs.IsNotFound(err) {
		return nil // removed meanwhile by another caller
	}
	if err != nil {
		return err
	}

	task, err := c.Task(ctx, nil)
	switch {
	case cerrdefs.IsNotFound(err):
		task = nil
	case err != nil:
		return fmt.Errorf("task: %w", err)
	}
	netns := ""
	if task != nil {
		if st, err := task.Status(ctx); err == nil && st.Status != client.Stopped {
			netns = netnsPath(task.Pid())
		}
	}
	if err := r.detach(ctx, c.ID(), netns, rec); err != nil {
		// The container goes anyway: a CNI DEL that fails now would fail
		// on every retry, and keeping the container would not help.
		r.log.Warn("containerd: leave network", "container", c.ID(), "network", rec.Network, "error", err)
	}
	if task != nil {
		if _, err := task.Delete(ctx, client.WithProcessKill); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("delete task: %w", err)
		}
	}
	if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("delete container: %w", err)
	}
	var errs []error
	if err := r.release(c.ID()); err != nil {
		errs = append(errs, fmt.Errorf("release host ports: %w", err))
	}
	if err := r.removeVolumes(ctx, rec.Volumes); err != nil {
		errs = append(errs, err)
	}
	if rec.Log != "" {
		if err := os.Remove(rec.Log); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
