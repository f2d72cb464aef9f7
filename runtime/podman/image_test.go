package podman

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/roboco/sandboxer/runtime"
)

func TestIsLoopbackRegistry(t *testing.T) {
	cases := []struct {
		ref  string
		want bool
	}{
		{ref: "127.0.0.1:5055/sandboxer/busybox:abc", want: true},
		{ref: "127.1.2.3/x/y", want: true},
		{ref: "localhost:5000/x", want: true},
		{ref: "localhost/x", want: true},
		{ref: "[::1]:5000/x", want: true},
		{ref: "registry.example.com/x", want: false},
		{ref: "10.0.0.1:5000/x", want: false},
		{ref: "busybox", want: false},
		{ref: "library/busybox:latest", want: false},
		{ref: "127.0.0.1", want: false},
	}
	for _, tc := range cases {
		t.Run(tc.ref, func(t *testing.T) {
			assert.Equal(t, tc.want, isLoopbackRegistry(tc.ref))
		})
	}
}

func TestDockerHubRef(t *testing.T) {
	cases := map[string]string{
		"postgres:16-alpine":            "docker.io/library/postgres:16-alpine",
		"busybox":                       "docker.io/library/busybox",
		"org/app:1":                     "docker.io/org/app:1",
		"org/team/app@sha256:abc":       "docker.io/org/team/app@sha256:abc",
		"docker.io/library/redis:8":     "docker.io/library/redis:8",
		"127.0.0.1:5055/sandboxer/x:1":  "127.0.0.1:5055/sandboxer/x:1",
		"localhost/sandboxer-dev/bb":    "localhost/sandboxer-dev/bb",
		"quay.io/podman/hello":          "quay.io/podman/hello",
		"[::1]:5000/x":                  "[::1]:5000/x",
		"registry.internal:443/app:1.2": "registry.internal:443/app:1.2",
	}
	for in, want := range cases {
		assert.Equal(t, want, dockerHubRef(in), "dockerHubRef(%q)", in)
	}
}

func TestProgressEvent(t *testing.T) {
	cases := []struct {
		line string
		want runtime.PullProgress
	}{
		{line: "Trying to pull r/x:1...", want: runtime.PullProgress{Ref: "r/x:1", Status: "Trying to pull r/x:1..."}},
		{line: "Copying blob sha256:abc done", want: runtime.PullProgress{Ref: "r/x:1", Status: "Copying blob", Layer: "sha256:abc"}},
		{line: "Copying config sha256:def", want: runtime.PullProgress{Ref: "r/x:1", Status: "Copying config", Layer: "sha256:def"}},
	}
	for _, tc := range cases {
		t.Run(tc.line, func(t *testing.T) {
			assert.Equal(t, tc.want, progressEvent("r/x:1", tc.line))
		})
	}
}
