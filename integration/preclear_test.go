package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// TestPreClearLeavesALiveOwnersSandboxesAlone: a second provision for an
// owner whose container exists (made by the runtime's own tools, as an
// agent is) fails with a conflict naming the owner, and the first
// sandbox still answers its own credentials; once the tool removes the
// owner, the next provision pre-clears the leftover and succeeds. The
// grace window is off (NoPreClearGrace), so the owner alone decides.
func TestPreClearLeavesALiveOwnersSandboxesAlone(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		tool := ownerToolFor(t, b, e.TestLabel())
		var mu sync.Mutex
		var precleared []string
		p := e.Provisioner(func(o *provision.Options) {
			o.NoPreClearGrace = true
			o.Warm = provision.WarmOff
			o.OnEvent = func(ev provision.Event) {
				if ev.Kind == provision.EventPreCleared {
					mu.Lock()
					precleared = append(precleared, ev.Container)
					mu.Unlock()
				}
			}
		})
		id := e.Owner("pc")
		owner := p.OwnerName(id)
		first, err := p.Provision(ctx, id, []string{"redis"})
		require.NoError(t, err)
		tool.make(ctx, t, owner, runtime.StateRunning)

		_, err = p.Provision(ctx, id, []string{"redis"})
		require.ErrorIs(t, err, provision.ErrConflict, "the owner exists: its sandbox is not replaced")
		assert.ErrorContains(t, err, owner+" is alive", "the error names the owner")
		_, err = testruntimes.Login(ctx, first, first.Containers[0])
		require.NoError(t, err, "the first sandbox still answers its own credentials")
		assert.Equal(t, []string{first.Containers[0].Name}, e.SandboxNames(ctx))
		assert.Empty(t, precleared)

		tool.remove(ctx, t, owner)
		second, err := p.Provision(ctx, id, []string{"redis"})
		require.NoError(t, err, "the owner is gone: the leftover is pre-cleared")
		assert.Equal(t, []string{first.Containers[0].Name}, precleared)
		_, err = testruntimes.Login(ctx, second, second.Containers[0])
		require.NoError(t, err)
		_, err = testruntimes.Login(ctx, first, first.Containers[0])
		assert.Error(t, err, "the first sandbox's credentials are gone with it")
	})
}
