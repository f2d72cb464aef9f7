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
