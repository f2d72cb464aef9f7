package containerd

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/sys/signal"

	"github.com/roboco/sandboxer/runtime"
)

// Stop sends the stop signal (the image's, else SIGTERM) to the container
// ref names (an ID or a name, see getContainer), waits up to grace for its
// task to exit, then kills it. A container that is not running is left as
// it is.
func (r *Runtime) Stop(ctx context.Context, ref string, grace time.Duration) error {
	const op = runtime.OpStop
	ctx = r.ctx(ctx)
	if err := r.ready(ctx, op, ref); err != nil {
		return err
	}
	info, err := r.getContainer(ctx, op, ref)
	if err != nil {
		return err
	}
	rec, err := recordOf(info)
	if err != nil {
		return r.wrap(op, ref, err)
	}
	sig := syscall.SIGTERM
	if rec.StopSignal != "" {
		if s, err := signal.ParseSignal(rec.StopSignal); err == nil {
			sig = s
		}
	}
	return r.wrap(op, ref, r.stop(ctx, info.ID, sig, grace))
}

// Kill sends SIGKILL and returns once the task has exited. A container that
// is not running is left as it is.
func (r *Runtime) Kill(ctx context.Context, ref string) error {
	const op = runtime.OpKill
	ctx = r.ctx(ctx)
	if err := r.ready(ctx, op, ref); err != nil {
		return err
	}
	info, err := r.getContainer(ctx, op, ref)
	if err != nil {
		return err
	}
	return r.wrap(op, ref, r.stop(ctx, info.ID, syscall.SIGKILL, 0))
}

// stop signals the task of the container whose ID is id and waits for its
// exit; after grace (at once for
// SIGKILL) it sends SIGKILL to every process of the container.
func (r *Runtime) stop(ctx context.Context, id string, sig syscall.Signal, grace time.Duration) error {
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return err
	}
	task, err := c.Task(ctx, nil)
	if cerrdefs.IsNotFound(err) {
		return nil // never started: nothing runs
	}
	if err != nil {
		return err
	}
	st, err := task.Status(ctx)
	if err != nil {
		return err
	}
	if st.Status == client.Stopped {
		return nil
	}
	exited, err := task.Wait(ctx)
	if err != nil {
		return err
	}
	if sig != syscall.SIGKILL {
		if err := task.Kill(ctx, sig); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("signal %v: %w", sig, err)
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-exited:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
	}
	if err := task.Kill(ctx, syscall.SIGKILL, client.WithKillAll); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("kill: %w", err)
	}
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
