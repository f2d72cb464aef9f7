package faults

import "github.com/roboco/sandboxer/engines"

// allEngines is every engine, in registry order.
var allEngines = engines.Default.Names()
