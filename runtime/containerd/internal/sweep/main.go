// Command sweep removes every container of the adapter's containerd
// namespace through the adapter itself, so that each leaves its network
// properly (CNI DEL with the configuration it joined with) before its task
// and snapshot go. hack/env/containerd.sh down runs it before stopping a
// daemon it started, to clean up after tests that died half-way.
//
// It reads CONTAINERD_ADDRESS, CONTAINERD_NAMESPACE and the adapter's other
// settings like the adapter does, and prints the removed containers' names.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/roboco/sandboxer/runtime/containerd"
)

func main() {
	if err := sweep(); err != nil {
		fmt.Fprintln(os.Stderr, "sweep:", err)
		os.Exit(1)
	}
}

func sweep() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r, err := containerd.New(containerd.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		return err
	}
	defer r.Close()
	all, err := r.List(ctx, nil)
	if err != nil {
		return err
	}
	failed := 0
	for _, c := range all {
		if err := r.Remove(ctx, c.Name); err != nil {
			fmt.Fprintln(os.Stderr, "sweep:", err)
			failed++
			continue
		}
		fmt.Println(c.Name)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d containers not removed", failed, len(all))
	}
	return nil
}
