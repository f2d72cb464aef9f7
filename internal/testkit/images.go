package testkit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/runtime"
)

// pullTimeout bounds making one image present (a pull from the loopback
// registry, or from further away on a fresh machine).
const pullTimeout = 5 * time.Minute

// Image returns the ref of the stand-in image name (SANDBOXER_IMAGE_<NAME>
// of build/images.env: "busybox", "postgres", ...), present on rt. A
// stand-in that is not configured, or cannot be pulled, ends the test
// through testenv.Unavailable.
func Image(t testing.TB, rt runtime.ContainerRuntime, name string) string {
	t.Helper()
	return EnsureImage(t, rt, testenv.Image(t, rt.Name(), name))
}

// EnsureImage pulls ref into rt when it is absent (Run never pulls, and a
// fresh machine has only what some test pulled before) and returns ref.
// A runtime without an image store (no runtime.ImageStore: it pulls at
// Run) is left to pull it.
// An image that can be neither found nor pulled ends the test through
// testenv.Unavailable: a skip, or a failure when SANDBOXER_REQUIRE names
// the runtime.
func EnsureImage(t testing.TB, rt runtime.ContainerRuntime, ref string) string {
	t.Helper()
	store, ok := runtime.As[runtime.ImageStore](rt)
	if !ok {
		return ref // the runtime has no image store: it pulls at Run
	}
	ctx := Context(t, pullTimeout)
	ok, err := store.ImageExists(ctx, ref)
	require.NoError(t, err, "image exists %s", ref)
	if !ok {
		if err := store.PullImage(ctx, ref, nil); err != nil {
			testenv.Unavailable(t, rt.Name(), "image %s is absent and cannot be pulled: %v", ref, err)
		}
	}
	return ref
}

// Store is rt's image store (runtime.ImageStore, through any wrapper); it
// fails the test when rt has none.
func Store(t testing.TB, rt runtime.ContainerRuntime) runtime.ImageStore {
	t.Helper()
	s, ok := runtime.As[runtime.ImageStore](rt)
	require.True(t, ok, "%s has no image store (runtime.ImageStore)", rt.Name())
	return s
}
