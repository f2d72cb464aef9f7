package integration

import (
	"testing"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testruntimes"
)

// allEngines is every engine, in registry order.
var allEngines = engines.Default.Names()

// registryWith is engines.Default with its engine of e's name replaced by
// e: every engine, one of them made to fail.
func registryWith(e engines.Engine) *engines.Registry {
	all := engines.Default.All()
	for i, o := range all {
		if o.Spec().Name == e.Spec().Name {
			all[i] = e
		}
	}
	return engines.MustRegistry(all...)
}

// env is one test's world on a runtime (testruntimes.World), with this
// package's own helpers as methods.
type env struct{ *testruntimes.World }

func newEnv(t *testing.T, b testruntimes.Runtime) env {
	t.Helper()
	return env{testruntimes.NewWorld(t, b)}
}
