package podman

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.podman.io/podman/v6/pkg/bindings"

	"github.com/roboco/sandboxer/runtime"
)

// Inspect reports a container's current state. An absent container is
// runtime.ErrNotFound.
func (r *Runtime) Inspect(ctx context.Context, container string) (runtime.Container, error) {
	const op = runtime.OpInspect
	conn, svc, err := r.connect(ctx, op, container)
	if err != nil {
		return runtime.Container{}, err
	}
	return r.inspect(ctx, conn, svc, op, container)
}

// inspect is Inspect for a verb that already holds the connection.
func (r *Runtime) inspect(ctx context.Context, conn *bindings.Connection, svc *service, op, container string) (runtime.Container, error) {
	raw, err := inspectRaw(ctx, conn, svc, container)
	if err != nil {
		return runtime.Container{}, r.wrap(op, container, err)
	}
	return raw.container(), nil
}

// containerInspect is the part of GET /containers/{name}/json the adapter
// reads.
type containerInspect struct {
	ID        string    `json:"Id"`
	Name      string    `json:"Name"`
	Created   time.Time `json:"Created"`
	ImageName string    `json:"ImageName"`
	State     struct {
		Status   string `json:"Status"`
		Running  bool   `json:"Running"`
		ExitCode int    `json:"ExitCode"`
	} `json:"State"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	HostConfig *hostConfig `json:"HostConfig"`
	Mounts     []struct {
		Type        string `json:"Type"`
		Name        string `json:"Name"`
		Source      string `json:"Source"`
		Destination string `json:"Destination"`
	} `json:"Mounts"`
	NetworkSettings struct {
		IPAddress string `json:"IPAddress"`
		Ports     map[string][]struct {
			HostIP   string `json:"HostIp"`
			HostPort string `json:"HostPort"`
		} `json:"Ports"`
		Networks map[string]struct {
			IPAddress string `json:"IPAddress"`
		} `json:"Networks"`
	} `json:"NetworkSettings"`
}

// hostConfig is the part of an inspect's HostConfig the adapter reads.
type hostConfig struct {
	Memory     int64             `json:"Memory"`
	NanoCPUs   int64             `json:"NanoCpus"`
	CPUQuota   int64             `json:"CpuQuota"`
	CPUPeriod  uint64            `json:"CpuPeriod"`
	PidsLimit  int64             `json:"PidsLimit"`
	Privileged bool              `json:"Privileged"`
	Tmpfs      map[string]string `json:"Tmpfs"`
}

// cpus is the stored CPU limit in cores (0: none).
func (h *hostConfig) cpus() float64 {
	switch {
	case h.NanoCPUs > 0:
		return float64(h.NanoCPUs) / 1e9
	case h.CPUQuota > 0 && h.CPUPeriod > 0:
		return float64(h.CPUQuota) / float64(h.CPUPeriod)
	default:
		return 0
	}
}

func inspectRaw(ctx context.Context, conn *bindings.Connection, svc *service, container string) (*containerInspect, error) {
	var out containerInspect
	err := call(ctx, conn, svc, request{method: http.MethodGet, path: "/containers/%s/json", pathValues: []string{container}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
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
		Created:  ci.Created,
		Networks: map[string]string{},
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
