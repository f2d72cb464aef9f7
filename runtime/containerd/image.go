package containerd

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/v2/client"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// normalizeRef turns a ref as users write it ("busybox",
// "127.0.0.1:5000/x/y:t") into the name containerd stores images under
// ("docker.io/library/busybox:latest", "127.0.0.1:5000/x/y:t").
func normalizeRef(ref string) (string, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", fmt.Errorf("invalid image reference %q: %w", ref, err)
	}
	return named.String(), nil
}

// ImageExists reports whether ref is present in the namespace's image store.
func (r *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	const op = runtime.OpImageExists
	ctx = r.ctx(ctx)
	if err := r.ready(ctx, op, ref); err != nil {
		return false, err
	}
	name, err := normalizeRef(ref)
	if err != nil {
		return false, r.wrap(op, ref, adapterkit.WithKind(runtime.ErrImageNotFound, "%v", err))
	}
	if _, err := r.client.ImageService().Get(ctx, name); err != nil {
		if cerrdefs.IsNotFound(err) {
			return false, nil
		}
		return false, r.wrap(op, ref, err)
	}
	return true, nil
}

// image returns ref's image, unpacked into the adapter's snapshotter (an
// image imported or pulled without unpacking is unpacked here). An absent
// image is ErrImageNotFound: Run never pulls.
func (r *Runtime) image(ctx context.Context, op, object, ref string) (client.Image, error) {
	name, err := normalizeRef(ref)
	if err != nil {
		return nil, r.wrap(op, object, adapterkit.WithKind(runtime.ErrImageNotFound, "%v", err))
	}
	img, err := r.client.GetImage(ctx, name)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, r.wrap(op, object, adapterkit.WithKind(runtime.ErrImageNotFound, "image %q is not present (run does not pull)", ref))
		}
		return nil, r.wrap(op, object, fmt.Errorf("image %q: %w", ref, err))
	}
	unpacked, err := img.IsUnpacked(ctx, r.snapshotter)
	if err != nil {
		return nil, r.wrap(op, object, fmt.Errorf("image %q: %w", ref, err))
	}
	if !unpacked {
		if err := img.Unpack(ctx, r.snapshotter); err != nil {
			return nil, r.wrap(op, object, fmt.Errorf("unpack image %q: %w", ref, err))
		}
	}
	return img, nil
}
