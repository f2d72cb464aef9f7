// Command imagetool builds, serves and pushes sandboxer's offline stand-in
// images: it turns a rootfs tar and an image config into a one-layer OCI
// image layout, runs a loopback registry whose blobs live on disk, and
// pushes a layout to that registry. hack/images.sh drives it; nothing else
// in the project imports it.
//
// Usage:
//
//	imagetool build --rootfs ROOTFS.tar --config CONFIG.json --layout DIR
//	imagetool serve --addr 127.0.0.1:PORT --blobs DIR
//	imagetool push  --layout DIR --ref 127.0.0.1:PORT/sandboxer/NAME:TAG
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// errUsage marks a command-line mistake: the exit status is 2, not 1.
var errUsage = errors.New("usage")

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, logger, os.Args[1:], os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "imagetool:", err)
		os.Exit(2)
	default:
		logger.Error("imagetool failed", "err", err)
		os.Exit(1)
	}
}

const usage = `usage:
  imagetool build --rootfs ROOTFS.tar --config CONFIG.json --layout DIR
  imagetool serve --addr 127.0.0.1:PORT --blobs DIR
  imagetool push  --layout DIR --ref 127.0.0.1:PORT/sandboxer/NAME:TAG`

// run dispatches one subcommand; usage text goes to stderr.
func run(ctx context.Context, logger *slog.Logger, args []string, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("%w: no command", errUsage)
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("imagetool "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch cmd {
	case "build":
		rootfs := fs.String("rootfs", "", "rootfs tar (uncompressed) that becomes the image's only layer")
		config := fs.String("config", "", "image config JSON (Env, Entrypoint, Cmd, ExposedPorts, Volumes, StopSignal, User, WorkingDir, Labels)")
		dir := fs.String("layout", "", "OCI image layout to create (absent or empty directory)")
		if err := parse(fs, args, "rootfs", "config", "layout"); err != nil {
			return err
		}
		return build(ctx, logger, *rootfs, *config, *dir)
	case "serve":
		addr := fs.String("addr", "127.0.0.1:5055", "address to listen on")
		blobs := fs.String("blobs", "", "directory that holds the registry's blobs")
		if err := parse(fs, args, "addr", "blobs"); err != nil {
			return err
		}
		return serve(ctx, logger, *addr, *blobs)
	case "push":
		dir := fs.String("layout", "", "OCI image layout holding one image")
		ref := fs.String("ref", "", "destination, e.g. 127.0.0.1:5055/sandboxer/postgres:TAG")
		if err := parse(fs, args, "layout", "ref"); err != nil {
			return err
		}
		return push(ctx, logger, *dir, *ref)
	case "help", "-h", "--help":
		fmt.Fprintln(stderr, usage)
		return nil
	default:
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
}

// parse parses args into fs and checks that every flag named in required
// has a non-empty value.
func parse(fs *flag.FlagSet, args []string, required ...string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %s: %w", errUsage, fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %s: unexpected arguments %q", errUsage, fs.Name(), fs.Args())
	}
	for _, name := range required {
		if fs.Lookup(name).Value.String() == "" {
			return fmt.Errorf("%w: %s: --%s is required", errUsage, fs.Name(), name)
		}
	}
	return nil
}
