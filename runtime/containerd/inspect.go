package containerd

import (
	"context"
	"slices"

	"github.com/containerd/containerd/api/services/tasks/v1"
	apitask "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/typeurl/v2"

	"github.com/roboco/sandboxer/runtime"
)

// Inspect reports a container, by ID or name (see getContainer): its
// state from its task (no task: created), with the addresses and published
// ports recorded when it joined its network, and its tmpfs mounts and
// anonymous volumes. Its Name is its name label, or its ID for a container
// made when the ID was the name.
func (r *Runtime) Inspect(ctx context.Context, ref string) (runtime.Container, error) {
	const op = runtime.OpInspect
	ctx = r.ctx(ctx)
	if err := r.ready(ctx, op, ref); err != nil {
		return runtime.Container{}, err
	}
	return r.inspect(ctx, op, ref)
}

func (r *Runtime) inspect(ctx context.Context, op, ref string) (runtime.Container, error) {
	info, err := r.getContainer(ctx, op, ref)
	if err != nil {
		return runtime.Container{}, err
	}
	ts, err := r.taskState(ctx, info.ID)
	if err != nil {
		return runtime.Container{}, r.wrap(op, ref, err)
	}
	c, err := toContainer(info, ts, true)
	if err != nil {
		return runtime.Container{}, r.wrap(op, ref, err)
	}
	return c, nil
}

// taskState is a container's state as its task tells it.
type taskState struct {
	state     runtime.State
	exitCode  int
	oomKilled bool
}

// taskState asks for a container's task; no task means created.
func (r *Runtime) taskState(ctx context.Context, id string) (taskState, error) {
	resp, err := r.client.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: id})
	if err != nil {
		err = errgrpc.ToNative(err)
		if cerrdefs.IsNotFound(err) {
			return taskState{state: runtime.StateCreated}, nil
		}
		return taskState{}, err
	}
	states := map[string]taskState{id: stateOf(resp.GetProcess().GetStatus(), resp.GetProcess().GetExitStatus())}
	r.withOOM(ctx, states)
	return states[id], nil
}

// stateOf normalises a task status.
func stateOf(status apitask.Status, exit uint32) taskState {
	switch status {
	case apitask.Status_CREATED:
		return taskState{state: runtime.StateCreated}
	case apitask.Status_RUNNING:
		return taskState{state: runtime.StateRunning}
	case apitask.Status_PAUSED, apitask.Status_PAUSING:
		return taskState{state: runtime.StatePaused}
	case apitask.Status_STOPPED:
		return taskState{state: runtime.StateExited, exitCode: int(exit)}
	default:
		return taskState{state: runtime.StateUnknown}
	}
}

// toContainer builds the port's view of a container. Addresses and
// published ports are reported while the task lives; mounts only when
// asked (List leaves them out).
func toContainer(info containers.Container, ts taskState, withMounts bool) (runtime.Container, error) {
	rec, err := recordOf(info)
	if err != nil {
		return runtime.Container{}, err
	}
	c := runtime.Container{
		ID:        info.ID,
		Name:      nameOf(info),
		Image:     rec.Image,
		Labels:    userLabels(info.Labels, rec),
		State:     ts.state,
		ExitCode:  ts.exitCode,
		OOMKilled: ts.oomKilled,
		Created:   info.CreatedAt,
		Networks:  map[string]string{},
	}
	if ts.state == runtime.StateRunning || ts.state == runtime.StatePaused {
		for n, ip := range rec.Addresses {
			c.Networks[n] = ip
		}
		c.Ports = slices.Clone(rec.Published)
	}
	if withMounts {
		for _, p := range rec.Tmpfs {
			c.Mounts = append(c.Mounts, runtime.Mount{Type: "tmpfs", Source: "tmpfs", Destination: p})
		}
		for _, v := range rec.Volumes {
			c.Mounts = append(c.Mounts, runtime.Mount{Type: "volume", Source: v.Key, Destination: v.Destination})
		}
		privileged, err := isPrivileged(info)
		if err != nil {
			return runtime.Container{}, err
		}
		c.Privileged = privileged
	}
	return c, nil
}

// isPrivileged reads the container's spec: privileged means CAP_SYS_ADMIN
// in the bounding set, which the adapter never grants.
func isPrivileged(info containers.Container) (bool, error) {
	if info.Spec == nil {
		return false, nil
	}
	v, err := typeurl.UnmarshalAny(info.Spec)
	if err != nil {
		return false, err
	}
	s, ok := v.(*oci.Spec)
	if !ok || s.Process == nil || s.Process.Capabilities == nil {
		return false, nil
	}
	return slices.Contains(s.Process.Capabilities.Bounding, "CAP_SYS_ADMIN"), nil
}
