package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/runtime"
)

// DockerFloor is the Docker Engine API through the official client, as
// `docker run -d` would use it: create, start, then one inspect for the
// published port. It is what the Docker adapter is compared with.
type DockerFloor struct {
	cli *client.Client
}

// NewDockerFloor connects to host (as DOCKER_HOST is written), or to
// DOCKER_HOST and the default socket when host is empty. It does not
// contact the daemon.
func NewDockerFloor(host string) (*DockerFloor, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker floor: %w", err)
	}
	return &DockerFloor{cli: cli}, nil
}

// Describe names the floor.
func (*DockerFloor) Describe() string {
	return "Docker Engine API via github.com/docker/docker/client (create, start, inspect)"
}

// Run creates and starts the container spec describes, with the same
// image, env, command, labels, tmpfs, limits, network and published ports
// as the adapter would ask for, then inspects it once for the published
// port (host mode) or the address on spec.Network (network mode).
func (f *DockerFloor) Run(ctx context.Context, spec runtime.RunSpec) (string, engines.Endpoint, error) {
	cfg := &container.Config{Image: spec.Image, Cmd: spec.Command, Entrypoint: spec.Entrypoint, Labels: spec.Labels}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		cfg.Env = append(cfg.Env, k+"="+spec.Env[k])
	}
	hc := &container.HostConfig{
		Tmpfs:     spec.Tmpfs,
		Resources: container.Resources{Memory: spec.MemoryBytes, NanoCPUs: int64(math.Round(spec.CPUs * 1e9))},
	}
	if spec.Network != "" {
		hc.NetworkMode = container.NetworkMode(spec.Network)
	}
	var port nat.Port
	if len(spec.Ports) > 0 {
		p := spec.Ports[0]
		var err error
		if port, err = nat.NewPort("tcp", strconv.Itoa(p.ContainerPort)); err != nil {
			return "", engines.Endpoint{}, err
		}
		hostIP := p.HostIP
		if hostIP == "" {
			hostIP = runtime.DefaultHostIP
		}
		cfg.ExposedPorts = nat.PortSet{port: {}}
		hc.PortBindings = nat.PortMap{port: {{HostIP: hostIP}}}
	}
	resp, err := f.cli.ContainerCreate(ctx, cfg, hc, nil, nil, spec.Name)
	if err != nil {
		return "", engines.Endpoint{}, fmt.Errorf("docker create %s: %w", spec.Name, err)
	}
	if err := f.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return resp.ID, engines.Endpoint{}, fmt.Errorf("docker start %s: %w", spec.Name, err)
	}
	if port == "" && spec.Network == "" {
		return resp.ID, engines.Endpoint{}, nil
	}
	got, err := f.cli.ContainerInspect(ctx, resp.ID)
	if err != nil {
		return resp.ID, engines.Endpoint{}, fmt.Errorf("docker inspect %s: %w", spec.Name, err)
	}
	if got.NetworkSettings == nil {
		return resp.ID, engines.Endpoint{}, errors.New("docker: no network settings for " + spec.Name)
	}
	if port == "" {
		if n := got.NetworkSettings.Networks[spec.Network]; n != nil && n.IPAddress != "" {
			return resp.ID, engines.Endpoint{Host: n.IPAddress}, nil
		}
		return resp.ID, engines.Endpoint{}, fmt.Errorf("docker: no address on network %q for %s", spec.Network, spec.Name)
	}
	for _, b := range got.NetworkSettings.Ports[port] {
		if n, err := strconv.Atoi(b.HostPort); err == nil && n > 0 {
			return resp.ID, engines.Endpoint{Host: runtime.DefaultHostIP, Port: n}, nil
		}
	}
	return resp.ID, engines.Endpoint{}, errors.New("docker: no host port bound for " + string(port))
}

// Remove force-removes a container and its anonymous volumes.
func (f *DockerFloor) Remove(ctx context.Context, id string) error {
	err := f.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker remove %s: %w", id, err)
	}
	return nil
}

// ImageExists inspects ref.
func (f *DockerFloor) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, err := f.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// List counts the containers, in any state, whose labels match selector.
func (f *DockerFloor) List(ctx context.Context, selector map[string]string) (int, error) {
	args := filters.NewArgs()
	for k, v := range selector {
		args.Add("label", k+"="+v)
	}
	cs, err := f.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	return len(cs), err
}

// Close releases the client.
func (f *DockerFloor) Close() error { return f.cli.Close() }
