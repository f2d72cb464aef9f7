package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/roboco/sandboxer/runtime"
)

// ImageExists reports whether ref is present in the daemon's image store.
func (r *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	if err := r.negotiate(ctx, runtime.OpImageExists, ref); err != nil {
		return false, err
	}
	if _, err := r.cli.ImageInspect(ctx, ref); err != nil {
		if cerrdefs.IsNotFound(err) {
			return false, nil
		}
		return false, r.wrap(runtime.OpImageExists, ref, err)
	}
	return true, nil
}

// PullImage pulls ref through the daemon, reporting progress events to
// progress (which may be nil). The daemon reports most pull failures inside
// the JSON progress stream with a 200 status, so the stream is read to its
// end and an error in it fails the pull: every failure to obtain the image
// is runtime.ErrImageNotFound (runtime.ErrUnavailable when the daemon itself
// does not answer).
func (r *Runtime) PullImage(ctx context.Context, ref string, progress runtime.ProgressFunc) error {
	if err := r.negotiate(ctx, runtime.OpPull, ref); err != nil {
		return err
	}
	rc, err := r.cli.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		return r.wrap(runtime.OpPull, ref, err)
	}
	defer rc.Close()
	if err := decodePull(ref, rc, progress); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return r.wrap(runtime.OpPull, ref, err)
	}
	return nil
}

// decodePull reads a pull's JSON message stream to its end, forwards each
// progress event and returns the first error message of the stream.
func decodePull(ref string, stream io.Reader, progress runtime.ProgressFunc) error {
	dec := json.NewDecoder(stream)
	for {
		var msg jsonmessage.JSONMessage
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading pull progress: %w", err)
		}
		if msg.Error != nil {
			return msg.Error
		}
		//lint:ignore SA1019 older daemons fill only this field.
		if msg.ErrorMessage != "" {
			return errors.New(msg.ErrorMessage) //lint:ignore SA1019 see above.
		}
		if progress != nil && msg.Status != "" {
			ev := runtime.PullProgress{Ref: ref, Status: msg.Status, Layer: msg.ID}
			if msg.Progress != nil {
				ev.Current, ev.Total = msg.Progress.Current, msg.Progress.Total
			}
			progress(ev)
		}
	}
}
