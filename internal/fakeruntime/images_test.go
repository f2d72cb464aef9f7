package fakeruntime_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/dockerarchive"
)

func TestImageStore(t *testing.T) {
	ctx := context.Background()
	f := fakeruntime.New()
	f.AddImage(img, "/data")

	id, err := f.ImageID(ctx, img)
	require.NoError(t, err)
	var saved bytes.Buffer
	require.NoError(t, f.SaveImage(ctx, img, &saved))
	a, err := dockerarchive.Read(bytes.NewReader(saved.Bytes()))
	require.NoError(t, err, "the fake saves a docker-archive")
	assert.Equal(t, id, a.ConfigDigest, "its ID is its config digest")

	var derived bytes.Buffer
	require.NoError(t, dockerarchive.AppendLayer(&derived, a, "localhost/derived:1", map[string]string{"k": "v"}, []dockerarchive.LayerFile{{Name: "/x/y", Body: []byte("z")}}))
	a.Close()
	ref, err := f.LoadImage(ctx, &derived)
	require.NoError(t, err)
	assert.Equal(t, "localhost/derived:1", ref)
	dID, err := f.ImageID(ctx, ref)
	require.NoError(t, err)
	assert.NotEqual(t, id, dID)
	c, err := f.Run(ctx, runtime.RunSpec{Name: "d", Image: ref})
	require.NoError(t, err)
	assert.Len(t, c.Mounts, 1, "the derived image keeps the base's VOLUME")

	_, err = f.LoadImage(ctx, bytes.NewReader([]byte("not a tar")))
	assert.ErrorIs(t, err, runtime.ErrInvalid)

	f.AddImage(img, "/data")
	id2, err := f.ImageID(ctx, img)
	require.NoError(t, err)
	assert.NotEqual(t, id, id2, "other content under the same ref is another image")

	require.NoError(t, f.RemoveImage(ctx, ref))
	require.NoError(t, f.RemoveImage(ctx, ref), "an absent ref")
	_, err = f.ImageID(ctx, ref)
	assert.ErrorIs(t, err, runtime.ErrImageNotFound)
	_, err = f.Inspect(ctx, "d")
	assert.NoError(t, err, "the container outlives its image")
	assert.NotContains(t, f.Images(), ref)
}
