package docker

import (
	"context"
	"fmt"
	"io"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/roboco/sandboxer/runtime"
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
	id, err := r.imageID(ctx, ref)
	if err != nil {
		return "", r.wrap(op, ref, err)
	}
	return adapterkit.ImageID(id), nil
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

// LoadImage loads a docker-archive through the daemon
// (adapterkit.ArchiveLoader: checked whole first, the tag checked after, a
// failed load's tag removed).
func (r *Runtime) LoadImage(ctx context.Context, rd io.Reader) (string, error) {
	return adapterkit.ArchiveLoader{
		Runtime:     Name,
		Log:         r.log,
		Wrap:        r.wrap,
		Ready:       r.negotiate,
		Load:        r.load,
		ImageID:     r.imageID,
		RemoveImage: r.RemoveImage,
	}.LoadImage(ctx, rd)
}

// load sends the archive and reads the daemon's answer to its end (a load
// that fails half-way says so inside the stream).
func (r *Runtime) load(ctx context.Context, archive io.Reader, ref string) error {
	resp, err := r.cli.ImageLoad(ctx, archive, client.ImageLoadWithQuiet(true))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodePull(ref, resp.Body, nil)
}

// imageID is the daemon's ID of ref's image, unwrapped.
func (r *Runtime) imageID(ctx context.Context, ref string) (string, error) {
	inspect, err := r.cli.ImageInspect(ctx, ref)
	return inspect.ID, err
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
