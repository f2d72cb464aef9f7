package containerd

import (
	"context"
	"fmt"
	"io"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/images/archive"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/containerd/platforms"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// ImageID is the digest of the config of ref's image for this host's
// platform: what Docker and Podman call the image's ID.
func (r *Runtime) ImageID(ctx context.Context, ref string) (string, error) {
	const op = runtime.OpImageID
	ctx, cancel := adapterkit.ImageContext(r.ctx(ctx), op)
	defer cancel()
	if err := r.ready(ctx, op, ref); err != nil {
		return "", err
	}
	img, err := r.storedImage(ctx, op, ref)
	if err != nil {
		return "", err
	}
	cfg, err := img.Config(ctx)
	if err != nil {
		return "", r.wrap(op, ref, fmt.Errorf("config: %w", err))
	}
	return cfg.Digest.String(), nil
}

// ImageConfig reads ref's Env and VOLUMEs from its OCI image config.
func (r *Runtime) ImageConfig(ctx context.Context, ref string) (runtime.ImageConfig, error) {
	const op = runtime.OpImageConfig
	ctx, cancel := adapterkit.ImageContext(r.ctx(ctx), op)
	defer cancel()
	if err := r.ready(ctx, op, ref); err != nil {
		return runtime.ImageConfig{}, err
	}
	img, err := r.storedImage(ctx, op, ref)
	if err != nil {
		return runtime.ImageConfig{}, err
	}
	spec, err := img.Spec(ctx)
	if err != nil {
		return runtime.ImageConfig{}, r.wrap(op, ref, fmt.Errorf("config: %w", err))
	}
	return runtime.NewImageConfig(spec.Config.Env, spec.Config.Volumes), nil
}

// storedImage is ref's image record; an absent one is ErrImageNotFound.
func (r *Runtime) storedImage(ctx context.Context, op, ref string) (client.Image, error) {
	name, err := normalizeRef(ref)
	if err != nil {
		return nil, r.wrap(op, ref, adapterkit.WithKind(runtime.ErrImageNotFound, "%v", err))
	}
	img, err := r.client.GetImage(ctx, name)
	if err != nil {
		return nil, r.wrap(op, ref, err)
	}
	return img, nil
}

// SaveImage exports ref, for this host's platform, as an archive that is
// both an OCI layout and a docker-archive (containerd writes the
// manifest.json of `docker save` beside the OCI index).
func (r *Runtime) SaveImage(ctx context.Context, ref string, w io.Writer) error {
	const op = runtime.OpSaveImage
	ctx, cancel := adapterkit.ImageContext(r.ctx(ctx), op)
	defer cancel()
	if err := r.ready(ctx, op, ref); err != nil {
		return err
	}
	img, err := r.storedImage(ctx, op, ref)
	if err != nil {
		return err
	}
	err = r.client.Export(ctx, w,
		archive.WithImage(r.client.ImageService(), img.Name()),
		archive.WithPlatform(platforms.DefaultStrict()),
	)
	if err != nil {
		return r.wrap(op, ref, err)
	}
	return nil
}

// LoadImage checks the archive whole (adapterkit.SpoolArchive), then
// imports and unpacks it under one lease, so that nothing it stored is
// collected before the image record holds it, and everything is once the
// lease ends if the load failed: a failed unpack also deletes the image
// records the import made.
func (r *Runtime) LoadImage(ctx context.Context, rd io.Reader) (string, error) {
	const op = runtime.OpLoadImage
	ctx, cancel := adapterkit.ImageContext(r.ctx(ctx), op)
	defer cancel()
	a, err := adapterkit.SpoolArchive(rd)
	if err != nil {
		return "", r.wrap(op, "", err)
	}
	defer a.Close()
	if err := r.ready(ctx, op, a.Ref); err != nil {
		return "", err
	}
	name, err := normalizeRef(a.Ref)
	if err != nil {
		return "", r.wrap(op, a.Ref, adapterkit.WithKind(runtime.ErrInvalid, "%v", err))
	}
	lctx, done, err := r.client.WithLease(ctx)
	if err != nil {
		return "", r.wrap(op, a.Ref, err)
	}
	defer done(context.WithoutCancel(lctx))
	imported, err := r.client.Import(lctx, a.Reader(), client.WithImportPlatform(platforms.DefaultStrict()))
	if err == nil {
		err = r.unpackImported(lctx, name, a.ConfigDigest, imported)
	}
	if err != nil {
		r.deleteImages(lctx, imported)
		return "", r.wrap(op, a.Ref, err)
	}
	return a.Ref, nil
}

// unpackImported unpacks the image name among those imported, after
// checking that its config is the archive's.
func (r *Runtime) unpackImported(ctx context.Context, name, config string, imported []images.Image) error {
	for _, rec := range imported {
		if rec.Name != name {
			continue
		}
		img := client.NewImageWithPlatform(r.client, rec, platforms.DefaultStrict())
		cfg, err := img.Config(ctx)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if cfg.Digest.String() != config {
			return fmt.Errorf("imported config %s, not the archive's %s", cfg.Digest, config)
		}
		if err := img.Unpack(ctx, r.snapshotter); err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
		return nil
	}
	return fmt.Errorf("the import made no image %s", name)
}

// deleteImages removes the records of a failed load, bounded and best
// effort (the caller's context may be what failed).
func (r *Runtime) deleteImages(ctx context.Context, imgs []images.Image) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), adapterkit.CleanupTimeout)
	defer cancel()
	for _, img := range imgs {
		if err := r.client.ImageService().Delete(cctx, img.Name); err != nil && !cerrdefs.IsNotFound(err) {
			r.log.Warn("containerd: could not remove the image of a failed load", "image", img.Name, "err", err)
		}
	}
}

// RemoveImage deletes ref's image record. A container keeps its snapshot
// (the garbage collector follows containers to their snapshots), so one
// that uses the image keeps running; the rest of the image goes with the
// next collection.
func (r *Runtime) RemoveImage(ctx context.Context, ref string) error {
	const op = runtime.OpRemoveImage
	ctx, cancel := adapterkit.ImageContext(r.ctx(ctx), op)
	defer cancel()
	if err := r.ready(ctx, op, ref); err != nil {
		return err
	}
	name, err := normalizeRef(ref)
	if err != nil {
		return r.wrap(op, ref, adapterkit.WithKind(runtime.ErrInvalid, "%v", err))
	}
	if err := r.client.ImageService().Delete(ctx, name); err != nil && !cerrdefs.IsNotFound(err) {
		return r.wrap(op, ref, err)
	}
	return nil
}
