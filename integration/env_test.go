package integration

import (
	"testing"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testruntimes"
)

// allEngines is every engine, in registry order.
var allEngines = engines.Default.Names()

// env is one test's world on a runtime (testruntimes.World), with this
// package's own helpers as methods.
type env struct{ *testruntimes.World }

func newEnv(t *testing.T, b testruntimes.Runtime) env {
	t.Helper()
	return env{testruntimes.NewWorld(t, b)}
}
