package docker

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"

	"github.com/roboco/sandboxer/runtime"
)

// Inspect reports a container's current state; an absent container is
// runtime.ErrNotFound.
func (r *Runtime) Inspect(ctx context.Context, ref string) (runtime.Container, error) {
	return r.inspect(ctx, runtime.OpInspect, ref)
}

// inspect is Inspect with the verb to blame in errors.
func (r *Runtime) inspect(ctx context.Context, op, ref string) (runtime.Container, error) {
	if err := r.negotiate(ctx, op, ref); err != nil {
		return runtime.Container{}, err
	}
	resp, err := r.cli.ContainerInspect(ctx, ref)
	if err != nil {
		return runtime.Container{}, r.wrap(op, ref, err)
	}
	return fromInspect(resp), nil
}

// fromInspect maps the Engine API's inspect response to runtime.Container.
func fromInspect(resp container.InspectResponse) runtime.Container {
	var c runtime.Container
	if resp.ContainerJSONBase != nil {
		c.ID = resp.ID
		c.Name = strings.TrimPrefix(resp.Name, "/")
		c.Created, _ = time.Parse(time.RFC3339Nano, resp.Created)
		c.State = runtime.StateUnknown
		if resp.State != nil {
			c.State = normaliseState(resp.State.Status)
			c.ExitCode = resp.State.ExitCode
			c.OOMKilled = resp.State.OOMKilled
		}
		if resp.HostConfig != nil {
			c.Privileged = resp.HostConfig.Privileged
			for dst := range resp.HostConfig.Tmpfs {
				c.Mounts = append(c.Mounts, runtime.Mount{Type: "tmpfs", Source: "tmpfs", Destination: dst})
			}
		}
	}
	if resp.Config != nil {
		c.Image = resp.Config.Image
		c.Labels = cloneLabels(resp.Config.Labels)
	}
	if resp.NetworkSettings != nil {
		c.Networks = addresses(resp.NetworkSettings.Networks)
		c.Ports = portBindings(resp.NetworkSettings.Ports)
	}
	for _, m := range resp.Mounts {
		src := m.Source
		if m.Type == mount.TypeVolume {
			src = m.Name
		}
		c.Mounts = append(c.Mounts, runtime.Mount{Type: string(m.Type), Source: src, Destination: m.Destination})
	}
	slices.SortFunc(c.Mounts, func(a, b runtime.Mount) int { return cmp.Compare(a.Destination, b.Destination) })
	return c
}

// normaliseState maps Docker's container states onto the port's.
func normaliseState(s container.ContainerState) runtime.State {
	switch s {
	case container.StateCreated:
		return runtime.StateCreated
	case container.StateRunning, container.StateRestarting:
		return runtime.StateRunning
	case container.StatePaused:
		return runtime.StatePaused
	case container.StateExited, container.StateDead:
		return runtime.StateExited
	default:
		return runtime.StateUnknown
	}
}

// addresses maps network name -> IPv4 address, for the networks on which
// the container has one (a created container has none yet).
func addresses(networks map[string]*network.EndpointSettings) map[string]string {
	out := map[string]string{}
	for name, ep := range networks {
		if ep != nil && ep.IPAddress != "" {
			out[name] = ep.IPAddress
		}
	}
	return out
}

// portBindings flattens the bound ports (exposed-only ports have no
// binding and are left out), in a stable order.
func portBindings(pm nat.PortMap) []runtime.PortBinding {
	var out []runtime.PortBinding
	for port, bindings := range pm {
		for _, b := range bindings {
			hostPort, err := strconv.Atoi(b.HostPort)
			if err != nil || hostPort == 0 {
				continue
			}
			out = append(out, runtime.PortBinding{
				ContainerPort: port.Int(),
				Protocol:      port.Proto(),
				HostIP:        b.HostIP,
				HostPort:      hostPort,
			})
		}
	}
	sortPorts(out)
	return out
}

func sortPorts(ps []runtime.PortBinding) {
	slices.SortFunc(ps, func(a, b runtime.PortBinding) int {
		return cmp.Or(
			cmp.Compare(a.ContainerPort, b.ContainerPort),
			cmp.Compare(a.Protocol, b.Protocol),
			cmp.Compare(a.HostIP, b.HostIP),
			cmp.Compare(a.HostPort, b.HostPort),
		)
	})
}

// cloneLabels copies labels, as an empty (non-nil) map when there are none,
// so that a round trip compares equal to what was asked.
func cloneLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		out[k] = v
	}
	return out
}
