// Command crashprov is a test helper for the janitor's crash test: it
// provisions sandboxes on Docker for one owner, labelled as owned by this
// very process (lifetime.ProcessOwnerLabels), and then waits to be killed.
// The test SIGKILLs it mid-provision and proves that a janitor sweep after
// the grace window leaves nothing behind.
//
// Usage:
//
//	crashprov -prefix sbxtest1a2b -owner crash -services postgres,redis,mongo
//
// -services defaults to every engine it links (engines/all).
//
// Images come from SANDBOXER_IMAGE_<ENGINE> (as for the provisioner), the
// daemon from DOCKER_HOST. It prints "provisioned" on stdout if the
// provision completes (which a mid-provision kill must prevent), and exits
// 1 on failure.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/roboco/sandboxer/engines"
	_ "github.com/roboco/sandboxer/engines/all"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime/docker"
)

func main() {
	prefix := flag.String("prefix", labels.DefaultPrefix, "label prefix")
	owner := flag.String("owner", "crash", "owner id")
	services := flag.String("services", strings.Join(engines.Default.Names(), ","), "services to provision")
	flag.Parse()

	if err := run(*prefix, *owner, provision.ParseServices(*services)); err != nil {
		fmt.Fprintln(os.Stderr, "crashprov:", err)
		os.Exit(1)
	}
}

func run(prefix, owner string, services []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	labels, err := lifetime.ProcessOwnerLabels(prefix)
	if err != nil {
		return err
	}
	rt, err := docker.New()
	if err != nil {
		return err
	}
	defer rt.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	p, err := provision.New(rt, provision.Options{LabelPrefix: prefix, Labels: labels, Logger: logger})
	if err != nil {
		return err
	}
	if _, err := p.Provision(ctx, owner, services); err != nil {
		return err
	}
	fmt.Println("provisioned")
	<-ctx.Done() // hold the sandboxes until killed
	return nil
}
