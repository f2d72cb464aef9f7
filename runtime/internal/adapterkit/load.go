package adapterkit

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/roboco/sandboxer/runtime"
)

// ArchiveLoader is the LoadImage of a backend whose API loads a
// docker-archive and names the image by the archive's tag (Docker's and
// libpod's image stores); the adapter supplies the four calls that are its
// backend's own.
type ArchiveLoader struct {
	// Runtime names the adapter in its log lines.
	Runtime string
	// Log is where a failed clean-up is reported.
	Log *slog.Logger
	// Wrap is the adapter's translation point (its r.wrap).
	Wrap func(op, object string, err error) error
	// Ready makes sure the backend answers (the adapter's first ping);
	// its error, already translated, is returned as it is.
	Ready func(ctx context.Context, op, ref string) error
	// Load sends the archive of image ref and reads the backend's answer
	// to its end.
	Load func(ctx context.Context, archive io.Reader, ref string) error
	// ImageID is the backend's ID of ref's image, as the backend says it.
	ImageID func(ctx context.Context, ref string) (string, error)
	// RemoveImage is the adapter's RemoveImage (absent is no error).
	RemoveImage func(ctx context.Context, ref string) error
}

// LoadImage checks the archive rd whole (SpoolArchive), loads it through
// the backend and makes sure the tag names the archive's image. A load
// that fails after the backend took the archive removes the tag, best
// effort and bounded (the caller's context may be what failed), so that no
// half-loaded image is left under it. It returns the archive's tag.
func (l ArchiveLoader) LoadImage(ctx context.Context, rd io.Reader) (string, error) {
	const op = runtime.OpLoadImage
	ctx, cancel := ImageContext(ctx, op)
	defer cancel()
	a, err := SpoolArchive(rd)
	if err != nil {
		return "", l.Wrap(op, "", err)
	}
	defer a.Close()
	if err := l.Ready(ctx, op, a.Ref); err != nil {
		return "", err
	}
	if err := l.load(ctx, a.Reader(), a.Ref, a.ConfigDigest); err != nil {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
		defer ccancel()
		if rerr := l.RemoveImage(cctx, a.Ref); rerr != nil {
			l.Log.Warn(l.Runtime+": could not remove the image of a failed load", "image", a.Ref, "err", rerr)
		}
		return "", l.Wrap(op, a.Ref, err)
	}
	return a.Ref, nil
}

// load sends the archive, then checks that ref names its config.
func (l ArchiveLoader) load(ctx context.Context, archive io.Reader, ref, config string) error {
	if err := l.Load(ctx, archive, ref); err != nil {
		return err
	}
	id, err := l.ImageID(ctx, ref)
	if err != nil {
		return fmt.Errorf("the loaded image is not found under its tag: %w", err)
	}
	if id = ImageID(id); id != config {
		return fmt.Errorf("the tag names image %s, not the archive's %s", id, config)
	}
	return nil
}
