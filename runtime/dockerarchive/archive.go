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
	"os"
	"path"
)

// ManifestName is the file of a docker-archive that lists its
// images.
const ManifestName = "manifest.json"

// maxJSON caps the size of a manifest or config read into memory:
// both are a few kilobytes in any real image.
const maxJSON = 1 << 20

// Image is one entry of a docker-archive's manifest.json: the
// config file, the tags, and the layer files from the base up, each a
// path inside the archive.
type Image struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// Archive is a docker-archive read to its end and checked: exactly one
// image with exactly one tag, whose config and layers are all in the
// archive. It is kept in an unlinked temporary file (nothing to clean up
// on the host if the process dies), so that a backend gets the archive
// only once it is known to be whole. Close releases it.
type Archive struct {
	// Image is the archive's one image.
	Image Image
	// Ref is the image's one tag.
	Ref string
	// ConfigDigest is "sha256:<hex>" of the image's config: its ID.
	ConfigDigest string
	// Config is the image's config, as stored.
	Config []byte

	file *os.File
	size int64
	// files maps each path of the archive to the sha256 of its content
	// ("" for a link).
	files map[string]string
}

// Read reads the docker-archive r to its end into a temporary
// file and checks it (see Archive). An archive that breaks the format is
// an error that says what is wrong; the caller classifies it (ErrInvalid).
func Read(r io.Reader) (*Archive, error) {
	f, err := os.CreateTemp("", "sandboxer-archive-*.tar")
	if err != nil {
		return nil, fmt.Errorf("spool the archive: %w", err)
	}
	// Unlinked at once: the open file is all that holds the space.
	_ = os.Remove(f.Name())
	a := &Archive{file: f, files: map[string]string{}}
	if err := a.read(r); err != nil {
		_ = f.Close()
		return nil, err
	}
	return a, nil
}

// read spools r to a's file, hashing every file of the tar, then checks
// the manifest.
func (a *Archive) read(r io.Reader) error {
	cw := &countWriter{w: a.file}
	tee := io.TeeReader(r, cw)
	tr := tar.NewReader(tee)
	var manifest []byte
	small := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if len(a.files) == 0 {
				return fmt.Errorf("not a tar archive: %w", err)
			}
			return fmt.Errorf("truncated or corrupt tar archive: %w", err)
		}
		name := path.Clean(h.Name)
		switch h.Typeflag {
		case tar.TypeReg:
			sum := sha256.New()
			var buf bytes.Buffer
			dst := io.Writer(sum)
			if h.Size <= maxJSON {
				dst = io.MultiWriter(sum, &buf)
			}
			if _, err := io.Copy(dst, tr); err != nil {
				return fmt.Errorf("truncated tar archive at %s: %w", name, err)
			}
			a.files[name] = "sha256:" + hex.EncodeToString(sum.Sum(nil))
			if h.Size <= maxJSON {
				small[name] = buf.Bytes()
			}
			if name == ManifestName {
				manifest = small[name]
			}
		case tar.TypeSymlink, tar.TypeLink:
			a.files[name] = ""
		}
	}
	// What follows the end-of-archive marker (the tar's padding) is part
	// of the archive as the backend gets it.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return fmt.Errorf("reading the archive: %w", err)
	}
	a.size = cw.n
	if err := a.checkTrailer(); err != nil {
		return err
	}
	if manifest == nil {
		return fmt.Errorf("no %s: not a docker-archive", ManifestName)
	}
	var imgs []Image
	if err := json.Unmarshal(manifest, &imgs); err != nil {
		return fmt.Errorf("%s: %w", ManifestName, err)
	}
	if len(imgs) != 1 {
		return fmt.Errorf("%s lists %d images, want exactly one", ManifestName, len(imgs))
	}
	img := imgs[0]
	if len(img.RepoTags) != 1 {
		return fmt.Errorf("%s: the image has %d tags, want exactly one", ManifestName, len(img.RepoTags))
	}
	for _, p := range append([]string{img.Config}, img.Layers...) {
		if _, ok := a.files[path.Clean(p)]; !ok || p == "" {
			return fmt.Errorf("%s names %q, which the archive does not hold", ManifestName, p)
		}
	}
	a.Image, a.Ref = img, img.RepoTags[0]
	a.ConfigDigest = a.files[path.Clean(img.Config)]
	a.Config = small[path.Clean(img.Config)]
	if a.Config == nil {
		return fmt.Errorf("config %s is larger than %d bytes", img.Config, maxJSON)
	}
	return nil
}

// checkTrailer makes sure the archive ends with tar's end-of-archive
// marker (two zero blocks): Go's tar reader takes an archive cut short at
// a header's boundary for a whole one.
func (a *Archive) checkTrailer() error {
	const marker = 2 * 512
	if a.size < marker || a.size%512 != 0 {
		return fmt.Errorf("truncated tar archive: %d bytes is no whole number of blocks", a.size)
	}
	tail := make([]byte, marker)
	if _, err := a.file.ReadAt(tail, a.size-marker); err != nil {
		return fmt.Errorf("reading the archive: %w", err)
	}
	if !bytes.Equal(tail, make([]byte, marker)) {
		return errors.New("truncated tar archive: no end-of-archive marker")
	}
	return nil
}

// Reader returns the whole archive from its start (each call starts
// again).
func (a *Archive) Reader() io.Reader { return io.NewSectionReader(a.file, 0, a.size) }

// Size is the archive's length in bytes.
func (a *Archive) Size() int64 { return a.size }

// Digest is "sha256:<hex>" of the file at p inside the archive, and
// whether the archive holds it.
func (a *Archive) Digest(p string) (string, bool) {
	d, ok := a.files[path.Clean(p)]
	return d, ok
}

// Close releases the temporary file.
func (a *Archive) Close() error { return a.file.Close() }

// countWriter counts what it passes on.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
