package testkit

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/roboco/sandboxer/runtime"
)

// cleanupTimeout bounds one cleanup.
const cleanupTimeout = 2 * time.Minute

// CleanupLabelled registers, as a cleanup of t, the removal of every
// container that matches one of selectors. Call it before the test creates
// anything, so that what it made is removed even when it fails half-way.
func CleanupLabelled(t testing.TB, rt runtime.ContainerRuntime, selectors ...map[string]string) {
	t.Cleanup(func() { RemoveLabelled(t, rt, selectors...) })
}

// RemoveLabelled removes every container, in any state, that matches one
// of selectors (label selectors, as runtime.ContainerRuntime.List takes
// them), then every network that matches one (ListNetworks: the owner
// networks carry the sandbox marker). What it cannot list or remove fails the test: a container left
// behind is a leak.
func RemoveLabelled(t testing.TB, rt runtime.ContainerRuntime, selectors ...map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	for _, sel := range selectors {
		cs, err := rt.List(ctx, sel)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			continue
		}
		for _, c := range cs {
			if err := rt.Remove(ctx, c.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	}
	// Then the networks the selectors match (an owner network carries the
	// sandbox marker), once no container is left on them.
	for _, sel := range selectors {
		nets, err := rt.ListNetworks(ctx, sel)
		if errors.Is(err, runtime.ErrUnsupported) {
			continue
		}
		if err != nil {
			t.Errorf("cleanup: %v", err)
			continue
		}
		for _, n := range nets {
			if err := rt.RemoveNetwork(ctx, n.Name); err != nil {
				t.Errorf("cleanup: network %s: %v", n.Name, err)
			}
		}
	}
}

// Names returns the names of cs, sorted: for assertions and messages.
func Names(cs []runtime.Container) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return out
}
