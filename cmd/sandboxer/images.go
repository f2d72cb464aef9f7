package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/roboco/sandboxer/runtime"
)

// imagesCmd moves images in and out of the runtime as docker-archives
// (the format of `docker save`), for air-gapped hosts: save on a host
// that can pull, load where none can.
func (a *app) imagesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Save an image to a docker-archive, or load one (air-gapped hosts)",
	}
	var out string
	save := &cobra.Command{
		Use:   "save REF -o FILE",
		Short: "Write image REF as a docker-archive to FILE (- for stdout)",
		Args:  cobra.ExactArgs(1),
		RunE: a.command(func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("save: -o FILE is required (- for stdout)")
			}
			ctx := cmd.Context()
			rt, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer rt.Close()
			store, err := imageStore(rt)
			if err != nil {
				return err
			}
			if out == "-" {
				return store.SaveImage(ctx, args[0], a.io.Out)
			}
			// Written beside FILE and renamed: a failed save leaves no
			// half archive under FILE.
			tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
			if err != nil {
				return fmt.Errorf("save %s: %w", args[0], err)
			}
			defer os.Remove(tmp.Name())
			if err := store.SaveImage(ctx, args[0], tmp); err != nil {
				tmp.Close()
				return err
			}
			if err := tmp.Close(); err != nil {
				return fmt.Errorf("save %s: %w", args[0], err)
			}
			return os.Rename(tmp.Name(), out)
		}),
	}
	save.Flags().StringVarP(&out, "output", "o", "", "the archive to write (- for stdout)")
	var in string
	load := &cobra.Command{
		Use:   "load -i FILE",
		Short: "Load the one tagged image of the docker-archive FILE (- for stdin) and print its tag",
		Args:  cobra.NoArgs,
		RunE: a.command(func(cmd *cobra.Command, _ []string) error {
			if in == "" {
				return usagef("load: -i FILE is required (- for stdin)")
			}
			var r io.Reader = a.io.In
			if in != "-" {
				f, err := os.Open(in)
				if err != nil {
					return &usageError{err}
				}
				defer f.Close()
				r = f
			}
			ctx := cmd.Context()
			rt, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer rt.Close()
			store, err := imageStore(rt)
			if err != nil {
				return err
			}
			ref, err := store.LoadImage(ctx, r)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.io.Out, ref)
			return nil
		}),
	}
	load.Flags().StringVarP(&in, "input", "i", "", "the archive to read (- for stdin)")
	cmd.AddCommand(save, load)
	return cmd
}

// imageStore is rt's image store, or an ErrUnsupported error naming rt
// when it has none (a cluster, whose nodes pull at run).
func imageStore(rt runtime.ContainerRuntime) (runtime.ImageStore, error) {
	store, ok := runtime.As[runtime.ImageStore](rt)
	if !ok {
		return nil, fmt.Errorf("%s has no image store of its own (its nodes pull at run): %w", rt.Name(), runtime.ErrUnsupported)
	}
	return store, nil
}
