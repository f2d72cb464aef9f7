package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
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
			network := e.Network(ctx)
			p := e.Provisioner(func(o *provision.Options) { o.Network = network })
			sb, err := p.Provision(ctx, "sibling", []string{"redis"})
			require.NoError(t, err)
			for _, c := range sb.Containers {
				ctr, err := b.RT.Inspect(ctx, c.ID)
				require.NoError(t, err)
				assert.Empty(t, ctr.Ports, "%s publishes nothing", c.Name)
				assert.False(t, ctr.Privileged)
				assert.Equal(t, ctr.Networks[network], c.Endpoint.Host, "the env hands out the sibling address")
			}
			_, err = p.Teardown(ctx, "sibling")
			require.NoError(t, err)
		})
	})
}
