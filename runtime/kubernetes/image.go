package kubernetes

import (
	"context"
	"io"

	"github.com/roboco/sandboxer/runtime"
)

// noImageStore says why the image verbs are unsupported: the kubelet of
// whichever node runs a pod pulls its image at Run, and the API has no
// image store to ask, fill or empty.
const noImageStore = "the kubelet pulls images at Run; a Kubernetes cluster has no image store the API can query, fill or empty"

// imageUnsupported is the error of every image verb.
func (r *Runtime) imageUnsupported(op, ref string) error {
	return r.wrap(op, ref, unsupported("%s", noImageStore))
}

// ImageExists is runtime.ErrUnsupported (noImageStore).
func (r *Runtime) ImageExists(_ context.Context, ref string) (bool, error) {
	return false, r.imageUnsupported(runtime.OpImageExists, ref)
}

// PullImage is runtime.ErrUnsupported (noImageStore): Run pulls.
func (r *Runtime) PullImage(_ context.Context, ref string, _ runtime.ProgressFunc) error {
	return r.imageUnsupported(runtime.OpPull, ref)
}

// ImageID is runtime.ErrUnsupported (noImageStore).
func (r *Runtime) ImageID(_ context.Context, ref string) (string, error) {
	return "", r.imageUnsupported(runtime.OpImageID, ref)
}

// ImageConfig is runtime.ErrUnsupported (noImageStore): an engine then
// lays a sandbox out without the image's own word (see engines.Image).
func (r *Runtime) ImageConfig(_ context.Context, ref string) (runtime.ImageConfig, error) {
	return runtime.ImageConfig{}, r.imageUnsupported(runtime.OpImageConfig, ref)
}

// SaveImage is runtime.ErrUnsupported (noImageStore).
func (r *Runtime) SaveImage(_ context.Context, ref string, _ io.Writer) error {
	return r.imageUnsupported(runtime.OpSaveImage, ref)
}

// LoadImage is runtime.ErrUnsupported (noImageStore).
func (r *Runtime) LoadImage(_ context.Context, _ io.Reader) (string, error) {
	return "", r.imageUnsupported(runtime.OpLoadImage, "")
}

// RemoveImage is runtime.ErrUnsupported (noImageStore).
func (r *Runtime) RemoveImage(_ context.Context, ref string) error {
	return r.imageUnsupported(runtime.OpRemoveImage, ref)
}
