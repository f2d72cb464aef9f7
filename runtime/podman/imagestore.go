package podman

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/roboco/sandboxer/runtime"
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

// LoadImage loads a docker-archive through the service
// (adapterkit.ArchiveLoader: checked whole first, the tag checked after, a
// failed load's tag removed).
func (r *Runtime) LoadImage(ctx context.Context, rd io.Reader) (string, error) {
	return adapterkit.ArchiveLoader{
		Runtime:     Name,
		Log:         r.opts.Logger,
		Wrap:        r.wrap,
		Ready:       r.ready,
		Load:        r.load,
		ImageID:     r.imageID,
		RemoveImage: r.RemoveImage,
	}.LoadImage(ctx, rd)
}

// ready makes sure the service answers.
func (r *Runtime) ready(ctx context.Context, op, ref string) error {
	_, err := r.connect(ctx, op, ref)
	return err
}

// load sends the archive to the service.
func (r *Runtime) load(ctx context.Context, archive io.Reader, ref string) error {
	c, err := r.connect(ctx, runtime.OpLoadImage, ref)
	if err != nil {
		return err
	}
	_, err = c.loadImage(ctx, archive)
	return err
}

// imageID is the service's ID of ref's image, as libpod writes it.
func (r *Runtime) imageID(ctx context.Context, ref string) (string, error) {
	c, err := r.connect(ctx, runtime.OpImageID, ref)
	if err != nil {
		return "", err
	}
	img, err := c.imageInspect(ctx, ref)
	return img.ID, err
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
