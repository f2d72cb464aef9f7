package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/roboco/sandboxer/runtime/containerd"
)

// sweepContainers removes every container of the adapter's namespace
// through the adapter, printing each one's name to out, and goes on past a
// container that cannot be removed; then it reconciles the adapter's
// network leases (containerd.Runtime.Reconcile).
func sweepContainers(ctx context.Context, out, logs io.Writer) error {
	r, err := containerd.New(containerd.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer r.Close()
	all, err := r.List(ctx, nil)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	failed := 0
	for _, c := range all {
		if err := r.Remove(ctx, c.ID); err != nil {
			fmt.Fprintln(logs, "sweep:", err)
			failed++
			continue
		}
		fmt.Fprintln(out, c.Name)
	}
	// What containers removed behind the adapter's back (or whose DEL
	// failed) left on the network goes too, while the leases that name it
	// are still there (`sweep network` removes the state dir).
	rerr := r.Reconcile(ctx)
	if rerr != nil {
		fmt.Fprintln(logs, "sweep:", rerr)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d containers not removed", failed, len(all))
	}
	return rerr
}
