package engines_test

import (
	"testing"

	"github.com/roboco/sandboxer/engines"
	_ "github.com/roboco/sandboxer/engines/all"
)

// BenchmarkNewCredentials draws one sandbox service's credentials (16
// bytes from crypto/rand, hex-encoded).
func BenchmarkNewCredentials(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := engines.NewCredentials(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDescribe is what the provisioner asks each engine for one
// service: its spec, its container's env and command, its probe and the
// env it emits.
func BenchmarkDescribe(b *testing.B) {
	cred, err := engines.NewCredentials()
	if err != nil {
		b.Fatal(err)
	}
	ep := engines.Endpoint{Host: "172.17.0.2", Port: 5432}
	for _, e := range engines.Default.All() {
		b.Run(e.Spec().Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = e.Spec()
				_ = e.Container(cred, engines.Limits{MemoryBytes: 512 << 20}, engines.Image{})
				_ = e.Probe(ep, cred)
				_ = e.Env("ROBOCO_TEST", ep, cred)
			}
		})
	}
}

// BenchmarkRegistryLookup resolves a service name.
func BenchmarkRegistryLookup(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := engines.Default.Lookup("mongo"); !ok {
			b.Fatal("mongo is not registered")
		}
	}
}
