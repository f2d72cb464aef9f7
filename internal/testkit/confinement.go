package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// What a sandbox's confinement looks like from outside its runtime: the
// host's bridges, the NAT rules that publish a port, the mount table seen
// inside a container. Tests that prove a property of the runtime read it
// here, not from the adapter's own record.

// BridgeAddresses lists the IPv4 addresses of the host's bridges (docker0,
// Podman's podman0, the containerd adapter's sbx-* CNI bridges, Docker's
// user networks): a port published on 127.0.0.1 must refuse connections
// on each. It never lists the other interfaces (the external one): a test
// only ever connects to loopback and to the bridges the environment and
// the tests made.
func BridgeAddresses(t testing.TB) []string {
	t.Helper()
	ifaces, err := net.Interfaces()
	require.NoError(t, err)
	var out []string
	for _, ifc := range ifaces {
		if _, err := os.Stat(filepath.Join("/sys/class/net", ifc.Name, "bridge")); err != nil {
			continue // not a bridge
		}
		addrs, err := ifc.Addrs()
		require.NoError(t, err, "addresses of %s", ifc.Name)
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				out = append(out, ipn.IP.String())
			}
		}
	}
	slices.Sort(out)
	return out
}

// DNATRules lists the rules of the host's nat table (`iptables -t nat -S`)
// that DNAT the TCP or UDP port: how Docker, netavark and CNI's portmap
// publish a port (containerd's portmap with no socket at all). It ends the
// test when iptables cannot be read.
func DNATRules(t testing.TB, port int) []string {
	t.Helper()
	out, err := exec.Command("iptables", "-w", "-t", "nat", "-S").Output()
	require.NoError(t, err, "iptables -t nat -S")
	var rules []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if ruleArg(f, "-j") == "DNAT" && ruleArg(f, "--dport") == strconv.Itoa(port) {
			rules = append(rules, line)
		}
	}
	return rules
}

// DNATMatchesLoopbackOnly tells whether a rule of DNATRules matches the
// destination 127.0.0.1 alone (-d 127.0.0.1/32, not negated).
func DNATMatchesLoopbackOnly(rule string) bool {
	f := strings.Fields(rule)
	i := slices.Index(f, "-d")
	return i > 0 && f[i-1] != "!" && i+1 < len(f) && f[i+1] == "127.0.0.1/32"
}

// ruleArg is the value of an option of a rule split in fields, "" when it
// has none.
func ruleArg(f []string, opt string) string {
	if i := slices.Index(f, opt); i >= 0 && i+1 < len(f) {
		return f[i+1]
	}
	return ""
}

// MountInfo is one line of /proc/<pid>/mountinfo.
type MountInfo struct {
	// Root is the path, in its filesystem, of what is mounted: "/" for a
	// whole filesystem, a file's path for a bind of that file.
	Root   string
	Point  string
	FSType string
	Source string
}

// ParseMountinfo parses a /proc/<pid>/mountinfo.
func ParseMountinfo(t testing.TB, text string) []MountInfo {
	t.Helper()
	var out []MountInfo
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		head, tail, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(head), strings.Fields(tail)
		require.True(t, ok && len(f) >= 5 && len(g) >= 2, "mountinfo line %q", line)
		out = append(out, MountInfo{Root: f[3], Point: f[4], FSType: g[0], Source: g[1]})
	}
	return out
}

// kernelFS are the filesystems a container gets that are no host path:
// its image's overlay, tmpfs (its /dev, /dev/shm and the tmpfs asked
// for), and the kernel's own.
var kernelFS = []string{"overlay", "tmpfs", "proc", "sysfs", "devpts", "mqueue", "cgroup", "cgroup2"}

// runtimeFiles are the files a runtime writes for each container and binds
// in (from its own per-container directory, whose path names the
// container): no host path that anyone asked for.
// The kubelet adds /dev/termination-log, from its per-container directory
// under the pod's.
var runtimeFiles = []string{"/etc/resolv.conf", "/etc/hosts", "/etc/hostname", "/run/.containerenv", "/dev/termination-log"}

// ociDefaultDevices are the device nodes every container gets (the OCI
// runtime spec's default devices, /dev/console aside).
var ociDefaultDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// HostPathMounts picks, from a container's mount table, what is mounted
// from a host filesystem: anything but kernelFS, except the runtime's own
// per-container files (runtimeFiles, bound from a path that names
// containerID or one of otherIDs: a pod's files are named by its UID or
// by its CRI sandbox's ID), /dev/null bound over a masked /proc or /sys path, and the
// OCI default device nodes bound from the host's /dev by a rootless
// runtime.
func HostPathMounts(mounts []MountInfo, containerID string, otherIDs ...string) []MountInfo {
	ids := slices.DeleteFunc(append([]string{containerID}, otherIDs...), func(id string) bool { return id == "" })
	var out []MountInfo
	for _, m := range mounts {
		if slices.Contains(kernelFS, m.FSType) {
			continue
		}
		if slices.Contains(runtimeFiles, m.Point) && slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(m.Root, id) }) {
			continue
		}
		if m.Root == "/null" && m.FSType == "devtmpfs" && (strings.HasPrefix(m.Point, "/proc/") || strings.HasPrefix(m.Point, "/sys/")) {
			continue // a masked path, where a rootless runtime binds /dev/null
		}
		if m.FSType == "devtmpfs" && m.Point == "/dev"+m.Root && slices.Contains(ociDefaultDevices, m.Point) {
			continue // a rootless runtime, which may not mknod, binds the host's node
		}
		out = append(out, m)
	}
	return out
}

// DefaultCapabilities are the capabilities Docker, Podman and containerd
// (oci.WithDefaultSpec) give a container that asks for none: anything
// beyond them was added.
var DefaultCapabilities = []string{
	"CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_MKNOD",
	"CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT",
}

// PodmanContainer is what `podman container inspect` says of a container,
// as far as confinement goes.
type PodmanContainer struct {
	ID     string `json:"Id"`
	Mounts []struct {
		Type        string `json:"Type"`
		Source      string `json:"Source"`
		Destination string `json:"Destination"`
	} `json:"Mounts"`
	EffectiveCaps   []string `json:"EffectiveCaps"`
	AppArmorProfile string   `json:"AppArmorProfile"`
	// OCIConfigPath is the OCI spec Podman stored for the container.
	OCIConfigPath string `json:"OCIConfigPath"`
	HostConfig    struct {
		Privileged  bool              `json:"Privileged"`
		Binds       []string          `json:"Binds"`
		CapAdd      []string          `json:"CapAdd"`
		Devices     []any             `json:"Devices"`
		NetworkMode string            `json:"NetworkMode"`
		PidMode     string            `json:"PidMode"`
		IpcMode     string            `json:"IpcMode"`
		UTSMode     string            `json:"UTSMode"`
		SecurityOpt []string          `json:"SecurityOpt"`
		Tmpfs       map[string]string `json:"Tmpfs"`
	} `json:"HostConfig"`
}

// PodmanInspect inspects a container with Podman's own CLI against the
// service at endpoint (`podman --url endpoint container inspect`), not
// through the adapter.
func PodmanInspect(ctx context.Context, endpoint, id string) (PodmanContainer, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "podman", "--url", endpoint, "container", "inspect", id)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return PodmanContainer{}, fmt.Errorf("podman --url %s container inspect %s: %w: %s", endpoint, id, err, strings.TrimSpace(stderr.String()))
	}
	var cs []PodmanContainer
	if err := json.Unmarshal(out, &cs); err != nil {
		return PodmanContainer{}, fmt.Errorf("podman container inspect %s: %w", id, err)
	}
	if len(cs) != 1 {
		return PodmanContainer{}, fmt.Errorf("podman container inspect %s: %d containers", id, len(cs))
	}
	return cs[0], nil
}
