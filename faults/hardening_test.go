package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ctrdclient "github.com/containerd/containerd/v2/client"
	"github.com/docker/docker/client"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/containerd"
	"github.com/roboco/sandboxer/runtime/docker"
	"github.com/roboco/sandboxer/runtime/podman"
)

// runtimeSockets are where container runtimes listen; none may be visible
// inside a sandbox.
var runtimeSockets = []string{
	"/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock",
	"/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock",
}

// hardening is what a container was granted, as the runtime's own API
// reports it (what the port does not report about its isolation).
type hardening struct {
	Privileged  bool
	Binds       []string
	CapAdd      []string
	Devices     int
	NetworkMode string
	PidMode     string
	IpcMode     string
	SecurityOpt []string
	// MaskedPaths are the /proc paths hidden from the container (empty
	// when it runs privileged or unconfined).
	MaskedPaths []string
}

// dockerHardening reads what Docker granted container id.
func dockerHardening(ctx context.Context, cli *client.Client, id string) (hardening, error) {
	c, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		return hardening{}, err
	}
	hc := c.HostConfig
	return hardening{
		Privileged:  hc.Privileged,
		Binds:       hc.Binds,
		CapAdd:      extraCaps(hc.CapAdd),
		Devices:     len(hc.Devices),
		NetworkMode: string(hc.NetworkMode),
		PidMode:     string(hc.PidMode),
		IpcMode:     string(hc.IpcMode),
		SecurityOpt: hc.SecurityOpt,
		MaskedPaths: hc.MaskedPaths,
	}, nil
}

// podmanHardening reads what Podman granted container id, with its own
// CLI (and the OCI spec it stored, for the masked paths).
func podmanHardening(ctx context.Context, endpoint, id string) (hardening, error) {
	c, err := testkit.PodmanInspect(ctx, endpoint, id)
	if err != nil {
		return hardening{}, err
	}
	hc := c.HostConfig
	h := hardening{
		Privileged:  hc.Privileged,
		Binds:       hc.Binds,
		CapAdd:      extraCaps(slices.Concat(hc.CapAdd, c.EffectiveCaps)),
		Devices:     len(hc.Devices),
		NetworkMode: hc.NetworkMode,
		PidMode:     hc.PidMode,
		IpcMode:     hc.IpcMode,
		SecurityOpt: hc.SecurityOpt,
	}
	if c.AppArmorProfile == "unconfined" {
		h.SecurityOpt = append(h.SecurityOpt, "apparmor=unconfined")
	}
	b, err := os.ReadFile(c.OCIConfigPath)
	if err != nil {
		return hardening{}, fmt.Errorf("podman's stored OCI spec of %s: %w", id, err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return hardening{}, fmt.Errorf("podman's stored OCI spec of %s: %w", id, err)
	}
	if spec.Linux != nil {
		h.MaskedPaths = spec.Linux.MaskedPaths
	}
	return h, nil
}

// containerdHardening reads what the OCI spec containerd stored for
// container id grants (containerd's client, not the adapter): bind mounts,
// capabilities beyond the default set, devices, the namespaces it does not
// unshare (host), seccomp and AppArmor, masked paths.
func containerdHardening(ctx context.Context, address, id string) (hardening, error) {
	ns := testenv.Getenv(containerd.EnvNamespace)
	if ns == "" {
		ns = containerd.DefaultNamespace
	}
	cli, err := ctrdclient.New(address, ctrdclient.WithDefaultNamespace(ns))
	if err != nil {
		return hardening{}, err
	}
	defer cli.Close()
	c, err := cli.LoadContainer(ctx, id)
	if err != nil {
		return hardening{}, err
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		return hardening{}, err
	}
	var h hardening
	for _, m := range spec.Mounts {
		if m.Type == "bind" || slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind") {
			h.Binds = append(h.Binds, m.Source+":"+m.Destination)
		}
	}
	if spec.Process != nil && spec.Process.Capabilities != nil {
		caps := spec.Process.Capabilities
		h.CapAdd = extraCaps(slices.Concat(caps.Bounding, caps.Effective, caps.Permitted))
	}
	if spec.Linux == nil {
		return hardening{}, fmt.Errorf("containerd's stored spec of %s has no linux section", id)
	}
	h.Devices = len(spec.Linux.Devices)
	h.NetworkMode, h.PidMode, h.IpcMode = "host", "host", "host"
	for _, n := range spec.Linux.Namespaces {
		mode := "private"
		if n.Path != "" {
			mode = "path " + n.Path
		}
		switch n.Type {
		case specs.NetworkNamespace:
			h.NetworkMode = mode
		case specs.PIDNamespace:
			h.PidMode = mode
		case specs.IPCNamespace:
			h.IpcMode = mode
		}
	}
	if spec.Linux.Seccomp == nil {
		h.SecurityOpt = append(h.SecurityOpt, "seccomp=unconfined")
	}
	if spec.Process != nil && spec.Process.ApparmorProfile == "unconfined" {
		h.SecurityOpt = append(h.SecurityOpt, "apparmor=unconfined")
	}
	h.MaskedPaths = spec.Linux.MaskedPaths
	return h, nil
}

// extraCaps are those of caps beyond the runtimes' default set, which
// the sandboxes' own capabilities (CapAdd after a drop of ALL) are within.
func extraCaps(caps []string) []string {
	var out []string
	for _, c := range caps {
		if c = "CAP_" + strings.TrimPrefix(strings.ToUpper(c), "CAP_"); !slices.Contains(testkit.DefaultCapabilities, c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// hardeningOf reads, with the runtime's own tools, what it granted
// container id.
func hardeningOf(ctx context.Context, b testruntimes.Runtime, id string) (hardening, error) {
	switch b.RT.Name() { // the adapter: both podman rows use podman
	case docker.Name:
		return dockerHardening(ctx, b.Docker, id)
	case podman.Name:
		return podmanHardening(ctx, b.RT.Endpoint(), id)
	case containerd.Name:
		return containerdHardening(ctx, b.RT.Endpoint(), id)
	}
	return hardening{}, fmt.Errorf("no way to read what %s granted", b.Name)
}

// TestSandboxesAreConfined inspects the sandboxes Provision makes: every
// published port is bound to 127.0.0.1 (every DNAT rule for it matches
// 127.0.0.1 only, and the host's bridge addresses refuse it), and no
// sandbox has a runtime socket, a host-path mount, privileges, extra
// capabilities or devices, the host's namespaces or an unconfined security
// profile, as each runtime's own tools report it (Docker's API, `podman
// --url ... inspect` and Podman's stored OCI spec, containerd's stored OCI
// spec).
func TestSandboxesAreConfined(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := testruntimes.NewWorld(t, b)
		ctx := testkit.Context(t, 5*time.Minute)
		e.Warm()

		t.Run("HostMode", func(t *testing.T) {
			p := e.Provisioner(nil)
			sb, err := p.Provision(ctx, "confined", allEngines)
			require.NoError(t, err)
			// Only loopback and the bridges are dialled: never the host's
			// external address.
			bridges := testkit.BridgeAddresses(t)
			require.NotEmpty(t, bridges, "the environment's runtimes made bridges")
			t.Logf("bridge addresses checked for refusal: %v", bridges)
			info, err := b.RT.Version(ctx)
			require.NoError(t, err)
			for _, c := range sb.Containers {
				t.Run(c.Engine, func(t *testing.T) {
					ctr, err := b.RT.Inspect(ctx, c.ID)
					require.NoError(t, err)
					eng, _ := engines.Default.Lookup(c.Engine)

					require.NotEmpty(t, ctr.Ports, "host mode publishes the engine's port")
					for _, pb := range ctr.Ports {
						assert.Equal(t, "127.0.0.1", pb.HostIP, "%d/%s is bound to loopback only", pb.ContainerPort, pb.Protocol)
						assert.Positive(t, pb.HostPort)
						port := strconv.Itoa(pb.HostPort)
						conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), 2*time.Second)
						if assert.NoError(t, err, "reachable on 127.0.0.1:%s", port) {
							conn.Close()
						}
						for _, ip := range bridges {
							conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, port), time.Second)
							if !assert.Error(t, err, "published port reachable on bridge address %s:%s", ip, port) {
								conn.Close()
							}
						}
						if !info.Rootless {
							for _, rule := range testkit.DNATRules(t, pb.HostPort) {
								assert.True(t, testkit.DNATMatchesLoopbackOnly(rule), "iptables -t nat: %q forwards %s from more than 127.0.0.1", rule, port)
							}
						}
					}
					assert.Equal(t, "127.0.0.1", c.Endpoint.Host, "the env hands out loopback")

					assert.False(t, ctr.Privileged, "not privileged")
					var tmpfs []string
					for _, m := range ctr.Mounts {
						assert.NotEqual(t, "bind", m.Type, "host path %s mounted at %s", m.Source, m.Destination)
						assert.Equal(t, "tmpfs", m.Type, "%s is a %s mount (%s), not a tmpfs", m.Destination, m.Type, m.Source)
						for _, s := range runtimeSockets {
							assert.NotEqual(t, s, m.Source, "runtime socket mounted at %s", m.Destination)
						}
						tmpfs = append(tmpfs, m.Destination)
					}
					assert.ElementsMatch(t, eng.Spec().Tmpfs, tmpfs, "exactly the engine's tmpfs paths are mounted")

					h, err := hardeningOf(ctx, b, c.ID)
					require.NoError(t, err)
					assert.False(t, h.Privileged, "privileged")
					assert.Empty(t, h.Binds, "bind mounts")
					assert.Empty(t, h.CapAdd, "added capabilities")
					assert.Zero(t, h.Devices, "host devices")
					for mode, v := range map[string]string{"network": h.NetworkMode, "pid": h.PidMode, "ipc": h.IpcMode} {
						assert.NotEqual(t, "host", v, "%s namespace of the host", mode)
						assert.NotContains(t, v, "/proc/1/", "%s namespace of the host's init", mode)
					}
					for _, o := range h.SecurityOpt {
						assert.NotContains(t, o, "unconfined", "security option %q", o)
						assert.NotEqual(t, "label=disable", o)
					}
					assert.NotEmpty(t, h.MaskedPaths, "the default masked /proc paths (dropped only when privileged)")

					// From inside: no socket, no endpoint variable, no
					// way to the runtime.
					res, err := b.RT.Exec(ctx, c.ID, runtime.ExecSpec{Cmd: []string{"sh", "-c",
						`for s in ` + strings.Join(runtimeSockets, " ") + `; do [ -e "$s" ] && echo "socket $s"; done; ` +
							`env | grep -E '^(DOCKER_HOST|CONTAINER_HOST|CONTAINERD_ADDRESS)=' ; true`}})
					require.NoError(t, err)
					assert.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
					assert.Empty(t, strings.TrimSpace(string(res.Stdout)), "a runtime is reachable from inside the sandbox")
				})
			}
			_, err = p.Teardown(ctx, "confined")
			require.NoError(t, err)
		})

		t.Run("SiblingModePublishesNothing", func(t *testing.T) {
			info, err := b.RT.Version(ctx)
			require.NoError(t, err)
			// Control: a host-mode sandbox of the same engine, which the
			// same looks must see published, or they prove nothing.
			hp := e.Provisioner(nil)
			hsb, err := hp.Provision(ctx, "published", []string{"redis"})
			require.NoError(t, err)
			for _, c := range hsb.Containers {
				pub := publicationOf(t, ctx, b, info.Rootless, c.ID)
				assert.NotEmpty(t, pub, "control: the looks from outside see host mode's published port of %s", c.Name)
				t.Logf("control: %s is published: %q", c.Name, pub)
			}
			_, err = hp.Teardown(ctx, "published")
			require.NoError(t, err)

			network := e.Network(ctx)
			p := e.Provisioner(func(o *provision.Options) { o.Network = network })
			sb, err := p.Provision(ctx, "sibling", []string{"redis"})
			require.NoError(t, err)
			for _, c := range sb.Containers {
				assert.Empty(t, publicationOf(t, ctx, b, info.Rootless, c.ID), "%s publishes nothing", c.Name)
				h, err := hardeningOf(ctx, b, c.ID)
				require.NoError(t, err)
				assert.False(t, h.Privileged)
				assert.Contains(t, ownAddresses(t, ctx, b, c.ID), c.Endpoint.Host, "the env hands out the sibling's address")
			}
			_, err = p.Teardown(ctx, "sibling")
			require.NoError(t, err)
		})
	})
}

// publicationOf is what, seen from outside the adapter, publishes a port
// of container id on the host: the port bindings the runtime's own CLI
// reports (`docker/podman port`, and the bindings asked for in `inspect`'s
// HostConfig; ctr has no notion of ports: CNI's portmap publishes them
// with DNAT rules alone), the DNAT rules of the host's nat table that
// forward to one of the container's addresses (rootful: a rootless
// runtime's rules are in a namespace of its own), and the host's sockets
// that listen on a port the CLI reports. Empty when nothing publishes it.
func publicationOf(t *testing.T, ctx context.Context, b testruntimes.Runtime, rootless bool, id string) []string {
	t.Helper()
	var out []string
	var hostPorts []int
	if b.RT.Name() != containerd.Name {
		for _, line := range strings.Split(strings.TrimSpace(string(b.Own(t, ctx, "port", id))), "\n") {
			if line == "" {
				continue
			}
			out = append(out, "port: "+line)
			// "6379/tcp -> 127.0.0.1:61234"
			if _, hp, ok := strings.Cut(line, " -> "); ok {
				if _, port, err := net.SplitHostPort(hp); err == nil {
					n, err := strconv.Atoi(port)
					require.NoError(t, err, "port: %q", line)
					hostPorts = append(hostPorts, n)
				}
			}
		}
		var inspect []struct {
			HostConfig struct {
				PortBindings map[string][]struct{ HostIP, HostPort string }
			}
		}
		require.NoError(t, json.Unmarshal(b.OwnInspect(t, ctx, id), &inspect))
		require.Len(t, inspect, 1)
		for port, bindings := range inspect[0].HostConfig.PortBindings {
			for _, pb := range bindings {
				out = append(out, fmt.Sprintf("inspect: %s -> %s:%s", port, pb.HostIP, pb.HostPort))
			}
		}
	}
	if !rootless {
		addrs := ownAddresses(t, ctx, b, id)
		require.NotEmpty(t, addrs, "%s has an address in its network namespace", id)
		rules, err := exec.CommandContext(ctx, "iptables-save", "-t", "nat").Output()
		require.NoError(t, err, "iptables-save -t nat")
		for _, rule := range strings.Split(string(rules), "\n") {
			f := strings.Fields(rule)
			to := fieldAfter(f, "--to-destination")
			if fieldAfter(f, "-j") != "DNAT" || to == "" {
				continue
			}
			for _, a := range addrs {
				if to == a || strings.HasPrefix(to, a+":") {
					out = append(out, "nat: "+rule)
				}
			}
		}
	}
	for _, port := range hostPorts {
		// ss lists the host's listening TCP sockets on the port.
		ss, err := exec.CommandContext(ctx, "ss", "-Hltn", "sport = :"+strconv.Itoa(port)).Output()
		require.NoError(t, err, "ss -ltn")
		for _, line := range strings.Split(strings.TrimSpace(string(ss)), "\n") {
			if line != "" {
				out = append(out, "socket: "+line)
			}
		}
	}
	return out
}

// fieldAfter is the field that follows opt in a rule split in fields, ""
// when there is none.
func fieldAfter(f []string, opt string) string {
	if i := slices.Index(f, opt); i >= 0 && i+1 < len(f) {
		return f[i+1]
	}
	return ""
}

// ownAddresses are the IPv4 addresses of container id's network
// namespace, read on the host in the namespace of its process (whose pid
// the runtime's own CLI reports): not the adapter's record of them.
func ownAddresses(t *testing.T, ctx context.Context, b testruntimes.Runtime, id string) []string {
	t.Helper()
	pid := ownPid(t, ctx, b, id)
	out, err := exec.CommandContext(ctx, "nsenter", "-t", pid, "-n", "ip", "-4", "-o", "addr", "show", "scope", "global").CombinedOutput()
	require.NoError(t, err, "nsenter -t %s -n ip addr: %s", pid, out)
	var addrs []string
	for _, line := range strings.Split(string(out), "\n") {
		if a := fieldAfter(strings.Fields(line), "inet"); a != "" {
			ip, _, err := net.ParseCIDR(a)
			require.NoError(t, err, "ip addr: %q", line)
			addrs = append(addrs, ip.String())
		}
	}
	return addrs
}

// ownPid is the host pid of container id's main process, as the runtime's
// own CLI reports it (docker/podman inspect's State.Pid, ctr's task list).
func ownPid(t *testing.T, ctx context.Context, b testruntimes.Runtime, id string) string {
	t.Helper()
	if b.RT.Name() == containerd.Name {
		for _, line := range strings.Split(string(b.Own(t, ctx, "tasks", "ls")), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == id {
				return f[1]
			}
		}
		t.Fatalf("ctr tasks ls: no task %s", id)
	}
	var inspect []struct{ State struct{ Pid int } }
	require.NoError(t, json.Unmarshal(b.OwnInspect(t, ctx, id), &inspect))
	require.Len(t, inspect, 1)
	require.Positive(t, inspect[0].State.Pid, "%s runs", id)
	return strconv.Itoa(inspect[0].State.Pid)
}
