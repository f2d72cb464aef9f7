package sandboxtest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRefillWorkers: four workers per core, never fewer than four nor
// more than eight.
func TestRefillWorkers(t *testing.T) {
	for _, tt := range []struct{ cpus, want int }{
		{0, 4}, {1, 4}, {2, 8}, {3, 8}, {64, 8},
	} {
		assert.Equal(t, tt.want, refillWorkers(tt.cpus), "%d cores", tt.cpus)
	}
}

// TestNextJob: the workers' schedule, without a server: a clone for a
// built pool short of its size (counting the clones in flight), before
// any drop; a drop once the pools are full; a drop first once
// maxPendingDrops are waiting; nothing for an unbuilt or pool-less
// template.
func TestNextJob(t *testing.T) {
	newAlloc := func(drops int, tpls ...*template) *postgresAlloc {
		a := &postgresAlloc{templates: map[string]*template{}}
		for i, tpl := range tpls {
			a.templates[fmt.Sprint(i)] = tpl
		}
		for i := range drops {
			a.drops = append(a.drops, fmt.Sprintf("t_%d", i))
		}
		return a
	}
	pool := func(size, ready, inflight int, built bool) *template {
		tpl := &template{name: "tpl", ready: make(chan clone, size), built: built, inflight: inflight}
		for range ready {
			tpl.ready <- clone{name: "ready"}
		}
		return tpl
	}

	t.Run("ClonesBeforeDrops", func(t *testing.T) {
		tpl := pool(4, 1, 1, true)
		a := newAlloc(3, tpl)
		for range 2 { // 1 ready + 1 in flight: two more to make
			got, drop, ok := a.next()
			require.True(t, ok)
			assert.Same(t, tpl, got)
			assert.Empty(t, drop)
		}
		assert.Equal(t, 3, tpl.inflight, "each claimed clone is counted in flight")
		for i := range 3 {
			got, drop, ok := a.next()
			require.True(t, ok)
			assert.Nil(t, got)
			assert.Equal(t, fmt.Sprintf("t_%d", i), drop, "drops in release order")
		}
		_, _, ok := a.next()
		assert.False(t, ok, "pool full, nothing to drop")
	})
	t.Run("DropsFirstWhenTooManyWait", func(t *testing.T) {
		tpl := pool(4, 0, 0, true)
		a := newAlloc(maxPendingDrops, tpl)
		got, drop, ok := a.next()
		require.True(t, ok)
		assert.Nil(t, got)
		assert.Equal(t, "t_0", drop)
		got, _, ok = a.next()
		require.True(t, ok)
		assert.Same(t, tpl, got, "below the bound again: the pool first")
	})
	t.Run("NothingForUnbuiltOrPoolless", func(t *testing.T) {
		a := newAlloc(0, pool(4, 0, 0, false), &template{name: "none", built: true})
		_, _, ok := a.next()
		assert.False(t, ok)
	})
}
