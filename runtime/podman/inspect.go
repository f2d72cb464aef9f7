package podman

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/roboco/sandboxer/runtime"
)

// Inspect reports a container's current state. An absent container is
// runtime.ErrNotFound.
func (r *Runtime) Inspect(ctx context.Context, container string) (runtime.Container, error) {
	const op = runtime.OpInspect
	c, err := r.connect(ctx, op, container)
	if err != nil {
		return runtime.Container{}, err
	}
	return r.inspect(ctx, c, op, container)
}

// inspect is Inspect for a verb that already holds the client.
func (r *Runtime) inspect(ctx context.Context, c *client, op, container string) (runtime.Container, error) {
	raw, err := c.inspectContainer(ctx, container)
	if err != nil {
		return runtime.Container{}, r.wrap(op, container, err)
	}
	return raw.container(), nil
}

// container converts an inspect into the port's type.
func (ci *containerInspect) container() runtime.Container {
	c := runtime.Container{
		ID:       ci.ID,
		Name:     strings.TrimPrefix(ci.Name, "/"),
		Image:    ci.ImageName,
		Labels:   maps.Clone(ci.Config.Labels),
		State:    state(ci.State.Status),
		ExitCode: ci.State.ExitCode,
		// Podman < 5 leaves this false (containers/podman#13102: conmon's
		// "oom" file was not read back); Version says which.
		OOMKilled: ci.State.OOMKilled,
		Created:   ci.Created,
		Networks:  map[string]string{},
	}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	for name, n := range ci.NetworkSettings.Networks {
		c.Networks[name] = n.IPAddress
	}
	for _, key := range slices.Sorted(maps.Keys(ci.NetworkSettings.Ports)) {
		port, proto, ok := parsePortKey(key)
		if !ok {
			continue
		}
		for _, b := range ci.NetworkSettings.Ports[key] {
			hp, err := strconv.Atoi(b.HostPort)
			if err != nil || hp == 0 {
				continue // exposed, not published
			}
			c.Ports = append(c.Ports, runtime.PortBinding{ContainerPort: port, Protocol: proto, HostIP: b.HostIP, HostPort: hp})
		}
	}
	for _, m := range ci.Mounts {
		src := m.Source
		if m.Type == "volume" && m.Name != "" {
			src = m.Name
		}
		c.Mounts = append(c.Mounts, runtime.Mount{Type: m.Type, Source: src, Destination: m.Destination})
	}
	if ci.HostConfig != nil {
		c.Privileged = ci.HostConfig.Privileged
		for _, dst := range slices.Sorted(maps.Keys(ci.HostConfig.Tmpfs)) {
			c.Mounts = append(c.Mounts, runtime.Mount{Type: "tmpfs", Source: "tmpfs", Destination: dst})
		}
	}
	return c
}

// parsePortKey reads "8080/tcp".
func parsePortKey(key string) (int, string, bool) {
	p, proto, ok := strings.Cut(key, "/")
	if !ok {
		proto = "tcp"
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return 0, "", false
	}
	return n, proto, true
}

// state maps libpod's container states onto the port's.
func state(s string) runtime.State {
	switch strings.ToLower(s) {
	case "created", "configured", "initialized":
		return runtime.StateCreated
	case "running", "stopping":
		return runtime.StateRunning
	case "paused":
		return runtime.StatePaused
	case "exited", "stopped":
		return runtime.StateExited
	default:
		return runtime.StateUnknown
	}
}
