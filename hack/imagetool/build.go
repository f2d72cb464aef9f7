package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageConfig is the subset of an OCI/Docker image config that a stand-in
// script may set in its config.json. Unknown fields are rejected, so a typo
// fails the build instead of silently producing an image without it.
type imageConfig struct {
	Env          []string            `json:"Env,omitempty"`
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Volumes      map[string]struct{} `json:"Volumes,omitempty"`
	StopSignal   string              `json:"StopSignal,omitempty"`
	User         string              `json:"User,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
}

// readConfig decodes a config.json strictly.
func readConfig(path string) (imageConfig, error) {
	var c imageConfig
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("parse config %s: %w", path, err)
	}
	if dec.More() {
		return c, fmt.Errorf("parse config %s: trailing data after the JSON object", path)
	}
	return c, nil
}

// v1Config is the image config that the runtime reads.
func (c imageConfig) v1Config() v1.Config {
	return v1.Config{
		Env:          c.Env,
		Entrypoint:   c.Entrypoint,
		Cmd:          c.Cmd,
		ExposedPorts: c.ExposedPorts,
		Volumes:      c.Volumes,
		StopSignal:   c.StopSignal,
		User:         c.User,
		WorkingDir:   c.WorkingDir,
		Labels:       c.Labels,
	}
}

// buildTime is SOURCE_DATE_EPOCH when set (reproducible builds), else now.
func buildTime() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Now().UTC().Truncate(time.Second), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// build writes a linux/amd64 OCI image layout at dir whose only layer is
// the gzipped rootfs tar and whose config comes from configPath.
func build(ctx context.Context, logger *slog.Logger, rootfs, configPath, dir string) error {
	start := time.Now()
	cfg, err := readConfig(configPath)
	if err != nil {
		return fmt.Errorf("build %s: %w", dir, err)
	}
	created, err := buildTime()
	if err != nil {
		return fmt.Errorf("build %s: %w", dir, err)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("build %s: layout directory is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("build %s: %w", dir, err)
	}

	// Compress once to a file beside the layout: the layer's digest, diff
	// id and the layout's blob are then all read from it, never re-gzipped.
	gz, err := gzipFile(ctx, rootfs, filepath.Join(filepath.Dir(filepath.Clean(dir)), "."+filepath.Base(dir)+".layer.tar.gz"))
	if err != nil {
		return fmt.Errorf("build %s: %w", dir, err)
	}
	defer os.Remove(gz)
	layer, err := tarball.LayerFromFile(gz, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return fmt.Errorf("build %s: layer from %s: %w", dir, rootfs, err)
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "sandboxer imagetool build --rootfs " + filepath.Base(rootfs),
			Comment:   "sandboxer offline stand-in",
		},
	})
	if err != nil {
		return fmt.Errorf("build %s: append layer: %w", dir, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("build %s: config file: %w", dir, err)
	}
	cf = cf.DeepCopy()
	cf.Architecture = "amd64"
	cf.OS = "linux"
	cf.Created = v1.Time{Time: created}
	cf.Config = cfg.v1Config()
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return fmt.Errorf("build %s: set config: %w", dir, err)
	}

	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("build %s: write layout: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"})); err != nil {
		return fmt.Errorf("build %s: write image: %w", dir, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("build %s: digest: %w", dir, err)
	}
	size, err := layer.Size()
	if err != nil {
		return fmt.Errorf("build %s: layer size: %w", dir, err)
	}
	logger.Info("built image layout", "layout", dir, "digest", digest.String(),
		"layer_bytes", size, "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// gzipFile compresses src into dst (overwritten) and returns dst.
func gzipFile(ctx context.Context, src, dst string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("open rootfs: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return "", fmt.Errorf("create layer: %w", err)
	}
	zw, err := gzip.NewWriterLevel(out, gzip.DefaultCompression)
	if err != nil {
		out.Close()
		return "", fmt.Errorf("gzip: %w", err)
	}
	_, err = io.Copy(zw, ctxReader{ctx, in})
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return "", fmt.Errorf("gzip %s: %w", src, err)
	}
	return dst, nil
}

// ctxReader stops a long copy when ctx is cancelled (Ctrl-C during a build).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
