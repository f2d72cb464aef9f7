package alltest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	_ "github.com/roboco/sandboxer/engines/all/alltest"
	"github.com/roboco/sandboxer/engines/enginetest"
)

// TestEveryEngineHasATestKit: the tests that prove a full sandbox errors
// instead of dying, the bench that measures what a sandbox holds, and
// sandboxtest's per-test databases reach every engine through its kit,
// found through the engine.
func TestEveryEngineHasATestKit(t *testing.T) {
	require.NotEmpty(t, engines.Default.All())
	for _, e := range engines.Default.All() {
		t.Run(e.Spec().Name, func(t *testing.T) {
			kit, err := enginetest.KitOf(e)
			require.NoError(t, err, "nothing can fill %s or hand out its databases", e.Spec().Name)
			assert.Equal(t, e.Spec().Name, kit.Engine().Spec().Name, "the kit is its engine's")
		})
	}
}
