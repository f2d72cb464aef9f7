package docker

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
	"github.com/docker/go-units"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// Run creates and starts a detached container from spec and reports it as
// inspect sees it after the start (with the host ports actually bound). If
// the start fails, the container is removed before the error is returned.
//
// The daemon picks an ephemeral host port at the start, from the kernel's
// ephemeral range and by its own bookkeeping only, and then binds it: a
// port another process holds (another runtime's container, typically)
// fails the start. When the taken port is not one that spec asked for
// explicitly and spec has an ephemeral port, Run removes the container and
// creates it again, up to adapterkit.MaxRunAttempts times; the daemon then
// picks other ports. A taken fixed host port is a real conflict and is
// never retried.
func (r *Runtime) Run(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	const op = runtime.OpRun
	return adapterkit.Runner{
		Runtime:   Name,
		Log:       r.log,
		Create:    func(ctx context.Context) (string, error) { return r.create(ctx, op, spec) },
		Start:     r.start,
		Inspect:   func(ctx context.Context, id string) (runtime.Container, error) { return r.inspect(ctx, op, id) },
		Discard:   func(ctx context.Context, id string) error { return r.discard(ctx, op, id) },
		PortBusy:  hostPortBusy,
		Retryable: retryable,
		Wrap:      func(object string, err error) error { return r.wrap(op, object, err) },
	}.Run(ctx, spec)
}

// start starts a created container; beforeStart, when set, runs first.
func (r *Runtime) start(ctx context.Context, attempt int, id string) error {
	if r.beforeStart != nil {
		if err := r.beforeStart(ctx, attempt, id); err != nil {
			return err
		}
	}
	return r.cli.ContainerStart(ctx, id, container.StartOptions{})
}

// retryable reports whether a start that failed on the taken host port
// (0: the daemon did not say which) may succeed with fresh ephemeral
// ports: ports has an ephemeral one, and the taken port is none of those
// asked for explicitly.
func retryable(ports []runtime.PortSpec, taken int) bool {
	ephemeral := false
	for _, p := range ports {
		if p.HostPort == 0 {
			ephemeral = true
		} else if p.HostPort == taken {
			return false
		}
	}
	return ephemeral
}

// Create creates a container from spec without starting it (state
// "created"), as runtime.ContainerRuntime.Create says; the lifecycle code only uses
// Run.
func (r *Runtime) Create(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	id, err := r.create(ctx, runtime.OpCreate, spec)
	if err != nil {
		return runtime.Container{}, err
	}
	c, err := r.inspect(ctx, runtime.OpCreate, id)
	if err != nil {
		r.discard(ctx, runtime.OpCreate, id)
		return runtime.Container{}, err
	}
	return c, nil
}

// create creates the container and checks that the daemon kept every limit
// it was asked for; it returns the container's ID.
func (r *Runtime) create(ctx context.Context, op string, spec runtime.RunSpec) (string, error) {
	obj := adapterkit.Object(spec, "")
	spec, err := spec.Normalize()
	if err != nil {
		return "", r.wrap(op, obj, err)
	}
	if err := r.negotiate(ctx, op, obj); err != nil {
		return "", err
	}
	if spec.Network != "" && len(spec.Ports) > 0 {
		// An internal network has no route out: a published port there
		// would be a promise the network does not keep.
		n, ok, err := r.lookupNetwork(ctx, op, spec.Network)
		if err != nil {
			return "", err
		}
		if ok && n.Internal {
			return "", r.wrap(op, obj, adapterkit.WithKind(runtime.ErrInvalid,
				"network %q is internal: no port can be published from it", spec.Network))
		}
	}
	cfg, hostCfg, netCfg := containerConfig(spec)
	resp, err := r.cli.ContainerCreate(ctx, cfg, hostCfg, netCfg, nil, spec.Name)
	if err != nil {
		if isMissingImage(err) {
			err = fmt.Errorf("image %q: %w", spec.Image, err)
		}
		return "", r.wrap(op, obj, err)
	}
	for _, w := range resp.Warnings {
		r.log.WarnContext(ctx, "docker: daemon warning on create", "container", adapterkit.Object(spec, resp.ID), "warning", w)
	}
	got, err := r.cli.ContainerInspect(ctx, resp.ID)
	if err != nil {
		r.discard(ctx, op, resp.ID)
		return "", r.wrap(op, adapterkit.Object(spec, resp.ID), err)
	}
	if err := checkLimits(hostCfg.Resources, got.HostConfig, resp.Warnings); err != nil {
		r.discard(ctx, op, resp.ID)
		return "", r.wrap(op, adapterkit.Object(spec, resp.ID), adapterkit.WithKind(runtime.ErrUnsupported, "%w", err))
	}
	return resp.ID, nil
}

// discard force-removes a container that create or run could not complete
// (see adapterkit.Discard).
func (r *Runtime) discard(ctx context.Context, op, id string) error {
	return adapterkit.Discard(ctx, r.log, Name, op, id, func(ctx context.Context, id string) error {
		return r.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	})
}

// containerConfig maps a normalised RunSpec (runtime.RunSpec.Normalize)
// onto the Engine API's create request. It never sets privileges, binds or
// mounts beyond spec.Tmpfs, and confines the container as the port's
// contract says (runtime/confine.go): the daemon's default seccomp profile
// (no seccomp option overrides it), no-new-privileges, every capability
// dropped but those of spec.Capabilities.
func containerConfig(spec runtime.RunSpec) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	cfg := &container.Config{
		Image:      spec.Image,
		Env:        adapterkit.EnvList(spec.Env),
		Entrypoint: spec.Entrypoint,
		Cmd:        spec.Command,
		Labels:     maps.Clone(spec.Labels),
	}
	hostCfg := &container.HostConfig{
		Privileged:  false,
		SecurityOpt: []string{"no-new-privileges"},
		CapDrop:     []string{"ALL"},
		CapAdd:      spec.CapabilityNames(),
		Tmpfs:       maps.Clone(spec.Tmpfs),
		Resources: container.Resources{
			Memory:   spec.MemoryBytes,
			NanoCPUs: nanoCPUs(spec.CPUs),
		},
	}
	if spec.PidsLimit > 0 {
		hostCfg.PidsLimit = &spec.PidsLimit
	}
	for _, u := range spec.Ulimits {
		hostCfg.Ulimits = append(hostCfg.Ulimits, &units.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	var netCfg *network.NetworkingConfig
	if spec.Network != "" {
		hostCfg.NetworkMode = container.NetworkMode(spec.Network)
		netCfg = &network.NetworkingConfig{
			EndpointsConfig: map[string]*network.EndpointSettings{spec.Network: {}},
		}
	}
	if len(spec.Ports) > 0 {
		cfg.ExposedPorts = nat.PortSet{}
		hostCfg.PortBindings = nat.PortMap{}
	}
	for _, p := range spec.Ports {
		port := nat.Port(strconv.Itoa(p.ContainerPort) + "/" + p.Protocol)
		hostPort := ""
		if p.HostPort != 0 {
			hostPort = strconv.Itoa(p.HostPort)
		}
		cfg.ExposedPorts[port] = struct{}{}
		hostCfg.PortBindings[port] = append(hostCfg.PortBindings[port], nat.PortBinding{HostIP: p.HostIP, HostPort: hostPort})
	}
	return cfg, hostCfg, netCfg
}

// nanoCPUs converts fractional cores to the API's billionths of a core.
func nanoCPUs(cpus float64) int64 {
	return int64(math.Round(cpus * 1e9))
}

// checkLimits compares the limits asked for with those the daemon stored.
// Some daemons (20.10 among them) accept a limit their kernel cannot
// enforce, drop it and only warn: that must not pass silently.
func checkLimits(asked container.Resources, got *container.HostConfig, warnings []string) error {
	var dropped []string
	for _, w := range warnings {
		if strings.Contains(strings.ToLower(w), "discarded") {
			dropped = append(dropped, w)
		}
	}
	if got == nil {
		got = &container.HostConfig{}
	}
	if asked.Memory != 0 && got.Memory != asked.Memory {
		dropped = append(dropped, fmt.Sprintf("memory limit %d bytes stored as %d", asked.Memory, got.Memory))
	}
	if asked.NanoCPUs != 0 && got.NanoCPUs != asked.NanoCPUs {
		dropped = append(dropped, fmt.Sprintf("CPU limit %d nano-CPUs stored as %d", asked.NanoCPUs, got.NanoCPUs))
	}
	if asked.PidsLimit != nil && (got.PidsLimit == nil || *got.PidsLimit != *asked.PidsLimit) {
		stored := "none"
		if got.PidsLimit != nil {
			stored = strconv.FormatInt(*got.PidsLimit, 10)
		}
		dropped = append(dropped, fmt.Sprintf("pids limit %d stored as %s", *asked.PidsLimit, stored))
	}
	if len(dropped) > 0 {
		return fmt.Errorf("the daemon did not keep the requested limits: %s", strings.Join(dropped, "; "))
	}
	return nil
}
