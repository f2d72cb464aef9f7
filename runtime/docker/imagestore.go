package docker

import (
	"context"
	"fmt"
	"io"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/dockerarchive"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// ImageID is the daemon's ID of ref's image, which is its config digest.
func (r *Runtime) ImageID(ctx context.Context, ref string) (string, error) {
	const op = runtime.OpImageID
	ctx, cancel := adapterkit.ImageContext(ctx, op)
	defer cancel()
	if err := r.negotiate(ctx, op, ref); err != nil {
		return "", err
	}
	inspect, err := r.cli.ImageInspect(ctx, ref)
	if err != nil {
		return "", r.wrap(op, ref, err)
	}
	return adapterkit.ImageID(inspect.ID), nil
}

// ImageConfig reads ref's Env and VOLUMEs from the daemon's image inspect.
func (r *Runtime) ImageConfig(ctx context.Context, ref string) (runtime.ImageConfig, error) {
	const op = runtime.OpImageConfig
	ctx, cancel := adapterkit.ImageContext(ctx, op)
	defer cancel()
	if err := r.negotiate(ctx, op, ref); err != nil {
		return runtime.ImageConfig{}, err
	}
	inspect, err := r.cli.ImageInspect(ctx, ref)
	if err != nil {
		return runtime.ImageConfig{}, r.wrap(op, ref, err)
	}
	if inspect.Config == nil {
		return runtime.ImageConfig{}, nil
	}
	return runtime.NewImageConfig(inspect.Config.Env, inspect.Config.Volumes), nil
}

// SaveImage streams `docker save ref` to w.
func (r *Runtime) SaveImage(ctx context.Context, ref string, w io.Writer) error {
	const op = runtime.OpSaveImage
	ctx, cancel := adapterkit.ImageContext(ctx, op)
	defer cancel()
	if err := r.negotiate(ctx, op, ref); err != nil {
		return err
	}
	// The save endpoint answers 200 and an empty archive for an absent
	// image on some daemons: ask first.
	if _, err := r.cli.ImageInspect(ctx, ref); err != nil {
		return r.wrap(op, ref, err)
	}
	rc, err := r.cli.ImageSave(ctx, []string{ref})
	if err != nil {
		return r.wrap(op, ref, err)
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		return r.wrap(op, ref, fmt.Errorf("streaming the archive: %w", err))
	}
	return nil
}

// LoadImage checks the archive whole (adapterkit.SpoolArchive), loads it
// through the daemon and makes sure the tag names the archive's image. A
// load that fails after the daemon took the archive removes the tag, so
// that no half-loaded image is left under it.
func (r *Runtime) LoadImage(ctx context.Context, rd io.Reader) (string, error) {
	const op = runtime.OpLoadImage
	ctx, cancel := adapterkit.ImageContext(ctx, op)
	defer cancel()
	a, err := adapterkit.SpoolArchive(rd)
	if err != nil {
		return "", r.wrap(op, "", err)
	}
	defer a.Close()
	if err := r.negotiate(ctx, op, a.Ref); err != nil {
		return "", err
	}
	if err := r.load(ctx, a); err != nil {
		r.discardImage(ctx, a.Ref)
		return "", r.wrap(op, a.Ref, err)
	}
	return a.Ref, nil
}

// load sends the archive and reads the daemon's answer to its end (a load
// that fails half-way says so inside the stream), then checks that the tag
// names the archive's config.
func (r *Runtime) load(ctx context.Context, a *dockerarchive.Archive) error {
	resp, err := r.cli.ImageLoad(ctx, a.Reader(), client.ImageLoadWithQuiet(true))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := decodePull(a.Ref, resp.Body, nil); err != nil {
		return err
	}
	inspect, err := r.cli.ImageInspect(ctx, a.Ref)
	if err != nil {
		return fmt.Errorf("the loaded image is not found under its tag: %w", err)
	}
	if id := adapterkit.ImageID(inspect.ID); id != a.ConfigDigest {
		return fmt.Errorf("the tag names image %s, not the archive's %s", id, a.ConfigDigest)
	}
	return nil
}

// discardImage removes ref after a failed load, best effort and bounded
// (the caller's context may be what failed).
func (r *Runtime) discardImage(ctx context.Context, ref string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), adapterkit.CleanupTimeout)
	defer cancel()
	if err := r.RemoveImage(cctx, ref); err != nil {
		r.log.Warn("docker: could not remove the image of a failed load", "image", ref, "err", err)
	}
}

// RemoveImage removes the tag ref. Forced, because the daemon otherwise
// refuses to untag an image a container uses; forced removal by tag only
// untags such an image, and leaves the container and what it runs on.
func (r *Runtime) RemoveImage(ctx context.Context, ref string) error {
	const op = runtime.OpRemoveImage
	ctx, cancel := adapterkit.ImageContext(ctx, op)
	defer cancel()
	if err := r.negotiate(ctx, op, ref); err != nil {
		return err
	}
	if _, err := r.cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		return r.wrap(op, ref, err)
	}
	return nil
}
