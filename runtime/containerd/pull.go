package containerd

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/roboco/sandboxer/runtime"
)

// PullImage fetches ref through the client's resolver (plain HTTP for
// registries on 127.0.0.0/8, localhost and the hosts given to
// WithInsecureRegistries; HTTPS elsewhere) and unpacks it into the
// snapshotter. progress, if not nil, hears of the manifest, the config and
// every layer as their download starts and completes, then of the unpack.
// A ref that cannot be had (unknown repository or tag, registry unreachable
// or refusing) is ErrImageNotFound.
func (r *Runtime) PullImage(ctx context.Context, ref string, progress runtime.ProgressFunc) error {
	const op = runtime.OpPull
	ctx = r.ctx(ctx)
	if err := r.ready(ctx, op, ref); err != nil {
		return err
	}
	name, err := normalizeRef(ref)
	if err != nil {
		// Any failure of a pull is ErrImageNotFound (the translator's rule).
		return r.wrap(op, ref, err)
	}
	emit := func(p runtime.PullProgress) {
		if progress != nil {
			p.Ref = ref
			progress(p)
		}
	}
	// The lease keeps what is downloaded from the garbage collector until
	// the image record holds it.
	ctx, done, err := r.client.WithLease(ctx)
	if err != nil {
		return r.wrap(op, ref, err)
	}
	defer done(context.WithoutCancel(ctx))

	emit(runtime.PullProgress{Status: "Resolving"})
	_, err = r.client.Pull(ctx, name,
		client.WithResolver(r.resolver()),
		client.WithPullUnpack,
		client.WithPullSnapshotter(r.snapshotter),
		client.WithImageHandlerWrapper(progressWrapper(emit)),
	)
	if err != nil {
		return r.wrap(op, ref, err)
	}
	emit(runtime.PullProgress{Status: "Pull complete"})
	return nil
}

// resolver resolves and fetches from registries, over plain HTTP where
// plainHTTP says so.
func (r *Runtime) resolver() remotes.Resolver {
	return docker.NewResolver(docker.ResolverOptions{
		Hosts: docker.ConfigureDefaultRegistries(docker.WithPlainHTTP(r.plainHTTP)),
	})
}

// plainHTTP reports whether the registry host ("host" or "host:port") is
// spoken to over plain HTTP: loopback hosts always, others when the user
// marked them insecure.
func (r *Runtime) plainHTTP(host string) (bool, error) {
	if slices.Contains(r.insecure, host) {
		return true, nil
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
		if slices.Contains(r.insecure, h) {
			return true, nil
		}
	}
	h = strings.Trim(h, "[]")
	if h == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback(), nil
}

// progressWrapper reports each descriptor the pull fetches: once when its
// download starts and once when it is stored.
func progressWrapper(emit func(runtime.PullProgress)) func(images.Handler) images.Handler {
	return func(h images.Handler) images.Handler {
		return images.HandlerFunc(func(ctx context.Context, desc ocispec.Descriptor) ([]ocispec.Descriptor, error) {
			layer := shortDigest(desc)
			emit(runtime.PullProgress{Status: "Downloading", Layer: layer, Total: desc.Size})
			children, err := h.Handle(ctx, desc)
			if err != nil {
				return children, err
			}
			emit(runtime.PullProgress{Status: "Download complete", Layer: layer, Current: desc.Size, Total: desc.Size})
			return children, nil
		})
	}
}

// shortDigest names a blob the way registries' progress output does.
func shortDigest(desc ocispec.Descriptor) string {
	d := desc.Digest.Encoded()
	if len(d) > 12 {
		d = d[:12]
	}
	return fmt.Sprintf("%s (%s)", d, kindOfBlob(desc.MediaType))
}

// kindOfBlob says what a media type is, in one word.
func kindOfBlob(mediaType string) string {
	switch {
	case images.IsManifestType(mediaType), images.IsIndexType(mediaType):
		return "manifest"
	case images.IsConfigType(mediaType):
		return "config"
	case images.IsLayerType(mediaType):
		return "layer"
	default:
		return mediaType
	}
}
