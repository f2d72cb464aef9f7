package provision_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// The in-process part of provisioning, on the fake runtime (whose verbs
// cost nothing): what sandboxer itself adds to a provision and a
// teardown, as time and allocations. The end-to-end figures on real
// runtimes are bench/cmd/sandboxer-bench's (`make bench`).

// benchFake is a fake runtime holding the default engines' images and
// answering their probes as a ready server would.
func benchFake(b *testing.B) *fakeruntime.Runtime {
	b.Helper()
	f := fakeruntime.New()
	b.Cleanup(func() { f.Close() })
	for _, e := range engines.Default.All() {
		f.AddImage(e.Spec().Image, e.Spec().Tmpfs...)
	}
	f.Script("pg_isready", fakeruntime.Result{Stdout: "accepting connections"})
	f.Script("psql", fakeruntime.Result{Stdout: "1\n"})
	f.Script("redis-cli", fakeruntime.Result{Stdout: "PONG\n"})
	f.Script("mongosh", fakeruntime.Result{Stdout: "1\n"})
	return f
}

// freshEvery bounds the containers one fake runtime ever holds: the fake
// never reuses an address, and has about 64000 per network.
const freshEvery = 5000

// benchWorld is a fake runtime and a provisioner on it, replaced by fresh
// ones every freshEvery iterations.
type benchWorld struct {
	b       *testing.B
	network string
	n       int
	p       *provision.Provisioner
}

func newBenchWorld(b *testing.B, network string) *benchWorld {
	w := &benchWorld{b: b, network: network}
	w.p = benchProvisioner(b, benchFake(b), network)
	return w
}

// next returns the provisioner and a fresh owner id for one iteration.
func (w *benchWorld) next() (*provision.Provisioner, string) {
	w.n++
	if w.n%freshEvery == 0 {
		w.b.StopTimer()
		w.p = benchProvisioner(w.b, benchFake(w.b), w.network)
		w.b.StartTimer()
	}
	return w.p, fmt.Sprintf("b%d", w.n)
}

func benchProvisioner(b *testing.B, f *fakeruntime.Runtime, network string) *provision.Provisioner {
	b.Helper()
	if network != "" {
		if _, err := f.CreateNetwork(context.Background(), runtime.NetworkSpec{Name: network}); err != nil {
			b.Fatal(err)
		}
	}
	p, err := provision.New(f, provision.Options{Getenv: func(string) string { return "" }, Network: network, Readiness: provision.ReadinessExec /* the fake runs no server */})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkProvisionFake provisions and tears down one service and the
// trio, in host mode (the fake publishes real listeners on 127.0.0.1,
// which Provision dials) and in sibling mode.
func BenchmarkProvisionFake(b *testing.B) {
	cases := []struct {
		name     string
		services []string
		network  string
	}{
		{"redis/host", []string{"redis"}, ""},
		{"trio/host", []string{"postgres", "redis", "mongo"}, ""},
		{"trio/sibling", []string{"postgres", "redis", "mongo"}, "sbxnet"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			w := newBenchWorld(b, tc.network)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				p, owner := w.next()
				if _, err := p.Provision(ctx, owner, tc.services); err != nil {
					b.Fatal(err)
				}
				if _, err := p.Teardown(ctx, owner); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTeardownFake times a teardown of the trio alone.
func BenchmarkTeardownFake(b *testing.B) {
	w := newBenchWorld(b, "sbxnet")
	ctx := context.Background()
	trio := []string{"postgres", "redis", "mongo"}
	b.ReportAllocs()
	for b.Loop() {
		p, owner := w.next()
		b.StopTimer()
		if _, err := p.Provision(ctx, owner, trio); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		removed, err := p.Teardown(ctx, owner)
		if err != nil || len(removed) != len(trio) {
			b.Fatalf("teardown: %d removed, %v", len(removed), err)
		}
	}
}

// BenchmarkValidate checks an owner id and the trio's service list.
func BenchmarkValidate(b *testing.B) {
	services := []string{"mongo", "postgres", "redis"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := provision.Validate(engines.Default, "agent-42", services); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRender renders a provisioned trio's env in every format.
func BenchmarkRender(b *testing.B) {
	f := benchFake(b)
	p := benchProvisioner(b, f, "sbxnet")
	sb, err := p.Provision(context.Background(), "render", []string{"postgres", "redis", "mongo"})
	if err != nil {
		b.Fatal(err)
	}
	for _, format := range []provision.Format{provision.FormatDotenv, provision.FormatShell, provision.FormatJSON} {
		b.Run(string(format), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := sb.Render(io.Discard, format); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
