package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// push uploads the single image of the layout at dir to ref. Plain HTTP is
// used only for a loopback registry; anything else goes over HTTPS.
func push(ctx context.Context, logger *slog.Logger, dir, ref string) error {
	start := time.Now()
	var opts []name.Option
	if loopbackRef(ref) {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.ParseReference(ref, opts...)
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return fmt.Errorf("push %s: layout %s: %w", ref, dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return fmt.Errorf("push %s: layout %s: %w", ref, dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return fmt.Errorf("push %s: layout %s: %w", ref, dir, err)
	}
	if len(m.Manifests) != 1 {
		return fmt.Errorf("push %s: layout %s holds %d images, want 1", ref, dir, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return fmt.Errorf("push %s: layout %s: %w", ref, dir, err)
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	logger.Info("pushed", "ref", ref, "digest", m.Manifests[0].Digest.String(),
		"elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// loopbackRef reports whether ref's registry host is a loopback address or
// localhost.
func loopbackRef(ref string) bool {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return false
	}
	host := r.Context().RegistryStr()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
