package fakeruntime

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/dockerarchive"
)

// fakeConfig is the part of an image config the fake writes and reads.
type fakeConfig struct {
	Config struct {
		Env     []string            `json:"Env,omitempty"`
		Volumes map[string]struct{} `json:"Volumes,omitempty"`
		Labels  map[string]string   `json:"Labels,omitempty"`
	} `json:"config"`
	// Nonce makes two AddImage calls of one ref two images.
	Nonce  string `json:"sandboxer_fake_nonce,omitempty"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// archive is ref's docker-archive, made on first use for an image that
// AddImage or a pull put there (an empty layer and a config naming its
// volumes). f.mu must be held.
func (f *Runtime) archive(ref string) ([]byte, error) {
	if a, ok := f.archives[ref]; ok {
		return a, nil
	}
	var layer bytes.Buffer
	if err := tar.NewWriter(&layer).Close(); err != nil {
		return nil, err
	}
	var cfg fakeConfig
	cfg.Nonce = randomID()
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{digestOf(layer.Bytes())}
	cfg.Config.Env = f.imageEnv[ref]
	if vols := f.images[ref]; len(vols) > 0 {
		cfg.Config.Volumes = map[string]struct{}{}
		for _, v := range vols {
			cfg.Config.Volumes[v] = struct{}{}
		}
	}
	config, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal([]dockerarchive.Image{{Config: "config.json", RepoTags: []string{ref}, Layers: []string{"layer.tar"}}})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, file := range []struct {
		name string
		body []byte
	}{{"config.json", config}, {"layer.tar", layer.Bytes()}, {dockerarchive.ManifestName, manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: file.name, Mode: 0o644, Size: int64(len(file.body)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(file.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	f.archives[ref] = out.Bytes()
	return out.Bytes(), nil
}

// present returns ref's archive, or ErrImageNotFound. f.mu must be held.
func (f *Runtime) present(verb, ref string) ([]byte, error) {
	if _, ok := f.images[ref]; !ok {
		return nil, f.err(verb, ref, runtime.ErrImageNotFound, nil)
	}
	a, err := f.archive(ref)
	if err != nil {
		return nil, f.err(verb, ref, nil, err)
	}
	return a, nil
}

// ImageID is the digest of the config in ref's archive.
func (f *Runtime) ImageID(ctx context.Context, ref string) (string, error) {
	end, err := f.begin(ctx, Call{Verb: VerbImageID, Object: ref})
	if err != nil {
		return "", err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := f.present(VerbImageID, ref)
	if err != nil {
		return "", err
	}
	a, err := dockerarchive.Read(bytes.NewReader(data))
	if err != nil {
		return "", f.err(VerbImageID, ref, nil, err)
	}
	defer a.Close()
	return a.ConfigDigest, nil
}

// ImageConfig is the Env and VOLUMEs of the config in ref's archive.
func (f *Runtime) ImageConfig(ctx context.Context, ref string) (runtime.ImageConfig, error) {
	end, err := f.begin(ctx, Call{Verb: VerbImageConfig, Object: ref})
	if err != nil {
		return runtime.ImageConfig{}, err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := f.present(VerbImageConfig, ref)
	if err != nil {
		return runtime.ImageConfig{}, err
	}
	a, err := dockerarchive.Read(bytes.NewReader(data))
	if err != nil {
		return runtime.ImageConfig{}, f.err(VerbImageConfig, ref, nil, err)
	}
	defer a.Close()
	var cfg fakeConfig
	if err := json.Unmarshal(a.Config, &cfg); err != nil {
		return runtime.ImageConfig{}, f.err(VerbImageConfig, ref, nil, err)
	}
	return runtime.NewImageConfig(cfg.Config.Env, cfg.Config.Volumes), nil
}

// SaveImage writes ref's archive to w.
func (f *Runtime) SaveImage(ctx context.Context, ref string, w io.Writer) error {
	end, err := f.begin(ctx, Call{Verb: VerbSaveImage, Object: ref})
	if err != nil {
		return err
	}
	defer end()
	f.mu.Lock()
	data, err := f.present(VerbSaveImage, ref)
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return f.err(VerbSaveImage, ref, nil, err)
	}
	return nil
}

// LoadImage checks the archive as the adapters do (dockerarchive.Read:
// ErrInvalid, nothing stored) and makes its image present under its tag,
// with the VOLUME paths of its config.
func (f *Runtime) LoadImage(ctx context.Context, r io.Reader) (string, error) {
	end, err := f.begin(ctx, Call{Verb: VerbLoadImage})
	if err != nil {
		return "", err
	}
	defer end()
	a, err := dockerarchive.Read(r)
	if err != nil {
		return "", f.err(VerbLoadImage, "", runtime.ErrInvalid, err)
	}
	defer a.Close()
	var cfg fakeConfig
	if err := json.Unmarshal(a.Config, &cfg); err != nil {
		return "", f.err(VerbLoadImage, a.Ref, runtime.ErrInvalid, fmt.Errorf("config: %w", err))
	}
	data, err := io.ReadAll(a.Reader())
	if err != nil {
		return "", f.err(VerbLoadImage, a.Ref, nil, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[a.Ref] = slices.Sorted(maps.Keys(cfg.Config.Volumes))
	f.archives[a.Ref] = data
	return a.Ref, nil
}

// RemoveImage forgets ref; containers that run it are untouched.
func (f *Runtime) RemoveImage(ctx context.Context, ref string) error {
	end, err := f.begin(ctx, Call{Verb: VerbRemoveImage, Object: ref})
	if err != nil {
		return err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.images, ref)
	delete(f.archives, ref)
	return nil
}

// Images lists the refs present, sorted.
func (f *Runtime) Images() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.images))
}

// digestOf is "sha256:<hex>" of b.
func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
