package podman

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.podman.io/podman/v6/pkg/bindings"

	"github.com/roboco/sandboxer/runtime"
)

// cleanupTimeout bounds the removal of a container that Run or Create
// created but could not complete; it runs even when the caller's context
// is done, so that a failed run leaves nothing behind.
const cleanupTimeout = 30 * time.Second

// cpuPeriod is the CFS period CPU quotas are expressed in (100 ms, as
// Docker and Podman use).
const cpuPeriod = 100_000

// maxRunAttempts bounds how many containers Run creates for one spec whose
// ephemeral host port was taken between Podman's choice and its bind.
const maxRunAttempts = 3

// Run creates and starts a detached container from spec and reports it as
// inspect sees it after the start. If the start fails, the container is
// removed before the error is returned.
//
// Podman picks an ephemeral host port at create (it binds port 0 and
// closes it) and binds it again at the start, so another process (another
// runtime's proxy, typically) can take it in between. When that happens
// and every published port of spec is ephemeral, Run removes the container
// and creates it again, with fresh ports, up to maxRunAttempts times. A
// spec with a fixed host port is not retried: Podman 4.3 keeps the fixed
// ports of a failed start bound until its garbage collection (see the
// package doc), so the next attempt would fail on them.
func (r *Runtime) Run(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	const op = runtime.OpRun
	for attempt := 1; ; attempt++ {
		conn, svc, id, err := r.create(ctx, op, spec)
		if err != nil {
			return runtime.Container{}, err
		}
		err = r.start(ctx, conn, svc, attempt, id)
		if err == nil {
			c, err := r.inspect(ctx, conn, svc, op, id)
			if err != nil {
				// A container the caller cannot see is one it cannot tear down.
				r.discard(ctx, conn, svc, op, id)
				return runtime.Container{}, err
			}
			return c, nil
		}
		removed := r.discard(ctx, conn, svc, op, id) == nil
		addr, _, busy := hostPortBusy(err)
		if !busy {
			return runtime.Container{}, r.wrap(op, object(spec, id), err)
		}
		if !removed || attempt == maxRunAttempts || ctx.Err() != nil || !allEphemeral(spec.Ports) {
			return runtime.Container{}, r.wrap(op, object(spec, id), portBusyError(addr, attempt, err))
		}
		r.opts.log.DebugContext(ctx, "podman: an ephemeral host port was taken before the start; retrying with fresh ports",
			"container", object(spec, id), "attempt", attempt, "port", addr, "error", err)
	}
}

// start starts a created container; beforeStart, when set, runs first.
func (r *Runtime) start(ctx context.Context, conn *bindings.Connection, svc *service, attempt int, id string) error {
	if r.beforeStart != nil {
		if err := r.beforeStart(ctx, attempt, id); err != nil {
			return err
		}
	}
	return call(ctx, conn, svc, request{method: http.MethodPost, path: "/containers/%s/start", pathValues: []string{id}}, nil)
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

// portBusyError says which published host port was taken (addr, when the
// service named it) and how many containers Run tried.
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
	const op = runtime.OpCreate
	conn, svc, id, err := r.create(ctx, op, spec)
	if err != nil {
		return runtime.Container{}, err
	}
	c, err := r.inspect(ctx, conn, svc, op, id)
	if err != nil {
		r.discard(ctx, conn, svc, op, id)
		return runtime.Container{}, err
	}
	return c, nil
}

// createResponse is the answer of POST /containers/create.
type createResponse struct {
	ID       string   `json:"Id"`
	Warnings []string `json:"Warnings"`
}

// create creates the container and checks that the service kept every
// limit it was asked for; it returns the container's ID.
func (r *Runtime) create(ctx context.Context, op string, spec runtime.RunSpec) (*bindings.Connection, *service, string, error) {
	obj := object(spec, "")
	spec, err := spec.Normalize()
	if err != nil {
		return nil, nil, "", runtime.NewError(Name, op, obj, nil, err)
	}
	conn, svc, err := r.connect(ctx, op, obj)
	if err != nil {
		return nil, nil, "", err
	}
	if err := r.checkEnforceable(ctx, svc, spec); err != nil {
		return nil, nil, "", runtime.NewError(Name, op, obj, runtime.ErrUnsupported, err)
	}
	sg, clamped := specFor(spec, svc.rlimits, r.opts.lifetime)
	for _, c := range clamped {
		r.opts.log.WarnContext(ctx, "podman: rlimit clamped to the service's hard limit", "container", obj, "rlimit", c)
	}
	var resp createResponse
	err = call(ctx, conn, svc, request{method: http.MethodPost, path: "/containers/create", body: sg}, &resp)
	if err != nil {
		if errors.Is(kindOf(op, err), runtime.ErrImageNotFound) {
			err = fmt.Errorf("image %q: %w", spec.Image, err)
		}
		return nil, nil, "", r.wrap(op, obj, err)
	}
	for _, w := range resp.Warnings {
		r.opts.log.WarnContext(ctx, "podman: service warning on create", "container", object(spec, resp.ID), "warning", w)
	}
	got, err := inspectRaw(ctx, conn, svc, resp.ID)
	if err != nil {
		r.discard(ctx, conn, svc, op, resp.ID)
		return nil, nil, "", r.wrap(op, object(spec, resp.ID), err)
	}
	if err := checkLimits(sg.ResourceLimits, got.HostConfig, resp.Warnings); err != nil {
		if r.opts.unenforcedLimits {
			r.opts.log.WarnContext(ctx, "podman: limits not enforced (WithUnenforcedLimits)", "container", object(spec, resp.ID), "error", err)
		} else {
			r.discard(ctx, conn, svc, op, resp.ID)
			return nil, nil, "", runtime.NewError(Name, op, object(spec, resp.ID), runtime.ErrUnsupported, err)
		}
	}
	return conn, svc, resp.ID, nil
}

// checkEnforceable refuses limits that the service is known to drop:
// rootless Podman on cgroup v1 ignores memory, CPU and pids limits with
// nothing but a warning.
func (r *Runtime) checkEnforceable(ctx context.Context, svc *service, spec runtime.RunSpec) error {
	if !svc.rootless || !svc.cgroupV1 || (spec.MemoryBytes == 0 && spec.CPUs == 0 && spec.PidsLimit == 0) {
		return nil
	}
	err := errors.New("rootless Podman on cgroup v1 cannot enforce memory, CPU or pids limits (use cgroup v2, rootful Podman, or WithUnenforcedLimits)")
	if r.opts.unenforcedLimits {
		r.opts.log.WarnContext(ctx, "podman: limits will not be enforced (WithUnenforcedLimits)", "container", spec.Name, "error", err)
		return nil
	}
	return err
}

// discard force-removes a container that create or run could not
// complete, even when ctx is already done. A failure is logged, and
// returned for callers that must know the container is gone.
func (r *Runtime) discard(ctx context.Context, conn *bindings.Connection, svc *service, op, id string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := removeContainer(cctx, conn, svc, id)
	if err != nil {
		r.opts.log.WarnContext(ctx, "podman: could not remove a half-made container", "op", op, "container", id, "error", err)
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

// specGenerator is the part of libpod's SpecGenerator (the body of POST
// /libpod/containers/create) that the adapter sets. Field names are those
// of Podman 4.0 and later.
type specGenerator struct {
	Name  string            `json:"name,omitempty"`
	Image string            `json:"image"`
	Env   map[string]string `json:"env,omitempty"`
	// Entrypoint [""] clears the image's (nil keeps it).
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Command    []string          `json:"command,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	// HTTPProxy false: the service's proxy variables are not copied
	// into the container (Podman's default is to copy them).
	HTTPProxy      bool                         `json:"httpproxy"`
	Privileged     bool                         `json:"privileged"`
	Mounts         []mountSpec                  `json:"mounts,omitempty"`
	ResourceLimits *resourceLimits              `json:"resource_limits,omitempty"`
	Rlimits        []rlimitSpec                 `json:"r_limits,omitempty"`
	NetNS          namespace                    `json:"netns"`
	Networks       map[string]perNetworkOptions `json:"Networks,omitempty"`
	PortMappings   []portMapping                `json:"portmappings,omitempty"`
	// Timeout is the container's lifetime in seconds, enforced by
	// conmon (0: none).
	Timeout uint `json:"timeout,omitempty"`
}

type mountSpec struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options,omitempty"`
}

type resourceLimits struct {
	Memory *memoryLimits `json:"memory,omitempty"`
	CPU    *cpuLimits    `json:"cpu,omitempty"`
	Pids   *pidsLimits   `json:"pids,omitempty"`
}

type memoryLimits struct {
	Limit int64 `json:"limit"`
}

type cpuLimits struct {
	Quota  int64  `json:"quota"`
	Period uint64 `json:"period"`
}

type pidsLimits struct {
	Limit int64 `json:"limit"`
}

type rlimitSpec struct {
	Type string `json:"type"`
	Hard uint64 `json:"hard"`
	Soft uint64 `json:"soft"`
}

type namespace struct {
	NSMode string `json:"nsmode"`
	Value  string `json:"value,omitempty"`
}

type perNetworkOptions struct{}

type portMapping struct {
	HostIP        string `json:"host_ip,omitempty"`
	ContainerPort uint16 `json:"container_port"`
	HostPort      uint16 `json:"host_port"`
	Range         uint16 `json:"range"`
	Protocol      string `json:"protocol"`
}

// podmanDefaultRlimit is what rootful Podman sets nofile and nproc to when
// asked for nothing (libpod's RLimitDefaultValue).
const podmanDefaultRlimit = 1 << 20

// specFor maps a RunSpec onto a SpecGenerator. It never sets privileges,
// binds or mounts beyond spec.Tmpfs. serviceLimits are the service's hard
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

// removeContainer force-removes a container and its anonymous volumes; an
// absent container is not an error.
func removeContainer(ctx context.Context, conn *bindings.Connection, svc *service, id string) error {
	err := call(ctx, conn, svc, request{
		method:     http.MethodDelete,
		path:       "/containers/%s",
		pathValues: []string{id},
		// timeout 0: a forced removal kills at once instead of waiting out
		// the stop timeout (10 s) first, as Docker does.
		query: url.Values{"force": {"true"}, "volumes": {"true"}, "timeout": {"0"}, "ignore": {"true"}},
	}, nil)
	if err != nil && errors.Is(kindOf(runtime.OpRemove, err), runtime.ErrNotFound) {
		return nil
	}
	return err
}
