package dockerarchive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"time"
)

// LayerFile is one file of a layer that AppendLayer adds.
type LayerFile struct {
	// Name is the file's absolute path inside the image.
	Name string
	Body []byte
}

// AppendLayer writes to w the docker-archive of base (as Read read
// it) with one more layer holding files, tagged ref, with labels added to
// its config. The base's files are copied as they are (no layer is
// decompressed or compressed again: go-containerregistry's tarball.Write
// would gzip every layer, seconds for a database image); the new layer is
// an uncompressed tar, so its digest is its diff ID.
func AppendLayer(w io.Writer, base *Archive, ref string, labels map[string]string, files []LayerFile) error {
	layer, err := tarOf(files)
	if err != nil {
		return err
	}
	diffID := digestOf(layer)
	config, err := derivedConfig(base.Config, diffID, labels)
	if err != nil {
		return err
	}
	configName := hexOf(config) + ".json"
	layerName := hexOf(layer) + "/layer.tar"
	manifest, err := json.Marshal([]Image{{
		Config:   configName,
		RepoTags: []string{ref},
		Layers:   append(append([]string(nil), base.Image.Layers...), layerName),
	}})
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	keep := map[string]bool{}
	for _, l := range base.Image.Layers {
		keep[path.Clean(l)] = true
	}
	if err := copyLayers(tw, base.Reader(), keep); err != nil {
		return err
	}
	for _, f := range []LayerFile{{configName, config}, {layerName, layer}, {ManifestName, manifest}} {
		if err := writeFile(tw, f.Name, f.Body); err != nil {
			return err
		}
	}
	return tw.Close()
}

// copyLayers copies from the archive r the entries that keep names (the
// base's layers), headers and bodies as they are, and the links among
// them. Its manifest, config, index and anything else are left out.
func copyLayers(tw *tar.Writer, r io.Reader, keep map[string]bool) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("re-reading the base archive: %w", err)
		}
		if !keep[path.Clean(h.Name)] {
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return fmt.Errorf("copying %s: %w", h.Name, err)
		}
	}
}

// derivedConfig is the base config with diffID appended to its rootfs, a
// history entry for it, and labels added to its container config. Fields
// it does not know are kept.
func derivedConfig(base []byte, diffID string, labels map[string]string) ([]byte, error) {
	var cfg map[string]any
	if err := json.Unmarshal(base, &cfg); err != nil {
		return nil, fmt.Errorf("base config: %w", err)
	}
	rootfs, _ := cfg["rootfs"].(map[string]any)
	if rootfs == nil {
		return nil, errors.New("base config has no rootfs")
	}
	ids, _ := rootfs["diff_ids"].([]any)
	rootfs["diff_ids"] = append(ids, diffID)
	history, _ := cfg["history"].([]any)
	cfg["history"] = append(history, map[string]any{
		"created":    time.Now().UTC().Format(time.RFC3339Nano),
		"created_by": "sandboxer warm template",
	})
	cc, _ := cfg["config"].(map[string]any)
	if cc == nil {
		cc = map[string]any{}
		cfg["config"] = cc
	}
	lbls, _ := cc["Labels"].(map[string]any)
	if lbls == nil {
		lbls = map[string]any{}
	}
	for k, v := range labels {
		lbls[k] = v
	}
	cc["Labels"] = lbls
	// A v1 id of the base (legacy `docker save`) names the base, not this.
	delete(cfg, "id")
	delete(cfg, "parent")
	return json.Marshal(cfg)
}

// tarOf is an uncompressed tar of files, with their directories, owned by
// root and readable by root only (the warm entrypoint runs as root).
func tarOf(files []LayerFile) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	dirs := map[string]bool{}
	for _, f := range files {
		name := path.Clean(f.Name)[1:]
		if dir := path.Dir(name); dir != "." && !dirs[dir] {
			dirs[dir] = true
			if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o700}); err != nil {
				return nil, err
			}
		}
		if err := writeFile(tw, name, f.Body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeFile writes one regular file to tw.
func writeFile(tw *tar.Writer, name string, body []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(body))}); err != nil {
		return err
	}
	_, err := tw.Write(body)
	return err
}

// hexOf is the sha256 of b in hex.
func hexOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// digestOf is "sha256:<hex>" of b.
func digestOf(b []byte) string { return "sha256:" + hexOf(b) }
