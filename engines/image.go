package engines

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/roboco/sandboxer/runtime"
)

// Image is what an engine knows of the image a sandbox runs: where the
// image keeps its data, in its own words (its config's Env and VOLUMEs),
// so that Container mounts its tmpfs where the image's entrypoint looks
// (postgres:18 keeps PGDATA and its VOLUME elsewhere than postgres:17).
//
// The zero Image is an image whose config could not be read: a runtime
// without an image store (Kubernetes, where the kubelet pulls at Run).
// Then an engine lays the sandbox out so that every image shape it knows
// accepts it (postgres sets PGDATA itself), and covers the default
// image's VOLUMEs (Spec.Tmpfs); a VOLUME elsewhere is, on such a runtime,
// a directory of the container's own filesystem, not a volume.
type Image struct {
	// Config is the image's config as the runtime read it.
	Config runtime.ImageConfig
	// Known reports whether Config was read.
	Known bool
}

// ErrImageLayout: an image lays its data out in a way no sandbox can be
// made of within its bounds (it declares more VOLUMEs than MaxVolumes).
// Nothing has been run when it is returned; the CLI exits 4.
var ErrImageLayout = errors.New("image layout not supported")

// MaxVolumes bounds how many VOLUMEs an image may declare: each gets a
// bounded tmpfs of its own (a VOLUME without one would be an anonymous
// volume on the host's disk, outside every bound), each costs a share of
// the budget, and an image declaring more is not one an engine was
// written for.
const MaxVolumes = 16

// ImageOf is the Image of ref, from the config the runtime read. An image
// that declares more than MaxVolumes VOLUMEs is refused (ErrImageLayout):
// dropping the extra ones would leave them on the host's disk, unbounded.
func ImageOf(ref string, cfg runtime.ImageConfig) (Image, error) {
	if n := len(cfg.Volumes); n > MaxVolumes {
		return Image{}, fmt.Errorf("image %q declares %d VOLUMEs, more than the %d a sandbox gives a bounded tmpfs: %w",
			ref, n, MaxVolumes, ErrImageLayout)
	}
	return Image{Config: cfg, Known: true}, nil
}

// Path is the image's value of the env variable key as a clean path, or
// def when the image does not set it (or is not known).
func (img Image) Path(key, def string) string {
	if v, ok := img.Config.Getenv(key); ok && v != "" {
		return path.Clean(v)
	}
	return def
}

// Volumes are the image's VOLUMEs (at most MaxVolumes, ImageOf saw to
// it; in path order), or defaults when the image is not known.
func (img Image) Volumes(defaults []string) []string {
	if !img.Known {
		return slices.Clone(defaults)
	}
	return slices.Clone(img.Config.Volumes)
}

// VolumeHolding is the volume of vols that p is on (the longest that is p
// or a parent of p), or "" when p is on none.
func VolumeHolding(vols []string, p string) string {
	best := ""
	for _, v := range vols {
		if (p == v || strings.HasPrefix(p, strings.TrimSuffix(v, "/")+"/")) && len(v) > len(best) {
			best = v
		}
	}
	return best
}

// CoverVolumes gives every volume of vols that c has no tmpfs for one of
// its own, of size each (0: the runtime's default), so that nothing of the
// image's reaches the host disk and no anonymous volume is left.
func (c *Container) CoverVolumes(vols []string, size int64) {
	for _, v := range vols {
		if _, ok := c.Tmpfs[v]; !ok {
			c.Tmpfs[v] = TmpfsSize(size)
		}
	}
}
