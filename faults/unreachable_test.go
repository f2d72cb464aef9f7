package faults

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/containerd"
	"github.com/roboco/sandboxer/runtime/docker"
	"github.com/roboco/sandboxer/runtime/podman"
)

// unreachableLimit is how fast an unreachable runtime must be reported.
const unreachableLimit = 2 * time.Second

// wrongEndpoint is a runtime endpoint where no runtime answers.
type wrongEndpoint struct {
	name string
	// make returns the endpoint as the adapter takes it and the text an
	// error must quote to name it.
	make func(t *testing.T) (endpoint, quoted string)
}

// adapterAt builds an adapter for a wrong endpoint, and the CLI flag that
// points at it.
type adapterAt struct {
	name    string
	new     func(endpoint string) (runtime.ContainerRuntime, error)
	cliFlag string
	// cliValue renders the endpoint as the CLI flag takes it.
	cliValue  func(endpoint string) string
	endpoints []wrongEndpoint
}

var (
	absentSocket = wrongEndpoint{"AbsentSocket", func(t *testing.T) (string, string) {
		p := filepath.Join(t.TempDir(), "absent.sock")
		return p, p
	}}
	staleSocket = wrongEndpoint{"StaleSocketNobodyListens", func(t *testing.T) (string, string) {
		p := filepath.Join(t.TempDir(), "stale.sock")
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		require.NoError(t, err)
		l.SetUnlinkOnClose(false)
		require.NoError(t, l.Close())
		return p, p
	}}
	refusedTCP = wrongEndpoint{"RefusedTCPPort", func(t *testing.T) (string, string) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		return "tcp://" + addr, addr
	}}
)

func unixURL(p string) string {
	if filepath.IsAbs(p) {
		return "unix://" + p
	}
	return p
}

// adaptersAt are every adapter in the tree: reporting an unreachable
// runtime needs no runtime, so all of them are checked, whichever answer
// on this host.
var adaptersAt = []adapterAt{
	{
		name:      docker.Name,
		new:       func(ep string) (runtime.ContainerRuntime, error) { return docker.New(docker.WithHost(unixURL(ep))) },
		cliFlag:   "--docker-host",
		cliValue:  unixURL,
		endpoints: []wrongEndpoint{absentSocket, staleSocket, refusedTCP},
	},
	{
		name:      podman.Name,
		new:       func(ep string) (runtime.ContainerRuntime, error) { return podman.New(podman.WithHost(unixURL(ep))) },
		cliFlag:   "--container-host",
		cliValue:  unixURL,
		endpoints: []wrongEndpoint{absentSocket, staleSocket, refusedTCP},
	},
	{
		name: containerd.Name,
		new: func(ep string) (runtime.ContainerRuntime, error) {
			return containerd.New(containerd.WithAddress(ep), containerd.WithStateDir(filepath.Join(filepath.Dir(ep), "adapter-state")))
		},
		cliFlag:   "--containerd-address",
		cliValue:  func(ep string) string { return ep },
		endpoints: []wrongEndpoint{absentSocket, staleSocket},
	},
}

// TestRuntimeUnreachable: pointed at a wrong socket, every entry point a
// user touches (the ping, Provision, Teardown, a janitor sweep, the CLI's
// up) fails within 2 s with the unavailable kind and a message naming the
// endpoint, and starts nothing.
func TestRuntimeUnreachable(t *testing.T) {
	ops := []struct {
		name string
		call func(ctx context.Context, rt runtime.ContainerRuntime) error
	}{
		{"Version", func(ctx context.Context, rt runtime.ContainerRuntime) error {
			_, err := rt.Version(ctx)
			return err
		}},
		{"Provision", func(ctx context.Context, rt runtime.ContainerRuntime) error {
			p, err := provision.New(rt, provision.Options{LabelPrefix: "sbxunreach", Getenv: func(string) string { return "" }})
			if err != nil {
				return err
			}
			_, err = p.Provision(ctx, "unreachable", allEngines)
			return err
		}},
		{"Teardown", func(ctx context.Context, rt runtime.ContainerRuntime) error {
			p, err := provision.New(rt, provision.Options{LabelPrefix: "sbxunreach"})
			if err != nil {
				return err
			}
			_, err = p.Teardown(ctx, "unreachable")
			return err
		}},
		{"JanitorSweep", func(ctx context.Context, rt runtime.ContainerRuntime) error {
			j, err := janitor.New(rt, janitor.Options{Prefix: "sbxunreach"})
			if err != nil {
				return err
			}
			_, err = j.Sweep(ctx)
			return err
		}},
	}
	for _, a := range adaptersAt {
		t.Run(a.name, func(t *testing.T) {
			for _, ep := range a.endpoints {
				t.Run(ep.name, func(t *testing.T) {
					endpoint, quoted := ep.make(t)
					for _, op := range ops {
						t.Run(op.name, func(t *testing.T) {
							// A fresh adapter per entry point: each is
							// a first contact, as for a user.
							rt, err := a.new(endpoint)
							require.NoError(t, err, "New must not contact the runtime")
							t.Cleanup(func() { _ = rt.Close() })
							ctx := testkit.Context(t, time.Minute)
							start := time.Now()
							err = op.call(ctx, rt)
							elapsed := time.Since(start)
							require.Error(t, err)
							t.Logf("after %s: %v", elapsed.Round(time.Millisecond), err)
							assert.ErrorIs(t, err, runtime.ErrUnavailable)
							assert.Contains(t, err.Error(), quoted, "the message names the endpoint")
							assert.Less(t, elapsed, unreachableLimit)
						})
					}
					t.Run("CLIUp", func(t *testing.T) {
						if testing.Short() {
							t.Skip("builds and runs the CLI binary (-short runs the in-process tests only)")
						}
						ctx := testkit.Context(t, time.Minute)
						bin := cli(t) // built before the clock starts
						require.NotEmpty(t, bin)
						res := runCLI(ctx, t, nil, "--runtime", a.name, a.cliFlag, a.cliValue(endpoint),
							"--label-prefix", "sbxunreach", "up", "--owner", "unreachable", "--services", "redis")
						t.Logf("exit %d after %s; stderr: %s", res.code, res.elapsed.Round(time.Millisecond), res.stderr)
						assert.Equal(t, 3, res.code, "the CLI's exit code for an unavailable runtime")
						assert.Contains(t, res.stderr, quoted, "stderr names the endpoint")
						assert.Empty(t, res.stdout, "no env for a sandbox that does not exist")
						assert.Less(t, res.elapsed, unreachableLimit)
					})
				})
			}
		})
	}
}
