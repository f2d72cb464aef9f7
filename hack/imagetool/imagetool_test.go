package main

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeRootfs writes a small rootfs tar with the given files.
func writeRootfs(t *testing.T, path string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	tw := tar.NewWriter(f)
	for name, body := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
}

// TestBuildServePush builds a layout, serves a registry with the disk blob
// store, pushes, and reads the image back over the registry protocol.
func TestBuildServePush(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	rootfs := filepath.Join(dir, "rootfs.tar")
	writeRootfs(t, rootfs, map[string]string{"etc/hello": "hello\n"})
	config := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(config, []byte(`{
		"Env": ["PATH=/bin"], "Entrypoint": ["/entry"], "Cmd": ["serve"],
		"ExposedPorts": {"5432/tcp": {}}, "Volumes": {"/data": {}},
		"StopSignal": "SIGINT", "User": "999", "WorkingDir": "/data",
		"Labels": {"a": "b"}}`), 0o644))
	layout := filepath.Join(dir, "layout")
	require.NoError(t, build(ctx, logger, rootfs, config, layout))

	blobs, err := newDiskBlobs(filepath.Join(dir, "blobs"))
	require.NoError(t, err)
	srv := httptest.NewServer(registry.New(registry.WithBlobHandler(blobs), registry.Logger(slog.NewLogLogger(logger.Handler(), slog.LevelInfo))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/sandboxer/test:abc"
	require.NoError(t, push(ctx, logger, layout, ref))

	parsed, err := name.ParseReference(ref, name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(parsed)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "linux", cf.OS)
	assert.Equal(t, "amd64", cf.Architecture)
	assert.Equal(t, v1.Config{
		Env: []string{"PATH=/bin"}, Entrypoint: []string{"/entry"}, Cmd: []string{"serve"},
		ExposedPorts: map[string]struct{}{"5432/tcp": {}}, Volumes: map[string]struct{}{"/data": {}},
		StopSignal: "SIGINT", User: "999", WorkingDir: "/data", Labels: map[string]string{"a": "b"},
	}, cf.Config)
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	require.NoError(t, err)
	assert.Equal(t, "etc/hello", hdr.Name)
	body, err := io.ReadAll(tr)
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(body))

	// The blobs are on disk: a new registry over the same directory has them,
	// so a re-push after a restart uploads only the manifest.
	digest, err := layers[0].Digest()
	require.NoError(t, err)
	size, err := blobs.Stat(ctx, "sandboxer/test", digest)
	require.NoError(t, err)
	compressed, err := layers[0].Size()
	require.NoError(t, err)
	assert.Equal(t, compressed, size)
	_, err = os.Stat(filepath.Join(dir, "blobs", digest.Algorithm, digest.Hex))
	assert.NoError(t, err)
}

func TestBuildRejects(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name    string
		config  string
		prepare func(t *testing.T, layout string)
		want    string
	}{
		{name: "UnknownConfigField", config: `{"Cmd": ["sh"], "Healthcheck": {}}`, want: "unknown field"},
		{name: "TrailingData", config: `{"Cmd": ["sh"]} {}`, want: "trailing data"},
		{
			name:   "NonEmptyLayoutDir",
			config: `{"Cmd": ["sh"]}`,
			prepare: func(t *testing.T, layout string) {
				require.NoError(t, os.MkdirAll(layout, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(layout, "x"), nil, 0o644))
			},
			want: "not empty",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			rootfs := filepath.Join(dir, "rootfs.tar")
			writeRootfs(t, rootfs, map[string]string{"a": "b"})
			config := filepath.Join(dir, "config.json")
			require.NoError(t, os.WriteFile(config, []byte(tt.config), 0o644))
			layout := filepath.Join(dir, "layout")
			if tt.prepare != nil {
				tt.prepare(t, layout)
			}
			err := build(context.Background(), logger, rootfs, config, layout)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestDiskBlobsRejectsDigestMismatch(t *testing.T) {
	blobs, err := newDiskBlobs(t.TempDir())
	require.NoError(t, err)
	srv := httptest.NewServer(registry.New(registry.WithBlobHandler(blobs), registry.Logger(slog.NewLogLogger(slog.New(slog.NewTextHandler(io.Discard, nil)).Handler(), slog.LevelInfo))))
	t.Cleanup(srv.Close)
	wrong := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}
	resp, err := srv.Client().Post(srv.URL+"/v2/x/blobs/uploads/?digest="+wrong.String(), "application/octet-stream", bytes.NewReader([]byte("data")))
	require.NoError(t, err)
	resp.Body.Close()
	assert.GreaterOrEqual(t, resp.StatusCode, 400)
	_, err = blobs.Stat(context.Background(), "x", wrong)
	assert.ErrorIs(t, err, registry.ErrNotFound, "a blob whose digest does not match is never stored")
}

func TestLoopbackRef(t *testing.T) {
	tests := []struct {
		ref  string
		want bool
	}{
		{"127.0.0.1:5055/sandboxer/postgres:abc", true},
		{"localhost:5055/sandboxer/postgres:abc", true},
		{"[::1]:5055/sandboxer/postgres:abc", true},
		{"registry.example.com/sandboxer/postgres:abc", false},
		{"10.0.0.1:5000/x:y", false},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			assert.Equal(t, tt.want, loopbackRef(tt.ref))
		})
	}
}

func TestRunUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "NoCommand", args: nil},
		{name: "UnknownCommand", args: []string{"frobnicate"}},
		{name: "MissingFlag", args: []string{"build", "--rootfs", "x"}},
		{name: "ExtraArgs", args: []string{"push", "--layout", "x", "--ref", "y", "z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), tt.args, io.Discard)
			assert.ErrorIs(t, err, errUsage)
		})
	}
}
