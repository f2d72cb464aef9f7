package faults

import "github.com/roboco/sandboxer/engines"

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
