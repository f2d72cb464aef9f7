package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// List returns every container, in any state, whose labels contain every
// key=value pair of selector (all containers for an empty selector). The
// daemon filters; the result is checked again with runtime.MatchLabels so
// that List means exactly the same here as on every other backend. Mounts
// are not filled.
func (r *Runtime) List(ctx context.Context, selector map[string]string) ([]runtime.Container, error) {
	obj := adapterkit.SelectorString(selector)
	if err := r.negotiate(ctx, runtime.OpList, obj); err != nil {
		return nil, err
	}
	args := filters.NewArgs()
	for k, v := range selector {
		args.Add("label", k+"="+v)
	}
	summaries, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return nil, r.wrap(runtime.OpList, obj, err)
	}
	out := make([]runtime.Container, 0, len(summaries))
	for _, s := range summaries {
		if runtime.MatchLabels(s.Labels, selector) {
			out = append(out, fromSummary(s))
		}
	}
	adapterkit.FillOOMKilled(ctx, out, r.oomKilled)
	return out, nil
}

// fromSummary maps a list entry to runtime.Container.
func fromSummary(s container.Summary) runtime.Container {
	c := runtime.Container{
		ID:      s.ID,
		Image:   s.Image,
		Labels:  cloneLabels(s.Labels),
		State:   normaliseState(s.State),
		Created: time.Unix(s.Created, 0),
	}
	if len(s.Names) > 0 {
		c.Name = strings.TrimPrefix(s.Names[0], "/")
	}
	if c.State == runtime.StateExited {
		c.ExitCode = exitCode(s.Status)
	}
	if s.NetworkSettings != nil {
		c.Networks = addresses(s.NetworkSettings.Networks)
	}
	for _, p := range s.Ports {
		if p.PublicPort == 0 {
			continue
		}
		c.Ports = append(c.Ports, runtime.PortBinding{
			ContainerPort: int(p.PrivatePort),
			Protocol:      p.Type,
			HostIP:        p.IP,
			HostPort:      int(p.PublicPort),
		})
	}
	sortPorts(c.Ports)
	return c
}

// exitCode reads the exit code from a list entry's status, the only place
// the list endpoint reports it: "Exited (137) 5 seconds ago".
func exitCode(status string) int {
	var code int
	if _, err := fmt.Sscanf(status, "Exited (%d)", &code); err != nil {
		return 0
	}
	return code
}

// Snapshot lists every container in one request and picks the matches of
// selector from it; every container's ID and name (without Docker's
// leading "/") are its references, as the docker CLI accepts them.
func (r *Runtime) Snapshot(ctx context.Context, selector map[string]string) (runtime.Snapshot, error) {
	obj := adapterkit.SelectorString(selector)
	if err := r.negotiate(ctx, runtime.OpSnapshot, obj); err != nil {
		return runtime.Snapshot{}, err
	}
	summaries, err := r.cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return runtime.Snapshot{}, r.wrap(runtime.OpSnapshot, obj, err)
	}
	snap := runtime.Snapshot{Refs: make(map[string]bool, 2*len(summaries))}
	for _, s := range summaries {
		snap.Refs[s.ID] = true
		for _, n := range s.Names {
			snap.Refs[strings.TrimPrefix(n, "/")] = true
		}
		if runtime.MatchLabels(s.Labels, selector) {
			snap.Matched = append(snap.Matched, fromSummary(s))
		}
	}
	adapterkit.FillOOMKilled(ctx, snap.Matched, r.oomKilled)
	return snap, nil
}

// oomKilled reads one container's State.OOMKilled, which the list
// endpoint leaves out.
func (r *Runtime) oomKilled(ctx context.Context, id string) (bool, error) {
	resp, err := r.cli.ContainerInspect(ctx, id)
	if err != nil || resp.ContainerJSONBase == nil || resp.State == nil {
		return false, err
	}
	return resp.State.OOMKilled, nil
}
