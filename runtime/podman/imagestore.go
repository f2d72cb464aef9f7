package podman

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/dockerarchive"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// ImageID is the service's ID of ref's image, which is its config digest.
func (r *Runtime) ImageID(ctx context.Context, ref string) (string, error) {
	const op = runtime.OpImageID
	ctx, cancel := adapterkit.ImageContext(ctx, op)
	defer cancel()
	c, err := r.connect(ctx, op, ref)
	if err != nil {
		return "", err
	}
	img, err := c.imageInspect(ctx, ref)
	if err != nil {
		return "", r.wrap(op, ref, err)
	}
	return adapterkit.ImageID(img.ID), nil
}

// ImageConfig reads ref's Env and VOLUMEs from libpod's image inspect.
func (r *Runtime) ImageConfig(ctx context.Context, ref string) (runtime.ImageConfig, error) {
	const op = runtime.OpImageConfig
	ctx, cancel := adapterkit.ImageContext(ctx, op)
	defer cancel()
	c, err := r.connect(ctx, op, ref)
	if err != nil {
		return runtime.ImageConfig{}, err
	}
	img, err := c.imageInspect(ctx, ref)
	if err != nil {
		return runtime.ImageConfig{}, r.wrap(op, ref, err)
	}
	return runtime.NewImageConfig(img.Config.Env, img.Config.Volumes), nil
}

// SaveImage streams ref as an uncompressed docker-archive to w.
func (r *Runtime) SaveImage(ctx context.Context, ref string, w io.Writer) error {
	const op = runtime.OpSaveImage
	ctx, cancel := adapterkit.ImageContext(ctx, op)
	defer cancel()
	c, err := r.connect(ctx, op, ref)
	if err != nil {
		return err
	}
	rc, err := c.saveImage(ctx, ref)
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
// through the service and makes sure the tag names the archive's image; a
// load that fails after the service took the archive removes the tag.
func (r *Runtime) LoadImage(ctx context.Context, rd io.Reader) (string, error) {
	const op = runtime.OpLoadImage
	ctx, cancel := adapterkit.ImageContext(ctx, op)
	defer cancel()
	a, err := adapterkit.SpoolArchive(rd)
	if err != nil {
		return "", r.wrap(op, "", err)
	}
	defer a.Close()
	c, err := r.connect(ctx, op, a.Ref)
	if err != nil {
		return "", err
	}
	if err := r.load(ctx, c, a); err != nil {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), adapterkit.CleanupTimeout)
		defer ccancel()
		if rerr := r.RemoveImage(cctx, a.Ref); rerr != nil {
			r.opts.Logger.Warn("podman: could not remove the image of a failed load", "image", a.Ref, "err", rerr)
		}
		return "", r.wrap(op, a.Ref, err)
	}
	return a.Ref, nil
}

// load sends the archive, then checks that the tag names its config.
func (r *Runtime) load(ctx context.Context, c *client, a *dockerarchive.Archive) error {
	if _, err := c.loadImage(ctx, a.Reader()); err != nil {
		return err
	}
	img, err := c.imageInspect(ctx, a.Ref)
	if err != nil {
		return fmt.Errorf("the loaded image is not found under its tag: %w", err)
	}
	if id := adapterkit.ImageID(img.ID); id != a.ConfigDigest {
		return fmt.Errorf("the tag names image %s, not the archive's %s", id, a.ConfigDigest)
	}
	return nil
}

// RemoveImage removes the tag ref. libpod refuses to remove an image a
// container uses (409) unless forced, and forced it removes the
// containers too: such an image is untagged instead, which leaves it to
// its containers.
func (r *Runtime) RemoveImage(ctx context.Context, ref string) error {
	const op = runtime.OpRemoveImage
	ctx, cancel := adapterkit.ImageContext(ctx, op)
	defer cancel()
	c, err := r.connect(ctx, op, ref)
	if err != nil {
		return err
	}
	err = c.removeImage(ctx, ref)
	code, _ := status(err)
	switch {
	case err == nil, code == http.StatusNotFound:
		return nil
	case code != http.StatusConflict:
		return r.wrap(op, ref, err)
	}
	repo, tag := splitTag(dockerHubRef(ref))
	if tag == "" {
		return r.wrap(op, ref, errors.Join(err, errors.New("in use, and not a tag that can be removed alone")))
	}
	if err := c.untagImage(ctx, ref, repo, tag); err != nil {
		if code, _ := status(err); code == http.StatusNotFound {
			return nil
		}
		return r.wrap(op, ref, err)
	}
	return nil
}

// splitTag splits "host/repo:tag" into its repository and tag ("" when
// ref has no tag, e.g. a digest ref).
func splitTag(ref string) (repo, tag string) {
	if strings.Contains(ref, "@") {
		return ref, ""
	}
	slash := strings.LastIndex(ref, "/")
	colon := strings.LastIndex(ref, ":")
	if colon <= slash {
		return ref, ""
	}
	return ref[:colon], ref[colon+1:]
}
