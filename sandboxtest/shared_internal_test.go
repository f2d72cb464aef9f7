package sandboxtest

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/roboco/sandboxer/runtime/detect"
)

// TestSharedKeyTellsRuntimesApart: Options that differ only in where
// detection looks (an endpoint, a containerd namespace, the environment
// it reads them from) or in the limits opt-out get shared sandboxes of
// their own; Options that differ only in what does not change the server
// (deadlines, the logger) share one.
func TestSharedKeyTellsRuntimesApart(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	podman := func(host string) Options {
		return Options{Detect: detect.Options{Runtime: "podman", ContainerHost: host}}
	}
	containerd := func(ns string) Options {
		return Options{Detect: detect.Options{Runtime: "containerd", ContainerdAddress: "/run/containerd/containerd.sock", ContainerdNamespace: ns}}
	}
	unenforced := podman("unix:///run/user/1000/podman/podman.sock")
	unenforced.Detect.UnenforcedLimits = true
	slower := podman("unix:///run/podman/podman.sock")
	slower.Timeout, slower.ReadyTimeout, slower.Detect.PingTimeout = time.Hour, time.Hour, time.Minute
	slower.Detect.Logger = slog.Default()

	for _, tc := range []struct {
		name string
		a, b Options
		same bool
	}{
		{name: "RootfulAndRootlessPodman", a: podman("unix:///run/podman/podman.sock"), b: podman("unix:///run/user/1000/podman/podman.sock")},
		{name: "ContainerdNamespaces", a: containerd("sbx-a"), b: containerd("sbx-b")},
		{name: "ContainerdAddresses", a: containerd("sbx"), b: Options{Detect: detect.Options{Runtime: "containerd", ContainerdAddress: "/tmp/other.sock", ContainerdNamespace: "sbx"}}},
		{name: "DockerHostFromTheEnvironment",
			a: Options{Detect: detect.Options{Runtime: "docker", Getenv: env("DOCKER_HOST", "unix:///a.sock")}},
			b: Options{Detect: detect.Options{Runtime: "docker", Getenv: env("DOCKER_HOST", "unix:///b.sock")}}},
		{name: "ContainerdNamespaceFromTheEnvironment",
			a: Options{Detect: detect.Options{Runtime: "containerd", Getenv: env("CONTAINERD_NAMESPACE", "sbx-a")}},
			b: Options{Detect: detect.Options{Runtime: "containerd", Getenv: env("CONTAINERD_NAMESPACE", "sbx-b")}}},
		{name: "UnenforcedLimits", a: podman("unix:///run/user/1000/podman/podman.sock"), b: unenforced},
		{name: "SameRuntimeOtherDeadlinesAndLogger", a: podman("unix:///run/podman/podman.sock"), b: slower, same: true},
		{name: "FlagOrEnvironmentForTheSameEndpoint",
			a: podman("unix:///run/podman/podman.sock"),
			b: Options{Detect: detect.Options{Runtime: "podman", Getenv: env("CONTAINER_HOST", "unix:///run/podman/podman.sock")}}, same: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ka, kb := keyOf("postgres", tc.a), keyOf("postgres", tc.b)
			if tc.same {
				assert.Equal(t, ka, kb, "one shared sandbox")
			} else {
				assert.NotEqual(t, ka, kb, "a shared sandbox each")
			}
		})
	}
}
