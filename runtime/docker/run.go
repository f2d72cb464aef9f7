package docker

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
	"github.com/docker/go-units"

	"github.com/roboco/sandboxer/runtime"
)

// cleanupTimeout bounds the removal of a container that Run or Create
// created but could not complete; it runs even when the caller's context
// is done, so that a failed run leaves nothing behind.
const cleanupTimeout = 30 * time.Second

// maxRunAttempts bounds how many containers Run creates for one spec whose
// ephemeral host port was taken before the daemon could bind it.
const maxRunAttempts = 3

// Run creates and starts a detached container from spec and reports it as
// inspect sees it after the start (with the host ports actually bound). If
// the start fails, the container is removed before the error is returned.
//
// The daemon picks an ephemeral host port at the start, from the kernel's
// ephemeral range and by its own bookkeeping only, and then binds it: a
// port another process holds (another runtime's container, typically)
// fails the start. When the taken port is not one that spec asked for
// explicitly and spec has an ephemeral port, Run removes the container and
// creates it again, up to maxRunAttempts times; the daemon then picks
// other ports. A taken fixed host port is a real conflict and is never
// retried.
func (r *Runtime) Run(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	for attempt := 1; ; attempt++ {
		id, err := r.create(ctx, runtime.OpRun, spec)
		if err != nil {
			return runtime.Container{}, err
		}
		err = r.start(ctx, attempt, id)
		if err == nil {
			c, err := r.inspect(ctx, runtime.OpRun, id)
			if err != nil {
				// A container the caller cannot see is one it cannot tear down.
				r.discard(ctx, runtime.OpRun, id)
				return runtime.Container{}, err
			}
			return c, nil
		}
		removed := r.discard(ctx, runtime.OpRun, id) == nil
		addr, port, busy := hostPortBusy(err)
		if !busy {
			return runtime.Container{}, r.wrap(runtime.OpRun, object(spec, id), err)
		}
		if !removed || attempt == maxRunAttempts || ctx.Err() != nil || !retryable(spec.Ports, port) {
			return runtime.Container{}, r.wrap(runtime.OpRun, object(spec, id), portBusyError(addr, attempt, err))
		}
		r.log.DebugContext(ctx, "docker: an ephemeral host port was taken before the start; retrying with fresh ports",
			"container", object(spec, id), "attempt", attempt, "port", addr, "error", err)
	}
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

// portBusyError says which published host port was taken (addr, when the
// daemon named it) and how many containers Run tried.
func portBusyError(addr string, attempts int, err error) error {
	what := "a published host port"
	if addr != "" {
		what = "published host port " + addr
	}
	if attempts > 1 {
		return fmt.Errorf("%s is already in use (%d attempts, each with fresh ephemeral host ports): %w", what, attempts, err)
	}
	return fmt.Errorf("%s is already in use: %w", what, err)
}

// Create creates a container from spec without starting it (state
// "created"). It implements runtime.Creator; the lifecycle code only uses
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
	obj := object(spec, "")
	spec, err := spec.Normalize()
	if err != nil {
		return "", runtime.NewError(Name, op, obj, nil, err)
	}
	if err := r.negotiate(ctx, op, obj); err != nil {
		return "", err
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
		r.log.WarnContext(ctx, "docker: daemon warning on create", "container", object(spec, resp.ID), "warning", w)
	}
	got, err := r.cli.ContainerInspect(ctx, resp.ID)
	if err != nil {
		r.discard(ctx, op, resp.ID)
		return "", r.wrap(op, object(spec, resp.ID), err)
	}
	if err := checkLimits(hostCfg.Resources, got.HostConfig, resp.Warnings); err != nil {
		r.discard(ctx, op, resp.ID)
		return "", runtime.NewError(Name, op, object(spec, resp.ID), runtime.ErrUnsupported, err)
	}
	return resp.ID, nil
}

// discard force-removes a container that create or run could not complete,
// even when ctx is already done. A failure is logged, and returned for
// callers that must know the container is gone.
func (r *Runtime) discard(ctx context.Context, op, id string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := r.cli.ContainerRemove(cctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil {
		r.log.WarnContext(ctx, "docker: could not remove a half-made container", "op", op, "container", id, "error", err)
	}
	return err
}

// object names a container in errors: its name, else its ID.
func object(spec runtime.RunSpec, id string) string {
	if spec.Name != "" {
		return spec.Name
	}
	return id
}

// containerConfig maps a normalised RunSpec (runtime.RunSpec.Normalize)
// onto the Engine API's create request. It never sets privileges, binds or
// mounts beyond spec.Tmpfs.
func containerConfig(spec runtime.RunSpec) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	cfg := &container.Config{
		Image:      spec.Image,
		Env:        envList(spec.Env),
		Entrypoint: spec.Entrypoint,
		Cmd:        spec.Command,
		Labels:     maps.Clone(spec.Labels),
	}
	hostCfg := &container.HostConfig{
		Privileged: false,
		Tmpfs:      maps.Clone(spec.Tmpfs),
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

// envList renders env as KEY=value lines in key order, so that the same
// spec always makes the same request.
func envList(env map[string]string) []string {
	if len(env) == 0 {
		return nil
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
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
