package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/runtime"
)

// TestJanitorRemovesOrphanedOwnerNetworks: an owner container made with
// the runtime's own CLI (docker run, podman run, the rootless user's
// podman run; the adapter on containerd), a redis sandbox provisioned for
// it (host mode: its owner network is made), then the owner removed with
// the CLI (`rm -f`): sweeps remove the sandbox, then the owner network, as
// the runtime's own `network inspect` sees it. A second owner, the same
// way, but with a foreign container attached to its owner network
// (`network connect`; on containerd one run on it by the adapter): the
// sandbox goes, the network stays across sweeps; once that container is
// removed, a sweep removes the network too.
func TestJanitorRemovesOrphanedOwnerNetworks(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := testruntimes.NewWorld(t, b)
		ctx := testkit.Context(t, 6*time.Minute)
		own := newOwnTool(t, b)
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			removeWorldNetworks(t, cctx, e)
		})
		testkit.CleanupLabelled(t, b.RT, e.TestLabels())
		busybox := testkit.Image(t, b.RT, "busybox")
		p := e.Provisioner(nil)
		j, err := janitor.New(b.RT, janitor.Options{Prefix: e.Prefix, NoGrace: true})
		require.NoError(t, err)

		// setup makes an owner with the CLI, a redis sandbox for it, and
		// returns the owner network (as the runtime's inspect of the
		// sandbox names it) after removing the owner with the CLI.
		setup := func(tag string) (ownerNet, sandbox string) {
			id := e.Owner(tag)
			owner := p.OwnerName(id)
			own.container(t, ctx, owner, busybox, "", e.TestLabels(), "sleep", "3600")
			sb, err := p.Provision(ctx, id, []string{"redis"})
			require.NoError(t, err)
			addrs := own.addresses(t, ctx, sb.Containers[0].ID)
			require.Len(t, addrs, 1, "the sandbox is on its owner network only: %v", addrs)
			for n := range addrs {
				ownerNet = n
			}
			assert.NotEqual(t, own.defaultNetwork(t, ctx), ownerNet, "not the runtime's default network")
			requireNetwork(t, ctx, own, e, ownerNet, true, "the owner network exists while its owner lives")
			if own.ctr() {
				require.NoError(t, b.RT.Remove(ctx, owner), "remove the owner (the adapter: the ctr row)")
			} else {
				own.must(t, ctx, "rm", "-f", owner)
			}
			return ownerNet, sb.Containers[0].Name
		}

		t.Run("Orphaned", func(t *testing.T) {
			ownerNet, sandbox := setup("orphan")
			testkit.Poll(t, 2*time.Minute, time.Second, func() error {
				rep, err := j.Sweep(ctx)
				require.NoError(t, err)
				if slices.Contains(e.SandboxNames(ctx), sandbox) {
					return fmt.Errorf("sandbox %s still there: %s", sandbox, rep)
				}
				if ok, err := networkExists(ctx, own, e, ownerNet); err != nil || ok {
					return fmt.Errorf("network %s still there (%v): %s", ownerNet, err, rep)
				}
				return nil
			})
			t.Logf("sweeps removed the orphaned %s and its owner network %s", sandbox, ownerNet)
		})

		t.Run("StillInUse", func(t *testing.T) {
			ownerNet, sandbox := setup("inuse")
			attached := e.Prefix + "-attached"
			if own.ctr() {
				t.Logf("containerd: the attached container is run on %s by the adapter (ctr joins no CNI network)", ownerNet)
				_, err := b.RT.Run(ctx, runtime.RunSpec{Name: attached, Image: busybox, Command: []string{"sleep", "3600"}, Labels: e.TestLabels(), Network: ownerNet})
				require.NoError(t, err)
			} else if own.rootless != nil {
				// A rootless container started without a network is on
				// slirp4netns, which `podman network connect` refuses
				// ("slirp4netns" is not supported: invalid network mode):
				// it joins at its start, as the README says for rootless.
				t.Logf("podman-rootless: the attached container joins %s at its start (podman run --network)", ownerNet)
				own.container(t, ctx, attached, busybox, ownerNet, e.TestLabels(), "sleep", "3600")
			} else {
				own.container(t, ctx, attached, busybox, "", e.TestLabels(), "sleep", "3600")
				own.connect(t, ctx, ownerNet, attached)
			}
			testkit.Poll(t, 2*time.Minute, time.Second, func() error {
				rep, err := j.Sweep(ctx)
				require.NoError(t, err)
				if slices.Contains(e.SandboxNames(ctx), sandbox) {
					return fmt.Errorf("sandbox %s still there: %s", sandbox, rep)
				}
				return nil
			})
			for range 3 {
				_, err := j.Sweep(ctx)
				require.NoError(t, err)
				requireNetwork(t, ctx, own, e, ownerNet, true, "a network with a container on it is never removed")
			}
			addrs := own.addresses(t, ctx, attached)
			assert.Contains(t, addrs, ownerNet, "the attached container is still on it")

			// Control: without the container, the same sweep removes it.
			require.NoError(t, b.RT.Remove(ctx, attached))
			testkit.Poll(t, 2*time.Minute, time.Second, func() error {
				rep, err := j.Sweep(ctx)
				require.NoError(t, err)
				if ok, err := networkExists(ctx, own, e, ownerNet); err != nil || ok {
					return fmt.Errorf("network %s still there (%v): %s", ownerNet, err, rep)
				}
				return nil
			})
		})
	})
}

// networkExists asks the runtime's own CLI (`network inspect`; on the ctr
// row, which has no networks, the adapter's ListNetworks) whether network
// exists.
func networkExists(ctx context.Context, own ownTool, e *testruntimes.World, network string) (bool, error) {
	if own.ctr() {
		nets, err := e.RT.ListNetworks(ctx, nil)
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(nets, func(n runtime.Network) bool { return n.Name == network }), nil
	}
	res, err := own.run(ctx, nil, "network", "inspect", network)
	if err != nil {
		return false, err
	}
	if res.code == 0 {
		return true, nil
	}
	if s := strings.ToLower(res.stderr); strings.Contains(s, "not found") || strings.Contains(s, "no such network") {
		return false, nil
	}
	return false, errors.New("network inspect " + network + ": " + res.stderr)
}

func requireNetwork(t testing.TB, ctx context.Context, own ownTool, e *testruntimes.World, network string, want bool, msg string) {
	t.Helper()
	ok, err := networkExists(ctx, own, e, network)
	require.NoError(t, err)
	require.Equal(t, want, ok, "%s: %s", network, msg)
}
