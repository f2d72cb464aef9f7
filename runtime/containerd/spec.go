package containerd

import (
	"bufio"
	"errors"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	cgroups "github.com/containerd/cgroups/v3"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/pkg/oci"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

const (
	// cfsPeriod is the CFS period CPU quotas are expressed in (100 ms, as
	// Docker uses).
	cfsPeriod = 100_000
	// minCFSQuota is the kernel's smallest CFS quota (1 ms).
	minCFSQuota = 1_000
	// maxHostname is the longest hostname the kernel takes.
	maxHostname = 64
)

// tmpfsDefaults are the options every tmpfs starts from, as Docker's; the
// run spec's options come after and win.
var tmpfsDefaults = []string{"nosuid", "nodev", "noexec"}

// specOpts turns the run spec into OCI spec options, applied to
// containerd's default spec: the image config first (entrypoint, cmd, env,
// user, workdir), then the run spec. The hostname is the container's name,
// as Docker's is (its ID, on Docker, for an unnamed one).
func specOpts(name string, img client.Image, cfg ocispec.ImageConfig, spec runtime.RunSpec, volumeMounts []specs.Mount) ([]oci.SpecOpts, error) {
	args := commandLine(cfg, spec)
	if len(args) == 0 {
		return nil, errors.New("no command: neither the run spec nor the image gives an entrypoint or a command")
	}
	mounts := append(tmpfsMounts(spec.Tmpfs), volumeMounts...)
	// The default spec has no cgroup mount, so limits would be invisible
	// inside. This is a cgroup filesystem (runc mounts the container's own
	// cgroups there), not a bind of a host path.
	mounts = append(mounts, specs.Mount{
		Destination: "/sys/fs/cgroup",
		Type:        "cgroup",
		Source:      "cgroup",
		Options:     []string{"ro", "nosuid", "noexec", "nodev"},
	})

	opts := []oci.SpecOpts{
		oci.WithImageConfig(img),
		oci.WithProcessArgs(args...),
		oci.WithHostname(hostname(name)),
		oci.WithMounts(mounts),
	}
	if cgroups.Mode() == cgroups.Unified {
		// With cgroup v2 the mount shows the container's own cgroup only
		// inside a cgroup namespace.
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.CgroupNamespace}))
	}
	if len(spec.Env) > 0 {
		opts = append(opts, oci.WithEnv(adapterkit.EnvList(spec.Env)))
	}
	if spec.MemoryBytes > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(spec.MemoryBytes)))
	}
	if spec.CPUs > 0 {
		opts = append(opts, oci.WithCPUCFS(cfsQuota(spec.CPUs), cfsPeriod))
	}
	if spec.PidsLimit > 0 {
		opts = append(opts, oci.WithPidsLimit(spec.PidsLimit))
	}
	for _, u := range spec.Ulimits {
		opts = append(opts, oci.WithRlimit(rlimit(u)))
	}
	// The port's confinement (runtime/confine.go): the spec's capabilities
	// and no other (bounding, effective, permitted; none inheritable or
	// ambient), no-new-privileges, and Docker's default seccomp profile
	// (containerd's copy of it), last: it allows what the capabilities
	// allow.
	opts = append(opts,
		oci.WithCapabilities(spec.CapabilityNames()),
		oci.WithAmbientCapabilities(nil),
		oci.WithNoNewPrivileges,
		seccomp.WithDefaultProfile(),
	)
	return opts, nil
}

// commandLine is the container's argv, with Docker's rules: an entrypoint
// from the run spec replaces the image's and drops the image's cmd; a
// command from the run spec replaces the image's cmd.
func commandLine(cfg ocispec.ImageConfig, spec runtime.RunSpec) []string {
	entrypoint, cmd := cfg.Entrypoint, cfg.Cmd
	if spec.Entrypoint != nil {
		entrypoint, cmd = spec.Entrypoint, nil
	}
	if spec.Command != nil {
		cmd = spec.Command
	}
	return append(append([]string{}, entrypoint...), cmd...)
}

// hostname is the container's name, cut to what the kernel accepts.
func hostname(name string) string {
	if len(name) > maxHostname {
		return name[:maxHostname]
	}
	return name
}

// tmpfsMounts turns path -> "opt,opt" into tmpfs mounts, in path order.
// The paths are absolute (runtime.RunSpec.Normalize).
func tmpfsMounts(tmpfs map[string]string) []specs.Mount {
	paths := make([]string, 0, len(tmpfs))
	for p := range tmpfs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	out := make([]specs.Mount, 0, len(paths))
	for _, p := range paths {
		opts := append([]string{}, tmpfsDefaults...)
		for _, o := range strings.Split(tmpfs[p], ",") {
			if o = strings.TrimSpace(o); o != "" {
				opts = append(opts, o)
			}
		}
		out = append(out, specs.Mount{Destination: path.Clean(p), Type: "tmpfs", Source: "tmpfs", Options: opts})
	}
	return out
}

// tmpfsPaths are the cleaned tmpfs mount points, in order.
func tmpfsPaths(tmpfs map[string]string) []string {
	out := make([]string, 0, len(tmpfs))
	for p := range tmpfs {
		out = append(out, path.Clean(p))
	}
	sort.Strings(out)
	return out
}

// cfsQuota is the CFS quota, in microseconds per cfsPeriod, for cpus cores.
func cfsQuota(cpus float64) int64 {
	return int64(math.Round(cpus * cfsPeriod))
}

// rlimits maps ulimit(1)/Docker names to the kernel's.
var rlimits = map[string]string{
	"as":         "RLIMIT_AS",
	"core":       "RLIMIT_CORE",
	"cpu":        "RLIMIT_CPU",
	"data":       "RLIMIT_DATA",
	"fsize":      "RLIMIT_FSIZE",
	"locks":      "RLIMIT_LOCKS",
	"memlock":    "RLIMIT_MEMLOCK",
	"msgqueue":   "RLIMIT_MSGQUEUE",
	"nice":       "RLIMIT_NICE",
	"nofile":     "RLIMIT_NOFILE",
	"nproc":      "RLIMIT_NPROC",
	"rss":        "RLIMIT_RSS",
	"rtprio":     "RLIMIT_RTPRIO",
	"rttime":     "RLIMIT_RTTIME",
	"sigpending": "RLIMIT_SIGPENDING",
	"stack":      "RLIMIT_STACK",
}

// rlimit is one ulimit in OCI terms; -1 is unlimited.
func rlimit(u runtime.Ulimit) *specs.POSIXRlimit {
	conv := func(v int64) uint64 {
		if v < 0 {
			return math.MaxUint64 // -1: unlimited
		}
		return uint64(v)
	}
	return &specs.POSIXRlimit{Type: rlimits[u.Name], Soft: conv(u.Soft), Hard: conv(u.Hard)}
}

// checkLimits refuses, as ErrUnsupported, limits this host cannot enforce
// (the port has refused malformed ones): a limit is never dropped
// silently.
func checkLimits(spec runtime.RunSpec) error {
	if spec.CPUs > 0 && cfsQuota(spec.CPUs) < minCFSQuota {
		return adapterkit.WithKind(runtime.ErrUnsupported, "%g CPUs is below the smallest CFS quota (%g)", spec.CPUs, float64(minCFSQuota)/cfsPeriod)
	}
	need := map[string]bool{"memory": spec.MemoryBytes > 0, "cpu": spec.CPUs > 0, "pids": spec.PidsLimit > 0}
	for controller, needed := range need {
		if needed && !hasController(controller) {
			return adapterkit.WithKind(runtime.ErrUnsupported, "this host has no %s cgroup controller: the %s limit cannot be enforced", controller, controller)
		}
	}
	return nil
}

// hasController reports whether the host's cgroups can enforce a
// controller's limits (for cpu: CFS bandwidth control). It reads the
// cgroupfs this process sees, which is the daemon's host's: the adapter
// speaks to a local containerd only (a unix socket). Where this process
// cannot read it (a caller in a container of its own, without its host's
// cgroupfs), it does not refuse on a guess: runc, which sees the host's,
// fails the start if the controller is missing.
func hasController(name string) bool {
	if cgroups.Mode() == cgroups.Unified {
		b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		if err != nil {
			return true
		}
		for _, c := range strings.Fields(string(b)) {
			if c == name {
				return true
			}
		}
		return false
	}
	if !v1Enabled(name) {
		return false
	}
	if name == "cpu" {
		matches, _ := filepath.Glob("/sys/fs/cgroup/cpu*/cpu.cfs_quota_us")
		return len(matches) > 0
	}
	return true
}

// v1Enabled reads /proc/cgroups for an enabled controller.
func v1Enabled(name string) bool {
	f, err := os.Open("/proc/cgroups")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == name {
			return f[3] == "1"
		}
	}
	return false
}
