package podman

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// List returns every container, in any state, whose labels contain every
// key=value pair of selector, in one request. The service filters by label
// and the result is checked again with runtime.MatchLabels, so that values
// with spaces or wildcard characters match exactly. Listed containers carry
// the names of their networks without addresses (Inspect has those) and
// no mounts.
func (r *Runtime) List(ctx context.Context, selector map[string]string) ([]runtime.Container, error) {
	const op = runtime.OpList
	obj := adapterkit.SelectorString(selector)
	c, err := r.connect(ctx, op, obj)
	if err != nil {
		return nil, err
	}
	var labels []string
	for _, k := range slices.Sorted(maps.Keys(selector)) {
		v := selector[k]
		// The service trims and globs; a pair it might misread is left to
		// the exact check below rather than risk a false negative.
		if v == "" || strings.TrimSpace(v) != v || strings.ContainsAny(k+v, "*?[") {
			continue
		}
		labels = append(labels, k+"="+v)
	}
	listed, err := c.listContainers(ctx, labels)
	if err != nil {
		return nil, r.wrap(op, obj, err)
	}
	out := make([]runtime.Container, 0, len(listed))
	for _, lc := range listed {
		if !runtime.MatchLabels(lc.Labels, selector) {
			continue
		}
		ctr, err := lc.container()
		if err != nil {
			return nil, r.wrap(op, obj, err)
		}
		out = append(out, ctr)
	}
	adapterkit.FillOOMKilled(ctx, out, c.oomKilled)
	return out, nil
}

// container converts a list entry into the port's type.
func (lc *listedContainer) container() (runtime.Container, error) {
	created, err := parseCreated(lc.Created)
	if err != nil {
		return runtime.Container{}, fmt.Errorf("container %s: creation time %s: %w", lc.ID, lc.Created, err)
	}
	c := runtime.Container{
		ID:       lc.ID,
		Image:    lc.Image,
		Labels:   maps.Clone(lc.Labels),
		State:    state(lc.State),
		ExitCode: lc.ExitCode,
		Created:  created,
		Networks: map[string]string{},
	}
	if len(lc.Names) > 0 {
		c.Name = strings.TrimPrefix(lc.Names[0], "/")
	}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	for _, n := range lc.Networks {
		c.Networks[n] = ""
	}
	for _, p := range lc.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = "tcp"
		}
		for i := range max(p.Range, 1) {
			c.Ports = append(c.Ports, runtime.PortBinding{
				ContainerPort: p.ContainerPort + i,
				Protocol:      proto,
				HostIP:        p.HostIP,
				HostPort:      p.HostPort + i,
			})
		}
	}
	return c, nil
}

// parseCreated reads a creation time given as an RFC 3339 string or as
// Unix seconds.
func parseCreated(raw json.RawMessage) (time.Time, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return time.Parse(time.RFC3339Nano, s)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(n, 0), nil
}

// Snapshot lists every container in one request and picks the matches of
// selector from it; every container's ID and names are its references, as
// the podman CLI accepts them.
func (r *Runtime) Snapshot(ctx context.Context, selector map[string]string) (runtime.Snapshot, error) {
	const op = runtime.OpSnapshot
	obj := adapterkit.SelectorString(selector)
	c, err := r.connect(ctx, op, obj)
	if err != nil {
		return runtime.Snapshot{}, err
	}
	listed, err := c.listContainers(ctx, nil)
	if err != nil {
		return runtime.Snapshot{}, r.wrap(op, obj, err)
	}
	snap := runtime.Snapshot{Refs: make(map[string]bool, 2*len(listed))}
	for _, lc := range listed {
		snap.Refs[lc.ID] = true
		for _, n := range lc.Names {
			snap.Refs[strings.TrimPrefix(n, "/")] = true
		}
		if !runtime.MatchLabels(lc.Labels, selector) {
			continue
		}
		ctr, err := lc.container()
		if err != nil {
			return runtime.Snapshot{}, r.wrap(op, obj, err)
		}
		snap.Matched = append(snap.Matched, ctr)
	}
	adapterkit.FillOOMKilled(ctx, snap.Matched, c.oomKilled)
	return snap, nil
}

// oomKilled reads one container's State.OOMKilled, which the list
// endpoint leaves out.
func (c *client) oomKilled(ctx context.Context, id string) (bool, error) {
	ci, err := c.inspectContainer(ctx, id)
	if err != nil {
		return false, err
	}
	return ci.State.OOMKilled, nil
}
