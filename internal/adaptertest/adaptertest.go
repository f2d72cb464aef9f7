// Package adaptertest is what the runtime adapters' own tests share on top
// of internal/testkit (the test vocabulary every test uses): the runtime
// of the environment's backend (Connect), the labels of the containers an
// adapter test makes, a busybox spec that runs until removed and one that
// asks for every field, a test network, a slog handler that records what
// an adapter logged, host-port helpers, and the check that every verb on
// an unreachable endpoint fails fast with runtime.ErrUnavailable. It is
// imported only by _test files.
//
// What is not adapter-specific (random names, fixtures, contexts, ports)
// lives in testkit, and the adapters' tests call it there.
package adaptertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// Every container and network a test makes carries Label=<runtime name>,
// plus a per-test RunLabel, so that cleanup removes exactly the test's own.
const (
	// Label marks an object as made by an adapter test; its value is the
	// runtime's name.
	Label = "sandboxer.test"
	// RunLabel holds a random value unique to one test.
	RunLabel = "sandboxer.test.run"
)

// Ctx is testkit.Context with the bound of one adapter test: two minutes,
// well within go test's own timeout.
func Ctx(t testing.TB) context.Context {
	return testkit.Context(t, 2*time.Minute)
}

// Labels labels a test's objects and registers the cleanup that removes
// every container carrying them (testkit.CleanupLabelled).
func Labels(t testing.TB, r runtime.ContainerRuntime) map[string]string {
	t.Helper()
	labels := map[string]string{Label: r.Name(), RunLabel: testkit.RandomHex(4)}
	testkit.CleanupLabelled(t, r, labels)
	return labels
}

// Sleeper is a spec for a busybox container that just runs, and dies at
// once on SIGTERM (sh as PID 1 would ignore it).
func Sleeper(image, name string, labels map[string]string) runtime.RunSpec {
	return runtime.RunSpec{
		Name:    name,
		Image:   image,
		Labels:  labels,
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
	}
}

// Connect returns the runtime open makes for the backend of the
// environment (testenv.Load first), closed when the test ends. A backend
// that does not answer ends the test through testenv.Unavailable: a skip,
// or a failure where SANDBOXER_REQUIRE lists it. -short (unit tests only)
// skips the test.
func Connect[R runtime.ContainerRuntime](t *testing.T, open func() (R, error)) R {
	t.Helper()
	testkit.RequireRuntime(t)
	testenv.Load()
	r, err := open()
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	if _, err := r.Version(Ctx(t)); err != nil {
		testenv.Unavailable(t, r.Name(), "%v", err)
	}
	return r
}
