package provision

import (
	"context"
	"testing"

	"github.com/roboco/sandboxer/engines"
	_ "github.com/roboco/sandboxer/engines/all"
)

// SetReachable makes the mode decision see f's answer instead of dialling,
// until the test ends (the fake runtime's addresses are routed wherever
// the host's default route goes). Tests that use it must not run in
// parallel.
func SetReachable(t testing.TB, f func(context.Context, engines.Endpoint) (bool, error)) {
	old := reachable
	reachable = f
	t.Cleanup(func() { reachable = old })
}

// CanFallBack is canFallBack: whether a failed warm start may go cold.
var CanFallBack = canFallBack

// WireDelay is wireDelay: the pause between two logins of the wire check.
var WireDelay = wireDelay
