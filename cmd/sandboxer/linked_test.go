package main

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime/detect"
)

// TestProgramsLinkTheirAdapters reads, with the go tool, which adapters a
// program links (not this test binary, which links every one through
// internal/testruntimes): the CLI links every adapter, so each runtime
// detection may find is one it can use; a consumer of sandboxtest links
// Docker's and Podman's, not containerd's client or client-go
// (bench/adopt measures what that saves).
func TestProgramsLinkTheirAdapters(t *testing.T) {
	assert.Equal(t, detect.Choosable(), detect.Linked(), "this test binary")
	tests := []struct {
		pkg  string
		want []string
	}{
		{"github.com/roboco/sandboxer/cmd/sandboxer", detect.Choosable()},
		{"github.com/roboco/sandboxer/sandboxtest", []string{detect.Docker, detect.Podman}},
	}
	for _, tt := range tests {
		t.Run(tt.pkg[strings.LastIndex(tt.pkg, "/")+1:], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, "go", "list", "-deps", tt.pkg).Output()
			require.NoError(t, err)
			deps := strings.Fields(string(out))
			var linked []string
			for _, name := range detect.Choosable() {
				if slices.Contains(deps, detect.Import(name)) {
					linked = append(linked, name)
				}
			}
			assert.Equal(t, tt.want, linked)
			if !slices.Contains(tt.want, detect.Kubernetes) {
				assert.False(t, slices.ContainsFunc(deps, func(p string) bool { return strings.HasPrefix(p, "k8s.io/client-go/") }), "client-go linked")
			}
		})
	}
}
