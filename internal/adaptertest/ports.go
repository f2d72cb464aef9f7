package adaptertest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// AssertNoKind checks that err has none of the port's error kinds: a taken
// host port is a failure of its own, not "not found" or "already exists".
func AssertNoKind(t testing.TB, err error) {
	t.Helper()
	for _, k := range []error{runtime.ErrNotFound, runtime.ErrAlreadyExists, runtime.ErrUnavailable, runtime.ErrImageNotFound, runtime.ErrUnsupported} {
		assert.NotErrorIs(t, err, k)
	}
}

// AssertNothingLeft checks that a failed Run of the container name left
// no container behind among those carrying labels.
func AssertNothingLeft(t testing.TB, ctx context.Context, r runtime.ContainerRuntime, labels map[string]string, name string) {
	t.Helper()
	left, err := r.List(ctx, labels)
	require.NoError(t, err)
	assert.Empty(t, left, "a failed run leaves no container")
	_, err = r.Inspect(ctx, name)
	assert.ErrorIs(t, err, runtime.ErrNotFound)
}
