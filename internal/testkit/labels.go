package testkit

import (
	"context"
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
// them). What it cannot list or remove fails the test: a container left
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
