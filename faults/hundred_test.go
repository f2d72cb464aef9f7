package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime/docker"
)

// hundredOwners is how many owners TestHundredOwnersOnDocker provisions at
// once: more than Docker's default address pools give networks of their
// own (about 30).
const hundredOwners = 100

// hundredParallel bounds the provisions and teardowns in flight.
const hundredParallel = 8

// TestHundredOwnersOnDocker: 100 owners, a redis sandbox each in host mode,
// provisioned at once (8 in flight) through the library on the shared
// daemon with its default address pools: every one provisioned, each on
// an owner network of its own, a sample of pairs isolated (from inside one
// owner's sandbox, with docker exec, a TCP connect to the other's address
// fails, while one to its own address succeeds), and after the teardowns
// no network of the world's label prefix is left (`docker network ls
// --filter label=...`).
func TestHundredOwnersOnDocker(t *testing.T) {
	b := testruntimes.Connect(t, docker.Name)
	e := testruntimes.NewWorld(t, b)
	own := newOwnTool(t, b)
	ctx := testkit.Context(t, 8*time.Minute)
	e.Warm()
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		removeWorldNetworks(t, cctx, e)
	})
	p := e.Provisioner(nil)

	ids := make([]string, hundredOwners)
	sbs := make([]provision.Sandbox, hundredOwners)
	for i := range ids {
		ids[i] = e.Owner(fmt.Sprintf("h%03d", i))
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		g, gctx := errgroup.WithContext(cctx)
		g.SetLimit(hundredParallel)
		for _, id := range ids {
			g.Go(func() error { _, _ = p.Teardown(gctx, id); return nil })
		}
		_ = g.Wait()
	})

	start := time.Now()
	var mu sync.Mutex
	var failed []string
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(hundredParallel)
	for i, id := range ids {
		g.Go(func() error {
			sb, err := p.Provision(gctx, id, []string{"redis"})
			if err != nil {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("%s: %v", id, err))
				mu.Unlock()
				return nil
			}
			sbs[i] = sb
			return nil
		})
	}
	require.NoError(t, g.Wait())
	provisioned := time.Since(start)
	require.Empty(t, failed, "every owner provisioned")
	t.Logf("%d owners provisioned in %s (%d in flight)", hundredOwners, provisioned.Round(time.Millisecond), hundredParallel)

	// Each on a network of its own, as docker inspect reports it.
	nets := map[string]string{} // network -> owner id
	addrs := make([]string, hundredOwners)
	for i, sb := range sbs {
		require.Len(t, sb.Containers, 1)
		a := own.addresses(t, ctx, sb.Containers[0].ID)
		require.Len(t, a, 1, "%s's sandbox is on one network: %v", ids[i], a)
		for n, ip := range a {
			require.NotContains(t, nets, n, "%s shares network %s with %s", ids[i], n, nets[n])
			nets[n] = ids[i]
			addrs[i] = ip
		}
	}
	listed := strings.Fields(own.must(t, ctx, "network", "ls", "-q", "--filter", "label="+labels.For(e.Prefix).Sandbox+"="+labels.SandboxValue))
	assert.Len(t, listed, hundredOwners, "docker network ls finds one owner network per owner")

	// A sample of pairs: i reaches its own address, not its pair's.
	for _, pair := range [][2]int{{0, 1}, {1, 0}, {17, 83}, {42, 99}, {99, 50}} {
		from, to := sbs[pair[0]].Containers[0], pair[1]
		ok, detail, err := probe(ctx, own, from.ID, true, addrs[pair[0]], 6379)
		require.NoError(t, err)
		require.True(t, ok, "control: %s reaches its own address %s: %s", from.Name, addrs[pair[0]], detail)
		ok, detail, err = probe(ctx, own, from.ID, true, addrs[to], 6379)
		require.NoError(t, err)
		assert.False(t, ok, "%s connects to %s's sandbox at %s: %s", from.Name, ids[to], addrs[to], detail)
	}

	start = time.Now()
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(hundredParallel)
	for _, id := range ids {
		g.Go(func() error {
			_, err := p.Teardown(gctx, id)
			return err
		})
	}
	require.NoError(t, g.Wait())
	t.Logf("%d owners torn down in %s", hundredOwners, time.Since(start).Round(time.Millisecond))
	left := own.must(t, ctx, "network", "ls", "--format", "{{.Name}}", "--filter", "label="+labels.For(e.Prefix).Sandbox+"="+labels.SandboxValue)
	assert.Empty(t, left, "no network of sandboxer's is left after teardown")
	assert.Empty(t, e.SandboxNames(ctx), "no sandbox is left")
}
