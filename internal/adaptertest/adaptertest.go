// Package adaptertest is what the runtime adapters' tests share: the
// labels, fixtures and cleanup of containers a test makes on a real
// backend, a slog handler that records what an adapter logged, host-port
// helpers, and the check that every verb on an unreachable endpoint fails
// fast with runtime.ErrUnavailable. It is imported only by _test files.
package adaptertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
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

// Ctx is a context bounded well within go test's own timeout, cancelled
// when the test ends.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// RandomSuffix is 8 hex characters.
func RandomSuffix(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// Busybox returns the busybox fixture, making sure r's backend has it
// (pulling it from the loopback registry when needed); a fixture that
// cannot be had skips the test, or fails it under SANDBOXER_REQUIRE.
func Busybox(t testing.TB, r runtime.ContainerRuntime) string {
	t.Helper()
	ref := testenv.Image(t, r.Name(), "busybox")
	ctx := Ctx(t)
	ok, err := r.ImageExists(ctx, ref)
	require.NoError(t, err)
	if !ok {
		if err := r.PullImage(ctx, ref, nil); err != nil {
			testenv.Unavailable(t, r.Name(), "image %s: %v", ref, err)
		}
	}
	return ref
}

// Labels labels a test's objects and registers the cleanup that removes
// every container carrying them.
func Labels(t testing.TB, r runtime.ContainerRuntime) map[string]string {
	t.Helper()
	labels := map[string]string{Label: r.Name(), RunLabel: RandomSuffix(t)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cs, err := r.List(ctx, labels)
		if err != nil {
			t.Errorf("cleanup: list: %v", err)
			return
		}
		for _, c := range cs {
			if err := r.Remove(ctx, c.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
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
