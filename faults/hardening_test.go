package faults

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
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
		CapAdd:      hc.CapAdd,
		Devices:     len(hc.Devices),
		NetworkMode: string(hc.NetworkMode),
		PidMode:     string(hc.PidMode),
		IpcMode:     string(hc.IpcMode),
		SecurityOpt: hc.SecurityOpt,
		MaskedPaths: hc.MaskedPaths,
	}, nil
}

// TestSandboxesAreConfined inspects the sandboxes Provision makes: every
// published port is bound to 127.0.0.1 (and refused on the host's other
// addresses), and no sandbox has a runtime socket, a host-path mount,
// privileges, extra capabilities or devices, or the host's namespaces.
func TestSandboxesAreConfined(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := testruntimes.NewWorld(t, b)
		ctx := testkit.Context(t, 5*time.Minute)
		e.Warm()

		t.Run("HostMode", func(t *testing.T) {
			p := e.Provisioner(nil)
			sb, err := p.Provision(ctx, "confined", allEngines)
			require.NoError(t, err)
			others := otherHostAddresses(t)
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
						for _, ip := range others {
							conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, port), time.Second)
							if !assert.Error(t, err, "published port reachable on %s:%s", ip, port) {
								conn.Close()
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

					if b.Docker != nil {
						h, err := dockerHardening(ctx, b.Docker, c.ID)
						require.NoError(t, err)
						assert.False(t, h.Privileged, "privileged")
						assert.Empty(t, h.Binds, "bind mounts")
						assert.Empty(t, h.CapAdd, "added capabilities")
						assert.Zero(t, h.Devices, "host devices")
						for mode, v := range map[string]string{"network": h.NetworkMode, "pid": h.PidMode, "ipc": h.IpcMode} {
							assert.NotEqual(t, "host", v, "%s namespace of the host", mode)
						}
						for _, o := range h.SecurityOpt {
							assert.NotContains(t, o, "unconfined", "security option %q", o)
							assert.NotEqual(t, "label=disable", o)
						}
						assert.NotEmpty(t, h.MaskedPaths, "the default masked /proc paths (dropped only when privileged)")
					}

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

// otherHostAddresses lists this host's IPv4 addresses that are not
// loopback: a port bound to 127.0.0.1 must refuse connections on each.
func otherHostAddresses(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	var out []string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() {
			continue
		}
		out = append(out, ipn.IP.String())
	}
	slices.Sort(out)
	t.Logf("host addresses checked for refusal: %v", out)
	return out
}
