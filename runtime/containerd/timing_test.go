package containerd

import (
	"context"
	"testing"
	"time"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/docker"
)

// BenchmarkRunRemove measures a sandbox-shaped container's start (Run:
// create, network, start) and teardown (Remove of the running container),
// as a sibling (no published port) and with a published port, on
// containerd and, in the same run, on Docker, for comparison:
//
//	go test -run '^$' -bench RunRemove -benchtime 20x ./runtime/containerd/
func BenchmarkRunRemove(b *testing.B) {
	image := testenv.Image(b, Name, "busybox")
	backends := []struct {
		name string
		new  func(b *testing.B) runtime.ContainerRuntime
	}{
		{name: Name, new: func(b *testing.B) runtime.ContainerRuntime { return newTestRuntime(b) }},
		{name: docker.Name, new: func(b *testing.B) runtime.ContainerRuntime {
			r, err := docker.New()
			if err != nil {
				b.Skipf("docker: %v", err)
			}
			b.Cleanup(func() { _ = r.Close() })
			return r
		}},
	}
	shapes := []struct {
		name  string
		ports []runtime.PortSpec
	}{
		{name: "sibling"},
		{name: "published", ports: []runtime.PortSpec{{ContainerPort: 8080}}},
	}
	for _, be := range backends {
		for _, shape := range shapes {
			b.Run(be.name+"/"+shape.name, func(b *testing.B) {
				r := be.new(b)
				ctx := context.Background()
				if _, err := r.Version(ctx); err != nil {
					b.Skipf("%s: %v", be.name, err)
				}
				if ok, err := testkit.Store(b, r).ImageExists(ctx, image); err != nil || !ok {
					if err := testkit.Store(b, r).PullImage(ctx, image, nil); err != nil {
						b.Fatalf("pull %s: %v", image, err)
					}
				}
				var run, remove time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					spec := runtime.RunSpec{
						Name:        "sbx-bench-" + randHex(4),
						Image:       image,
						Command:     []string{"sleep", "3600"},
						Labels:      map[string]string{testLabel: "bench"},
						Tmpfs:       map[string]string{"/data": "rw,size=64m"},
						MemoryBytes: 512 << 20,
						CPUs:        1,
						Ports:       shape.ports,
					}
					t0 := time.Now()
					if _, err := r.Run(ctx, spec); err != nil {
						b.Fatalf("run: %v", err)
					}
					t1 := time.Now()
					if err := r.Remove(ctx, spec.Name); err != nil {
						b.Fatalf("remove: %v", err)
					}
					run += t1.Sub(t0)
					remove += time.Since(t1)
				}
				b.ReportMetric(float64(run.Milliseconds())/float64(b.N), "run-ms/op")
				b.ReportMetric(float64(remove.Milliseconds())/float64(b.N), "remove-ms/op")
			})
		}
	}
}
