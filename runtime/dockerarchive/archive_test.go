package dockerarchive_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime/dockerarchive"
)

// archiveOf writes a tar of files, in order.
func archiveOf(t *testing.T, files ...[2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(f[1]))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	return b.Bytes()
}

// manifestOf is a manifest.json of one image per entry.
func manifestOf(t *testing.T, imgs ...dockerarchive.Image) [2]string {
	t.Helper()
	b, err := json.Marshal(imgs)
	require.NoError(t, err)
	return [2]string{dockerarchive.ManifestName, string(b)}
}

func TestReadArchive(t *testing.T) {
	one := dockerarchive.Image{Config: "c.json", RepoTags: []string{"localhost/x:1"}, Layers: []string{"l/layer.tar"}}
	good := archiveOf(t, [2]string{"c.json", `{"a":1}`}, [2]string{"l/layer.tar", "layer"}, manifestOf(t, one))
	t.Run("Whole", func(t *testing.T) {
		a, err := dockerarchive.Read(bytes.NewReader(good))
		require.NoError(t, err)
		defer a.Close()
		sum := sha256.Sum256([]byte(`{"a":1}`))
		assert.Equal(t, "localhost/x:1", a.Ref)
		assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), a.ConfigDigest)
		assert.Equal(t, `{"a":1}`, string(a.Config))
		back, err := io.ReadAll(a.Reader())
		require.NoError(t, err)
		assert.Equal(t, good, back, "the spooled archive is the archive, byte for byte")
	})
	two := one
	two.RepoTags = []string{"a:1", "b:1"}
	cases := []struct {
		name    string
		archive []byte
		want    string
	}{
		{"NotATar", bytes.Repeat([]byte("x"), 2048), "not a tar"},
		{"Truncated", good[:len(good)/2], "truncated"},
		{"NoManifest", archiveOf(t, [2]string{"c.json", "{}"}), "no manifest.json"},
		{"MissingLayer", archiveOf(t, [2]string{"c.json", "{}"}, manifestOf(t, one)), `"l/layer.tar"`},
		{"MissingConfig", archiveOf(t, [2]string{"l/layer.tar", ""}, manifestOf(t, one)), `"c.json"`},
		{"TwoImages", archiveOf(t, [2]string{"c.json", "{}"}, [2]string{"l/layer.tar", ""}, manifestOf(t, one, one)), "2 images"},
		{"TwoTags", archiveOf(t, [2]string{"c.json", "{}"}, [2]string{"l/layer.tar", ""}, manifestOf(t, two)), "2 tags"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dockerarchive.Read(bytes.NewReader(tc.archive))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestAppendLayer(t *testing.T) {
	one := dockerarchive.Image{Config: "c.json", RepoTags: []string{"localhost/x:1"}, Layers: []string{"l/layer.tar"}}
	config := `{"rootfs":{"type":"layers","diff_ids":["sha256:aa"]},"config":{"Env":["A=1"]},"unknown":7}`
	base, err := dockerarchive.Read(bytes.NewReader(archiveOf(t, [2]string{"c.json", config}, [2]string{"l/layer.tar", "base layer"}, manifestOf(t, one))))
	require.NoError(t, err)
	defer base.Close()

	var out bytes.Buffer
	require.NoError(t, dockerarchive.AppendLayer(&out, base, "localhost/y:2", map[string]string{"k": "v"},
		[]dockerarchive.LayerFile{{Name: "/d/f.tar", Body: []byte("data")}}))
	got, err := dockerarchive.Read(&out)
	require.NoError(t, err, "the result is a docker-archive")
	defer got.Close()
	assert.Equal(t, "localhost/y:2", got.Ref)
	require.Len(t, got.Image.Layers, 2)
	assert.Equal(t, "l/layer.tar", got.Image.Layers[0], "the base layer is kept as it is")
	baseDigest, _ := base.Digest("l/layer.tar")
	keptDigest, _ := got.Digest("l/layer.tar")
	assert.Equal(t, baseDigest, keptDigest, "byte for byte")
	newDigest, ok := got.Digest(got.Image.Layers[1])
	require.True(t, ok)

	var cfg struct {
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
		Config struct {
			Env    []string          `json:"Env"`
			Labels map[string]string `json:"Labels"`
		} `json:"config"`
		Unknown int `json:"unknown"`
	}
	require.NoError(t, json.Unmarshal(got.Config, &cfg))
	assert.Equal(t, []string{"sha256:aa", newDigest}, cfg.RootFS.DiffIDs, "the new layer is uncompressed: its digest is its diff ID")
	assert.Equal(t, []string{"A=1"}, cfg.Config.Env)
	assert.Equal(t, map[string]string{"k": "v"}, cfg.Config.Labels)
	assert.Equal(t, 7, cfg.Unknown, "fields it does not know are kept")
	assert.NotEqual(t, base.ConfigDigest, got.ConfigDigest)
}
