package docker

import (
	"context"
	"math"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/roboco/sandboxer/runtime"
)

// Stop sends the container's stop signal (the image's StopSignal, else
// SIGTERM), waits up to grace (rounded up to whole seconds, the API's
// unit) and then kills it; it returns once the container has stopped. A
// container that is not running is not an error; an absent one is
// runtime.ErrNotFound.
func (r *Runtime) Stop(ctx context.Context, ref string, grace time.Duration) error {
	if err := r.negotiate(ctx, runtime.OpStop, ref); err != nil {
		return err
	}
	secs := int(math.Ceil(max(grace, 0).Seconds()))
	// The daemon answers 304 for a container that is not running, which
	// the client reports as success.
	if err := r.cli.ContainerStop(ctx, ref, container.StopOptions{Timeout: &secs}); err != nil {
		return r.wrap(runtime.OpStop, ref, err)
	}
	return nil
}

// Kill sends SIGKILL and returns once the container is no longer running.
// A container that is not running is not an error; an absent one is
// runtime.ErrNotFound.
func (r *Runtime) Kill(ctx context.Context, ref string) error {
	if err := r.negotiate(ctx, runtime.OpKill, ref); err != nil {
		return err
	}
	if err := r.cli.ContainerKill(ctx, ref, "SIGKILL"); err != nil {
		// 409: "container ... is not running" (or stopped meanwhile).
		if !cerrdefs.IsConflict(err) {
			return r.wrap(runtime.OpKill, ref, err)
		}
	}
	waitC, errC := r.cli.ContainerWait(ctx, ref, container.WaitConditionNotRunning)
	select {
	case <-waitC:
		return nil
	case err := <-errC:
		if cerrdefs.IsNotFound(err) {
			// Removed meanwhile (e.g. auto-remove): certainly not running.
			return nil
		}
		return r.wrap(runtime.OpKill, ref, err)
	}
}
