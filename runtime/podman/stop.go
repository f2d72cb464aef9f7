package podman

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/roboco/sandboxer/runtime"
)

const (
	// killTimeout bounds the wait for a killed container to be reported
	// as no longer running.
	killTimeout = 30 * time.Second
	// statePoll is how often that wait asks again.
	statePoll = 20 * time.Millisecond
)

// Stop sends the container's stop signal (SIGTERM unless the image says
// otherwise), waits up to grace (rounded up to whole seconds, as the API
// counts), then kills it; it returns once the container has stopped. Stop
// of a container that is not running is not an error; of an absent one it
// is runtime.ErrNotFound.
func (r *Runtime) Stop(ctx context.Context, container string, grace time.Duration) error {
	const op = runtime.OpStop
	c, err := r.connect(ctx, op, container)
	if err != nil {
		return err
	}
	secs := int(math.Ceil(max(grace, 0).Seconds()))
	if err := c.stopContainer(ctx, container, secs); err != nil {
		return r.notRunningIsDone(ctx, c, op, container, err)
	}
	return nil
}

// Kill sends SIGKILL and returns once the container is no longer running.
// Kill of a container that is not running is not an error; of an absent
// one it is runtime.ErrNotFound.
func (r *Runtime) Kill(ctx context.Context, container string) error {
	const op = runtime.OpKill
	c, err := r.connect(ctx, op, container)
	if err != nil {
		return err
	}
	if err := c.killContainer(ctx, container, "SIGKILL"); err != nil {
		return r.notRunningIsDone(ctx, c, op, container, err)
	}
	return r.waitNotRunning(ctx, c, op, container)
}

// notRunningIsDone turns the refusal to stop or kill a container that is
// not running (libpod answers 409 "container state improper") into
// success, after checking that it is indeed not running.
func (r *Runtime) notRunningIsDone(ctx context.Context, c *client, op, container string, err error) error {
	code, _ := status(err)
	if code != http.StatusConflict && code != http.StatusInternalServerError {
		return r.wrap(op, container, err)
	}
	ci, ierr := c.inspectContainer(ctx, container)
	if ierr != nil {
		return r.wrap(op, container, errors.Join(err, ierr))
	}
	if state(ci.State.Status) == runtime.StateRunning {
		return r.wrap(op, container, err)
	}
	return nil
}

// waitNotRunning polls until the container's state is no longer running
// (a signal is delivered before the process is reaped).
func (r *Runtime) waitNotRunning(ctx context.Context, c *client, op, container string) error {
	deadline := time.Now().Add(killTimeout)
	tick := time.NewTicker(statePoll)
	defer tick.Stop()
	for {
		ci, err := c.inspectContainer(ctx, container)
		if err != nil {
			if errors.Is(kindOf(op, err), runtime.ErrNotFound) {
				return nil // removed meanwhile (e.g. by its lifetime)
			}
			return r.wrap(op, container, err)
		}
		if state(ci.State.Status) != runtime.StateRunning {
			return nil
		}
		if time.Now().After(deadline) {
			return r.wrap(op, container, fmt.Errorf("still %s %s after SIGKILL", ci.State.Status, killTimeout))
		}
		select {
		case <-ctx.Done():
			return r.wrap(op, container, ctx.Err())
		case <-tick.C:
		}
	}
}
