package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// serve runs a registry on addr until ctx is cancelled. Blobs are stored
// under blobsDir, so a restarted registry still has them and a re-push only
// uploads manifests; manifests and tags live in memory.
func serve(ctx context.Context, logger *slog.Logger, addr, blobsDir string) error {
	blobs, err := newDiskBlobs(blobsDir)
	if err != nil {
		return fmt.Errorf("serve %s: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler: registry.New(
			registry.WithBlobHandler(blobs),
			registry.Logger(slog.NewLogLogger(logger.Handler(), slog.LevelInfo)),
		),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("registry serving", "addr", ln.Addr().String(), "blobs", blobsDir, "pid", os.Getpid())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", addr, err)
	case <-ctx.Done():
	}
	logger.Info("registry stopping", "addr", addr)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("serve %s: shutdown: %w", addr, err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", addr, err)
	}
	return nil
}

// diskBlobs is a content-addressed blob store: DIR/<algorithm>/<hex>.
// The registry verifies a blob's digest before Put returns, and Put only
// renames a completely written file into place, so a stored file is
// trusted as is (Stat is an os.Stat, not a re-hash as in ggcr's own disk
// handler, which would read every layer twice per pull).
type diskBlobs struct{ dir string }

var (
	_ registry.BlobHandler       = diskBlobs{}
	_ registry.BlobStatHandler   = diskBlobs{}
	_ registry.BlobPutHandler    = diskBlobs{}
	_ registry.BlobDeleteHandler = diskBlobs{}
)

func newDiskBlobs(dir string) (diskBlobs, error) {
	if err := os.MkdirAll(filepath.Join(dir, "uploads"), 0o755); err != nil {
		return diskBlobs{}, fmt.Errorf("blob store: %w", err)
	}
	return diskBlobs{dir: dir}, nil
}

func (d diskBlobs) path(h v1.Hash) string { return filepath.Join(d.dir, h.Algorithm, h.Hex) }

// Stat implements registry.BlobStatHandler.
func (d diskBlobs) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	fi, err := os.Stat(d.path(h))
	if errors.Is(err, os.ErrNotExist) {
		return 0, registry.ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("stat blob %s: %w", h, err)
	}
	return fi.Size(), nil
}

// Get implements registry.BlobHandler. The *os.File it returns is an
// io.ReaderAt, so ranged GETs seek instead of reading from the start.
func (d diskBlobs) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	f, err := os.Open(d.path(h))
	if errors.Is(err, os.ErrNotExist) {
		return nil, registry.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("open blob %s: %w", h, err)
	}
	return f, nil
}

// Put implements registry.BlobPutHandler: rc is the registry's verifying
// reader, which fails at EOF on a digest mismatch; the blob is renamed into
// place only after it was read to the end without error.
func (d diskBlobs) Put(_ context.Context, _ string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	if _, err := os.Stat(d.path(h)); err == nil {
		_, err := io.Copy(io.Discard, rc) // still verify what the client sent
		return err
	}
	f, err := os.CreateTemp(filepath.Join(d.dir, "uploads"), "blob-*")
	if err != nil {
		return fmt.Errorf("put blob %s: %w", h, err)
	}
	_, err = io.Copy(f, rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.MkdirAll(filepath.Join(d.dir, h.Algorithm), 0o755)
	}
	if err == nil {
		err = os.Rename(f.Name(), d.path(h))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("put blob %s: %w", h, err)
	}
	return nil
}

// Delete implements registry.BlobDeleteHandler.
func (d diskBlobs) Delete(_ context.Context, _ string, h v1.Hash) error {
	err := os.Remove(d.path(h))
	if errors.Is(err, os.ErrNotExist) {
		return registry.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete blob %s: %w", h, err)
	}
	return nil
}
