package podman

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/roboco/sandboxer/runtime"
)

// ImageExists reports whether ref is present in the service's storage
// (short names resolve as Podman resolves them, localhost/ included).
func (r *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	const op = runtime.OpImageExists
	c, err := r.connect(ctx, op, ref)
	if err != nil {
		return false, err
	}
	ok, err := c.imageExists(ctx, ref)
	if err != nil {
		return false, r.wrap(op, ref, err)
	}
	return ok, nil
}

// PullImage fetches ref, reporting each line of the service's progress
// stream to progress (which may be nil). A name without a registry means
// Docker Hub, as it does for Docker ("postgres:16" is
// docker.io/library/postgres:16), whatever the service's short-name
// settings (Debian's default has no search registry at all); ImageExists
// and Run then find it under the short name too. Registries on a loopback
// address are pulled from without TLS verification: the stand-in
// registries of tests and air-gapped mirrors there are plain HTTP. A ref
// that cannot be had is runtime.ErrImageNotFound.
func (r *Runtime) PullImage(ctx context.Context, ref string, progress runtime.ProgressFunc) error {
	const op = runtime.OpPull
	c, err := r.connect(ctx, op, ref)
	if err != nil {
		return err
	}
	stream, err := c.pullImage(ctx, dockerHubRef(ref), isLoopbackRegistry(ref))
	if err != nil {
		return r.wrap(op, ref, err)
	}
	defer stream.Close()
	dec := json.NewDecoder(stream)
	pulled := false
	for {
		var rep pullReport
		if err := dec.Decode(&rep); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return r.wrap(op, ref, fmt.Errorf("reading the pull stream: %w", err))
		}
		switch {
		case rep.Error != "":
			return r.wrap(op, ref, errors.New(strings.TrimSpace(rep.Error)))
		case rep.Stream != "" && progress != nil:
			for _, line := range strings.Split(strings.TrimSpace(rep.Stream), "\n") {
				if line = strings.TrimSpace(line); line != "" {
					progress(progressEvent(ref, line))
				}
			}
		case len(rep.Images) > 0 || rep.ID != "":
			pulled = true
			if progress != nil {
				progress(runtime.PullProgress{Ref: ref, Status: "Pulled " + rep.ID})
			}
		}
	}
	if !pulled {
		return r.wrap(op, ref, errors.New("the pull stream ended without an image"))
	}
	return nil
}

// progressEvent turns a line of Podman's pull output ("Copying blob
// sha256:...") into a progress event.
func progressEvent(ref, line string) runtime.PullProgress {
	ev := runtime.PullProgress{Ref: ref, Status: line}
	for _, prefix := range []string{"Copying blob ", "Copying config "} {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			ev.Status = strings.TrimSpace(prefix)
			ev.Layer, _, _ = strings.Cut(rest, " ")
		}
	}
	return ev
}

// dockerHubRef qualifies a ref without a registry the way Docker does:
// "busybox" is docker.io/library/busybox, "org/app:1" docker.io/org/app:1.
func dockerHubRef(ref string) string {
	first, rest, ok := strings.Cut(ref, "/")
	switch {
	case ok && (strings.ContainsAny(first, ".:") || first == "localhost" || strings.HasPrefix(first, "[")):
		return ref
	case ok:
		return "docker.io/" + first + "/" + rest
	default:
		return "docker.io/library/" + ref
	}
}

// isLoopbackRegistry reports whether ref names a registry on a loopback
// address (127.0.0.0/8, ::1 or localhost), with or without a port.
func isLoopbackRegistry(ref string) bool {
	domain, _, ok := strings.Cut(ref, "/")
	if !ok || !(strings.ContainsAny(domain, ".:") || domain == "localhost" || strings.HasPrefix(domain, "[")) {
		return false // a Docker Hub name
	}
	host := domain
	if h, _, err := net.SplitHostPort(domain); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
