package podman

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// cpuPeriod is the CFS period CPU quotas are expressed in (100 ms, as
// Docker and Podman use).
const cpuPeriod = 100_000

// Run creates and starts a detached container from spec and reports it as
// inspect sees it after the start. If the start fails, the container is
// removed before the error is returned.
//
// Podman picks an ephemeral host port at create (it binds port 0 and
// closes it) and binds it again at the start, so another process (another
// runtime's proxy, typically) can take it in between. When that happens
// and every published port of spec is ephemeral, Run removes the container
// and creates it again, with fresh ports, up to adapterkit.MaxRunAttempts
// times. A spec with a fixed host port is not retried: Podman 4.3 keeps
// the fixed ports of a failed start bound until its garbage collection
// (see the package doc), so the next attempt would fail on them.
func (r *Runtime) Run(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	const op = runtime.OpRun
	// c is the client that made the current attempt's container.
	var c *client
	return adapterkit.Runner{
		Runtime: Name,
		Log:     r.opts.Logger,
		Create: func(ctx context.Context) (id string, err error) {
			c, id, err = r.create(ctx, op, spec)
			return id, err
		},
		Start:     func(ctx context.Context, attempt int, id string) error { return r.start(ctx, c, attempt, id) },
		Inspect:   func(ctx context.Context, id string) (runtime.Container, error) { return r.inspect(ctx, c, op, id) },
		Discard:   func(ctx context.Context, id string) error { return r.discard(ctx, c, op, id) },
		PortBusy:  hostPortBusy,
		Retryable: func(ports []runtime.PortSpec, _ int) bool { return allEphemeral(ports) },
		Wrap:      func(object string, err error) error { return r.wrap(op, object, err) },
	}.Run(ctx, spec)
}

// start starts a created container; beforeStart, when set, runs first.
func (r *Runtime) start(ctx context.Context, c *client, attempt int, id string) error {
	if r.beforeStart != nil {
		if err := r.beforeStart(ctx, attempt, id); err != nil {
			return err
		}
	}
	return c.startContainer(ctx, id)
}

// allEphemeral reports whether ports publishes something and leaves every
// host port to the service.
func allEphemeral(ports []runtime.PortSpec) bool {
	for _, p := range ports {
		if p.HostPort != 0 {
			return false
		}
	}
	return len(ports) > 0
}

// Create creates a container from spec without starting it (state
// "created"), as runtime.ContainerRuntime.Create says; the lifecycle code only uses
// Run.
func (r *Runtime) Create(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	const op = runtime.OpCreate
	c, id, err := r.create(ctx, op, spec)
	if err != nil {
		return runtime.Container{}, err
	}
	ctr, err := r.inspect(ctx, c, op, id)
	if err != nil {
		_ = r.discard(ctx, c, op, id)
		return runtime.Container{}, err
	}
	return ctr, nil
}

// create creates the container and checks that the service kept every
// limit it was asked for; it returns the client that made it and its ID.
func (r *Runtime) create(ctx context.Context, op string, spec runtime.RunSpec) (*client, string, error) {
	obj := adapterkit.Object(spec, "")
	spec, err := spec.Normalize()
	if err != nil {
		return nil, "", r.wrap(op, obj, err)
	}
	c, err := r.connect(ctx, op, obj)
	if err != nil {
		return nil, "", err
	}
	if err := r.checkEnforceable(ctx, c.svc, spec); err != nil {
		return nil, "", r.wrap(op, obj, adapterkit.WithKind(runtime.ErrUnenforceableLimits, "%w", err))
	}
	if err := r.checkNetwork(ctx, c, op, obj, spec); err != nil {
		return nil, "", err
	}
	sg, clamped := specFor(spec, c.svc.rlimits, r.opts.lifetime)
	for _, cl := range clamped {
		r.opts.Logger.WarnContext(ctx, "podman: rlimit clamped to the service's hard limit", "container", obj, "rlimit", cl)
	}
	resp, err := c.createContainer(ctx, sg)
	if err != nil {
		if errors.Is(kindOf(op, err), runtime.ErrImageNotFound) {
			err = fmt.Errorf("image %q: %w", spec.Image, err)
		}
		return nil, "", r.wrap(op, obj, err)
	}
	// Where checkEnforceable has already warned that the limits will not
	// be enforced (the opt-out), the service's own warning and the
	// comparison below say it again: debug lines, not three warnings.
	warn := r.opts.Logger.WarnContext
	if known := r.opts.unenforcedLimits && c.svc.rootless && c.svc.cgroupV1; known {
		warn = r.opts.Logger.DebugContext
	}
	for _, w := range resp.Warnings {
		warn(ctx, "podman: service warning on create", "container", adapterkit.Object(spec, resp.ID), "warning", w)
	}
	got, err := c.inspectContainer(ctx, resp.ID)
	if err != nil {
		_ = r.discard(ctx, c, op, resp.ID)
		return nil, "", r.wrap(op, adapterkit.Object(spec, resp.ID), err)
	}
	if err := checkLimits(sg.ResourceLimits, got.HostConfig, resp.Warnings); err != nil {
		if r.opts.unenforcedLimits {
			warn(ctx, "podman: limits not enforced (WithUnenforcedLimits)", "container", adapterkit.Object(spec, resp.ID), "error", err)
		} else {
			_ = r.discard(ctx, c, op, resp.ID)
			return nil, "", r.wrap(op, adapterkit.Object(spec, resp.ID), adapterkit.WithKind(runtime.ErrUnenforceableLimits, "%w", err))
		}
	}
	return c, resp.ID, nil
}

// checkEnforceable refuses limits that the service is known to drop:
// rootless Podman on cgroup v1 ignores memory, CPU and pids limits with
// nothing but a warning, and on cgroup v2 it can enforce only those whose
// controller was delegated to its user (systemd delegates memory and pids
// by default, cpu and io only where Delegate= says so).
func (r *Runtime) checkEnforceable(ctx context.Context, svc *service, spec runtime.RunSpec) error {
	if !svc.rootless || (spec.MemoryBytes == 0 && spec.CPUs == 0 && spec.PidsLimit == 0) {
		return nil
	}
	var err error
	if svc.cgroupV1 {
		err = errors.New("rootless Podman on cgroup v1 cannot enforce memory, CPU or pids limits (use cgroup v2, rootful Podman, or WithUnenforcedLimits)")
	} else if missing := missingControllers(svc.controllers, spec); len(missing) > 0 {
		err = fmt.Errorf("rootless Podman's user has no %s cgroup controller delegated (it has: %s), so the %s limit cannot be enforced (delegate it: systemd's Delegate=%s in user@.service.d; or rootful Podman, or WithUnenforcedLimits)",
			strings.Join(missing, ", "), strings.Join(svc.controllers, " "), strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	if err == nil {
		return nil
	}
	if r.opts.unenforcedLimits {
		r.opts.Logger.WarnContext(ctx, "podman: limits will not be enforced (WithUnenforcedLimits)", "container", spec.Name, "error", err)
		return nil
	}
	return err
}

// missingControllers are the cgroup controllers spec's limits need that
// have (a nil have: unknown) lacks, in the order memory, cpu, pids.
func missingControllers(have []string, spec runtime.RunSpec) []string {
	if have == nil {
		return nil
	}
	var missing []string
	for _, need := range []struct {
		controller string
		asked      bool
	}{{"memory", spec.MemoryBytes > 0}, {"cpu", spec.CPUs > 0}, {"pids", spec.PidsLimit > 0}} {
		if need.asked && !slices.Contains(have, need.controller) {
			missing = append(missing, need.controller)
		}
	}
	return missing
}

// discard force-removes a container that create or run could not
// complete (see adapterkit.Discard).
func (r *Runtime) discard(ctx context.Context, c *client, op, id string) error {
	return adapterkit.Discard(ctx, r.opts.Logger, Name, op, id, c.remove)
}

// podmanDefaultRlimit is what rootful Podman sets nofile and nproc to when
// asked for nothing (libpod's RLimitDefaultValue).
const podmanDefaultRlimit = 1 << 20

// specFor maps a RunSpec onto a SpecGenerator. It never sets privileges,
// binds or mounts beyond spec.Tmpfs, and confines the container as the
// port's contract says (runtime/confine.go): the service's default seccomp
// profile, no-new-privileges, every capability dropped but those of
// spec.Capabilities. serviceLimits are the service's hard
// rlimits (nil: unknown); the returned strings describe each rlimit that
// was lowered to fit them.
func specFor(spec runtime.RunSpec, serviceLimits map[string]uint64, lifetime time.Duration) (*specGenerator, []string) {
	sg := &specGenerator{
		Name:       spec.Name,
		Image:      spec.Image,
		Env:        maps.Clone(spec.Env),
		Entrypoint: spec.Entrypoint,
		Command:    spec.Command,
		Labels:     maps.Clone(spec.Labels),
		NetNS:      namespace{NSMode: "bridge"},
		Timeout:    uint(math.Ceil(lifetime.Seconds())),

		CapDrop:         []string{"ALL"},
		CapAdd:          spec.CapabilityNames(),
		NoNewPrivileges: true,
	}
	if spec.Entrypoint != nil && len(spec.Entrypoint) == 0 {
		sg.Entrypoint = []string{""}
	}
	for _, path := range slices.Sorted(maps.Keys(spec.Tmpfs)) {
		m := mountSpec{Destination: path, Type: "tmpfs", Source: "tmpfs"}
		for _, o := range strings.Split(spec.Tmpfs[path], ",") {
			if o = strings.TrimSpace(o); o != "" {
				m.Options = append(m.Options, o)
			}
		}
		sg.Mounts = append(sg.Mounts, m)
	}
	if spec.MemoryBytes > 0 || spec.CPUs > 0 || spec.PidsLimit > 0 {
		sg.ResourceLimits = &resourceLimits{}
		if spec.MemoryBytes > 0 {
			sg.ResourceLimits.Memory = &memoryLimits{Limit: spec.MemoryBytes}
		}
		if spec.CPUs > 0 {
			sg.ResourceLimits.CPU = &cpuLimits{Quota: int64(math.Round(spec.CPUs * cpuPeriod)), Period: cpuPeriod}
		}
		if spec.PidsLimit > 0 {
			sg.ResourceLimits.Pids = &pidsLimits{Limit: spec.PidsLimit}
		}
	}
	rl, clamped := rlimitsFor(spec.Ulimits, serviceLimits)
	sg.Rlimits = rl
	if spec.Network != "" {
		sg.Networks = map[string]perNetworkOptions{spec.Network: {}}
	}
	for _, p := range spec.Ports {
		sg.PortMappings = append(sg.PortMappings, portMapping{
			HostIP:        p.HostIP,
			ContainerPort: uint16(p.ContainerPort),
			HostPort:      uint16(p.HostPort),
			Range:         1,
			Protocol:      p.Protocol,
		})
	}
	return sg, clamped
}

// rlimitsFor fits the spec's rlimits (normalised by the port) to the
// service's hard limits: a service without CAP_SYS_RESOURCE cannot raise a
// limit past its own, and the start would fail ("error setting rlimit type
// 7: operation not permitted"). nofile and nproc are always set, since
// Podman's own default for them (1048576) is past many services' limits.
// The strings describe each rlimit that was lowered.
func rlimitsFor(ulimits []runtime.Ulimit, serviceLimits map[string]uint64) ([]rlimitSpec, []string) {
	var out []rlimitSpec
	var clamped []string
	seen := map[string]bool{}
	for _, u := range ulimits {
		name := u.Name
		seen[name] = true
		soft, hard := rlimitValue(u.Soft), rlimitValue(u.Hard)
		if limit, ok := serviceLimits[name]; ok && hard > limit {
			clamped = append(clamped, fmt.Sprintf("%s %d:%d to %d:%d", name, u.Soft, u.Hard, min(soft, limit), limit))
			hard = limit
			soft = min(soft, limit)
		}
		out = append(out, rlimitSpec{Type: name, Soft: soft, Hard: hard})
	}
	for _, name := range []string{"nofile", "nproc"} {
		limit, ok := serviceLimits[name]
		if seen[name] || !ok {
			continue
		}
		v := min(limit, podmanDefaultRlimit)
		out = append(out, rlimitSpec{Type: name, Soft: v, Hard: v})
	}
	return out, clamped
}

// rlimitValue maps -1 (unlimited, as Docker spells it) to RLIM_INFINITY.
func rlimitValue(v int64) uint64 {
	if v < 0 {
		return math.MaxUint64
	}
	return uint64(v)
}

// checkLimits compares the limits asked for with those the service stored.
// Rootless Podman on cgroup v1 accepts limits it cannot enforce, drops
// them and only warns: that must not pass silently.
func checkLimits(asked *resourceLimits, got *hostConfig, warnings []string) error {
	if asked == nil {
		return nil
	}
	var dropped []string
	for _, w := range warnings {
		lw := strings.ToLower(w)
		if strings.Contains(lw, "ignored") || strings.Contains(lw, "discarded") || strings.Contains(lw, "not supported") {
			dropped = append(dropped, w)
		}
	}
	if got == nil {
		got = &hostConfig{}
	}
	if asked.Memory != nil && got.Memory != asked.Memory.Limit {
		dropped = append(dropped, fmt.Sprintf("memory limit %d bytes stored as %d", asked.Memory.Limit, got.Memory))
	}
	if asked.CPU != nil {
		want := float64(asked.CPU.Quota) / float64(asked.CPU.Period)
		if math.Abs(got.cpus()-want) > 1e-6 {
			dropped = append(dropped, fmt.Sprintf("CPU limit %g stored as %g", want, got.cpus()))
		}
	}
	if asked.Pids != nil && got.PidsLimit != asked.Pids.Limit {
		dropped = append(dropped, fmt.Sprintf("pids limit %d stored as %d", asked.Pids.Limit, got.PidsLimit))
	}
	if len(dropped) > 0 {
		return fmt.Errorf("the service did not keep the requested limits: %s", strings.Join(dropped, "; "))
	}
	return nil
}
