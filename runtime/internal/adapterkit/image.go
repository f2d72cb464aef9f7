package adapterkit

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/dockerarchive"
)

const (
	// ImageTransferTimeout bounds SaveImage and LoadImage, which move a
	// whole image (hundreds of megabytes at worst) through the backend.
	ImageTransferTimeout = 10 * time.Minute
	// ImageCallTimeout bounds ImageID and RemoveImage: one question, or
	// one removal, of the image store.
	ImageCallTimeout = time.Minute
)

// ImageContext bounds an image verb op: by ImageTransferTimeout for the
// verbs that move an image, else by ImageCallTimeout (an earlier deadline
// of ctx stays).
func ImageContext(ctx context.Context, op string) (context.Context, context.CancelFunc) {
	d := ImageCallTimeout
	if op == runtime.OpSaveImage || op == runtime.OpLoadImage {
		d = ImageTransferTimeout
	}
	return context.WithTimeout(ctx, d)
}

// ReadsImage reports whether verb op is about an image that must exist
// (ImageID, ImageConfig, SaveImage), so that "not found" from the backend
// is runtime.ErrImageNotFound rather than runtime.ErrNotFound.
func ReadsImage(op string) bool {
	return op == runtime.OpImageID || op == runtime.OpImageConfig || op == runtime.OpSaveImage
}

// SpoolArchive reads and checks the docker-archive r
// (dockerarchive.Read) before any of it reaches the backend, so that a
// malformed archive is runtime.ErrInvalid and the backend never sees it
// (and so can keep nothing of it).
func SpoolArchive(r io.Reader) (*dockerarchive.Archive, error) {
	a, err := dockerarchive.Read(r)
	if err != nil {
		return nil, WithKind(runtime.ErrInvalid, "%w", err)
	}
	return a, nil
}

// ImageID writes a backend's image ID as the port reports it:
// "sha256:<hex>" (Podman leaves the algorithm out).
func ImageID(id string) string {
	if id == "" || strings.Contains(id, ":") {
		return id
	}
	return "sha256:" + id
}
