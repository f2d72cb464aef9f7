package conformance

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/dockerarchive"
)

// derivedFile is where the images the suite builds keep their marker.
const derivedFile = "/sandboxer-conformance/marker"

// loadRef is a tag no other test uses, under localhost/ (which every
// runtime stores as it is written).
func (s *suite) loadRef() string {
	return "localhost/sandboxer-conformance/" + s.runID + ":" + randomHex(4)
}

// trackImage removes ref when the test ends.
func (s *suite) trackImage(t testing.TB, ref string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := s.images.RemoveImage(ctx, ref); err != nil {
			t.Errorf("cleanup: remove image %s: %v", ref, err)
		}
	})
}

// listedImages is the runtime's own CLI's image list (Config.Images).
func (s *suite) listedImages(t testing.TB, ctx context.Context) []string {
	t.Helper()
	require.NotNil(t, s.cfg.Images, "Config.Images: the image semantics check the runtime's own image list")
	refs, err := s.cfg.Images(ctx)
	require.NoError(t, err, "the runtime's own image list")
	return refs
}

// derived saves the busybox fixture through the port, appends a layer
// holding derivedFile (content marker) with go-containerregistry, and
// returns it as a docker-archive tagged ref, with the image's config
// digest.
func (s *suite) derived(t testing.TB, ctx context.Context, ref, marker string) (archive []byte, configDigest string) {
	t.Helper()
	var saved bytes.Buffer
	require.NoError(t, s.images.SaveImage(ctx, s.cfg.Fixtures.Busybox, &saved), "save %s", s.cfg.Fixtures.Busybox)
	base, err := tarball.Image(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(saved.Bytes())), nil
	}, nil)
	require.NoError(t, err, "the saved archive of %s is a docker-archive go-containerregistry reads", s.cfg.Fixtures.Busybox)

	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: derivedFile[1:], Mode: 0o644, Size: int64(len(marker)), Typeflag: tar.TypeReg}))
	_, err = tw.Write([]byte(marker))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	img, err := mutate.AppendLayers(base, static.NewLayer(layer.Bytes(), types.DockerUncompressedLayer))
	require.NoError(t, err, "append a layer")

	tag, err := name.NewTag(ref)
	require.NoError(t, err, "tag %s", ref)
	var out bytes.Buffer
	require.NoError(t, tarball.Write(tag, img, &out), "write the derived archive")
	digest, err := img.ConfigName()
	require.NoError(t, err, "config digest")
	return out.Bytes(), digest.String()
}

// testImageIDIsConfigDigest: ImageID is the digest of the image's config
// as the registry serves it (the same on every runtime), and an absent
// image is ErrImageNotFound.
func testImageIDIsConfigDigest(t *testing.T, s *suite) {
	ctx := testContext(t)
	if s.images == nil {
		s.assertNoImageStore(t, ctx)
		return
	}
	s.requireRegistry(t)
	ref, err := name.ParseReference(s.cfg.Fixtures.Busybox, name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(ref, remote.WithContext(ctx))
	require.NoError(t, err, "the registry serves %s", ref)
	want, err := img.ConfigName()
	require.NoError(t, err)

	id, err := s.images.ImageID(ctx, s.cfg.Fixtures.Busybox)
	require.NoError(t, err, "image id of %s", s.cfg.Fixtures.Busybox)
	assert.Equal(t, want.String(), id, "the image id is the config digest the registry serves")

	absent := s.loadRef()
	_, err = s.images.ImageID(ctx, absent)
	assert.ErrorIs(t, err, runtime.ErrImageNotFound, "image id of an absent image")
	assertErrorNames(t, err, s.rt.Name(), absent)
	err = s.images.SaveImage(ctx, absent, io.Discard)
	assert.ErrorIs(t, err, runtime.ErrImageNotFound, "save of an absent image")
}

// testImageConfigIsTheRegistrys: ImageConfig reports the Env and the
// VOLUMEs of the image's config as the registry serves it (the layout an
// engine places its tmpfs by), and an absent image is ErrImageNotFound.
func testImageConfigIsTheRegistrys(t *testing.T, s *suite) {
	ctx := testContext(t)
	if s.images == nil {
		return // no image store: no image config to read
	}
	s.requireRegistry(t)
	ref, err := name.ParseReference(s.cfg.Fixtures.BusyboxVolume, name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(ref, remote.WithContext(ctx))
	require.NoError(t, err, "the registry serves %s", ref)
	want, err := img.ConfigFile()
	require.NoError(t, err)

	got, err := s.images.ImageConfig(ctx, s.cfg.Fixtures.BusyboxVolume)
	require.NoError(t, err, "image config of %s", s.cfg.Fixtures.BusyboxVolume)
	assert.Equal(t, want.Config.Env, got.Env, "Env as the registry serves it")
	assert.Equal(t, []string{"/data"}, got.Volumes, "the VOLUMEs as the registry serves them")
	require.Contains(t, want.Config.Volumes, "/data", "the fixture declares VOLUME /data")

	absent := s.loadRef()
	_, err = s.images.ImageConfig(ctx, absent)
	assert.ErrorIs(t, err, runtime.ErrImageNotFound, "image config of an absent image")
	assertErrorNames(t, err, s.rt.Name(), absent)
}

// testSaveLoadRoundTrip: an image saved through the port, given one more
// layer by go-containerregistry and loaded back under a new tag, is
// present under that tag in the runtime's own image list, has the derived
// config's digest as its ID, and runs with the new layer's file in it.
func testSaveLoadRoundTrip(t *testing.T, s *suite) {
	ctx := testContext(t)
	if s.images == nil {
		s.assertNoImageStore(t, ctx)
		return
	}
	ref, marker := s.loadRef(), "marker-"+randomHex(8)
	archive, digest := s.derived(t, ctx, ref, marker)

	s.trackImage(t, ref)
	loaded, err := s.images.LoadImage(ctx, bytes.NewReader(archive))
	require.NoError(t, err, "load %s", ref)
	assert.Equal(t, ref, loaded, "LoadImage returns the archive's tag")
	assert.Contains(t, s.listedImages(t, ctx), ref, "the runtime's own image list has the loaded tag")

	id, err := s.images.ImageID(ctx, ref)
	require.NoError(t, err, "image id of %s", ref)
	assert.Equal(t, digest, id, "the loaded image's id is its config digest")

	spec := s.spec(t)
	spec.Image = ref
	c := s.run(t, ctx, spec)
	assert.Equal(t, marker, s.readFile(t, ctx, c.Name, derivedFile), "the appended layer's file")
}

// testRemoveImageInUseKeepsContainer: removing the tag of an image a
// running container uses succeeds, the tag is gone from the runtime's own
// list, and the container still exists and runs; removing it again (an
// absent tag) is no error.
func testRemoveImageInUseKeepsContainer(t *testing.T, s *suite) {
	ctx := testContext(t)
	if s.images == nil {
		s.assertNoImageStore(t, ctx)
		return
	}
	ref := s.loadRef()
	archive, _ := s.derived(t, ctx, ref, "in-use")
	s.trackImage(t, ref)
	_, err := s.images.LoadImage(ctx, bytes.NewReader(archive))
	require.NoError(t, err, "load %s", ref)

	id, err := s.images.ImageID(ctx, ref)
	require.NoError(t, err)
	// Untagged in use, the image stays for its container (Docker and
	// Podman keep it dangling): removed by ID once the container is gone
	// (cleanups run last-in first-out, the container's is registered next).
	s.trackImage(t, id)
	spec := s.spec(t)
	spec.Image = ref
	c := s.run(t, ctx, spec)

	require.NoError(t, s.images.RemoveImage(ctx, ref), "remove the image of a running container")
	exists, err := s.images.ImageExists(ctx, ref)
	require.NoError(t, err)
	assert.False(t, exists, "the tag is gone")
	assert.NotContains(t, s.listedImages(t, ctx), ref, "the runtime's own image list")

	got, err := s.rt.Inspect(ctx, c.Name)
	require.NoError(t, err, "the container outlives its image's tag")
	assert.Equal(t, runtime.StateRunning, got.State)
	assert.Equal(t, "in-use", s.readFile(t, ctx, c.Name, derivedFile), "and still runs on its image")
	assert.NoError(t, s.images.RemoveImage(ctx, ref), "removing an absent tag")
}

// testLoadMalformedLeavesNothing: an archive that is not a tar, is cut
// short, or misses a layer its manifest names is ErrInvalid, and the tag
// it names is neither present nor in the runtime's own list.
func testLoadMalformedLeavesNothing(t *testing.T, s *suite) {
	ctx := testContext(t)
	if s.images == nil {
		s.assertNoImageStore(t, ctx)
		return
	}
	ref := s.loadRef()
	archive, _ := s.derived(t, ctx, ref, "malformed")
	s.trackImage(t, ref)
	cases := []struct {
		name    string
		archive []byte
	}{
		{"NotATar", bytes.Repeat([]byte("not a tar archive "), 200)},
		{"Truncated", archive[:len(archive)/2]},
		{"MissingLayer", withoutLastLayer(t, archive)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.images.LoadImage(ctx, bytes.NewReader(tc.archive))
			require.Error(t, err, "load of a malformed archive")
			assert.ErrorIs(t, err, runtime.ErrInvalid)
			var re *runtime.Error
			if assert.ErrorAs(t, err, &re) {
				assert.Equal(t, s.rt.Name(), re.Runtime)
			}
			exists, err := s.images.ImageExists(ctx, ref)
			require.NoError(t, err)
			assert.False(t, exists, "no image under the archive's tag")
			assert.NotContains(t, s.listedImages(t, ctx), ref, "the runtime's own image list")
		})
	}
}

// withoutLastLayer copies a docker-archive without the file of its last
// layer (its manifest still names it).
func withoutLastLayer(t testing.TB, archive []byte) []byte {
	t.Helper()
	var manifest []dockerarchive.Image
	files := map[string][]byte{}
	var order []string
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = body
		order = append(order, h.Name)
	}
	require.NoError(t, json.Unmarshal(files[dockerarchive.ManifestName], &manifest))
	require.Len(t, manifest, 1)
	last := manifest[0].Layers[len(manifest[0].Layers)-1]
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, n := range order {
		if n == last {
			continue
		}
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}))
		_, err := tw.Write(files[n])
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.True(t, slices.Contains(order, last), "the archive held its last layer %s", last)
	return out.Bytes()
}

// assertNoImageStore is the image store semantics on a runtime that has
// none (no runtime.ImageStore, Kubernetes): the fixture still runs,
// pulled at Run.
func (s *suite) assertNoImageStore(t *testing.T, ctx context.Context) {
	t.Helper()
	c := s.run(t, ctx, s.spec(t))
	assert.Equal(t, runtime.StateRunning, c.State, "the fixture runs, pulled at Run")
}
