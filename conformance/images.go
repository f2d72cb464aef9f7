package conformance

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/runtime"
)

// requireRegistry ends the test (skip, or fail under SANDBOXER_REQUIRE)
// when there is no loopback registry to pull from.
func (s *suite) requireRegistry(t *testing.T) {
	t.Helper()
	if s.cfg.Fixtures.Registry == "" {
		testenv.Unavailable(t, s.cfg.Runtime, "SANDBOXER_REGISTRY is not set: the pull semantics need the loopback registry (run `make env`)")
	}
}

// freshRef tags the busybox fixture's manifest under a new random tag in
// the loopback registry and returns that ref: an image the registry serves
// but that no runtime can have locally yet, without removing any shared
// image. The tag is deleted from the registry when the test ends; the
// runtime's local copy stays (the port has no image removal), and costs a
// tag, since its layers are the fixture's.
func (s *suite) freshRef(t *testing.T, ctx context.Context) string {
	t.Helper()
	s.requireRegistry(t)
	src, err := name.ParseReference(s.cfg.Fixtures.Busybox, name.Insecure)
	require.NoError(t, err, "parse %s", s.cfg.Fixtures.Busybox)
	require.Equal(t, s.cfg.Fixtures.Registry, src.Context().RegistryStr(),
		"Fixtures.Busybox (%s) must be served by Fixtures.Registry", s.cfg.Fixtures.Busybox)

	desc, err := remote.Get(src, remote.WithContext(ctx))
	require.NoError(t, err, "registry %s does not serve %s", s.cfg.Fixtures.Registry, src)
	dst := src.Context().Tag("conf-" + s.runID + "-" + randomHex(4))
	require.NoError(t, remote.Tag(dst, desc, remote.WithContext(ctx)), "tag %s", dst)
	t.Cleanup(func() {
		// Deleting by tag removes the tag only; a registry that refuses it
		// keeps one more tag of an existing manifest, which is harmless.
		if err := remote.Delete(dst); err != nil {
			t.Logf("cleanup: registry kept tag %s: %v", dst, err)
		}
	})
	return dst.String()
}

// testImageExistsPullExists: a ref that is absent locally is reported
// absent, pulls from the loopback registry with progress events, is
// reported present afterwards and runs.
func testImageExistsPullExists(t *testing.T, s *suite) {
	ctx := testContext(t)
	ref := s.freshRef(t, ctx)
	if s.images == nil {
		// No image store to ask or fill (Kubernetes): Run pulls the ref
		// nobody pulled before.
		spec := s.spec(t)
		spec.Image = ref
		c := s.run(t, ctx, spec)
		assert.Equal(t, ref, c.Image, "the ref the backend pulled at Run runs under its ref")
		assert.Equal(t, runtime.StateRunning, c.State)
		return
	}

	exists, err := s.images.ImageExists(ctx, ref)
	require.NoError(t, err, "image exists before the pull")
	require.False(t, exists, "%s was just tagged in the registry and cannot be present locally", ref)

	var events atomic.Int64
	err = s.images.PullImage(ctx, ref, func(runtime.PullProgress) { events.Add(1) })
	require.NoError(t, err, "pull %s", ref)
	assert.Positive(t, events.Load(), "the pull reported no progress")

	exists, err = s.images.ImageExists(ctx, ref)
	require.NoError(t, err, "image exists after the pull")
	assert.True(t, exists, "%s is absent after its pull", ref)

	spec := s.spec(t)
	spec.Image = ref
	c := s.run(t, ctx, spec)
	assert.Equal(t, ref, c.Image, "the pulled image runs under its ref")
}

// testPullMissingIsImageNotFound: pulling a ref that the registry does not
// have is ErrImageNotFound, names the runtime and the ref, and leaves the
// ref absent.
func testPullMissingIsImageNotFound(t *testing.T, s *suite) {
	ctx := testContext(t)
	s.requireRegistry(t)
	ref := fmt.Sprintf("%s/sandboxer/absent-%s:none", s.cfg.Fixtures.Registry, randomHex(6))
	if s.images == nil {
		// No image store (Kubernetes): the pull is Run's, and a ref the
		// registry does not have is ErrImageNotFound there, leaving nothing.
		spec := s.spec(t)
		spec.Image = ref
		s.track(t, spec.Name)
		_, err := s.rt.Run(ctx, spec)
		require.Error(t, err, "run of %s", ref)
		assert.ErrorIs(t, err, runtime.ErrImageNotFound)
		assertErrorNames(t, err, s.rt.Name(), spec.Name, ref)
		_, err = s.rt.Inspect(ctx, spec.Name)
		assert.ErrorIs(t, err, runtime.ErrNotFound, "a failed run leaves no container behind")
		return
	}

	err := s.images.PullImage(ctx, ref, nil)
	require.Error(t, err, "pull of %s", ref)
	assert.ErrorIs(t, err, runtime.ErrImageNotFound)
	assertErrorNames(t, err, s.rt.Name(), ref)

	exists, err := s.images.ImageExists(ctx, ref)
	require.NoError(t, err, "image exists of an absent ref is not an error")
	assert.False(t, exists)
}

// testRunAbsentImageIsImageNotFound: Run does not pull; running an image
// that is not present is ErrImageNotFound, and no container is left under
// the name.
func testRunAbsentImageIsImageNotFound(t *testing.T, s *suite) {
	ctx := testContext(t)
	spec := s.spec(t)
	spec.Image = "sandboxer-conformance/absent-" + randomHex(6) + ":none"
	s.track(t, spec.Name)

	_, err := s.rt.Run(ctx, spec)
	require.Error(t, err, "run of an absent image")
	assert.ErrorIs(t, err, runtime.ErrImageNotFound)
	assertErrorNames(t, err, s.rt.Name(), spec.Name, spec.Image)

	_, err = s.rt.Inspect(ctx, spec.Name)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "a failed run leaves no container behind")
}
