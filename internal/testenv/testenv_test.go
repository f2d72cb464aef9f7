package testenv

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRequired(t *testing.T) {
	tests := []struct {
		env     string
		runtime string
		want    bool
	}{
		{"", "docker", false},
		{"", AnyRuntime, false},
		{"docker", "docker", true},
		{"docker", "podman", false},
		{"docker,podman", "podman", true},
		{"docker podman", "podman", true},
		{" docker , containerd ", "containerd", true},
		{"all", "containerd", true},
		{"docker", AnyRuntime, true},
		{"all", AnyRuntime, true},
		{"dockerd", "docker", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%s", tt.env, tt.runtime), func(t *testing.T) {
			t.Setenv(EnvRequire, tt.env)
			assert.Equal(t, tt.want, Required(tt.runtime))
		})
	}
}

// endedTB records how Unavailable ends a test instead of ending it (its
// Skipf and Fatalf return).
type endedTB struct {
	testing.TB
	name            string
	skipped, failed string
}

func (e *endedTB) Helper()                       {}
func (e *endedTB) Name() string                  { return e.name }
func (e *endedTB) Skipf(format string, a ...any) { e.skipped = fmt.Sprintf(format, a...) }
func (e *endedTB) Fatalf(format string, a ...any) {
	e.failed = fmt.Sprintf(format, a...)
}

func TestUnavailablePrintsAMarker(t *testing.T) {
	tests := []struct {
		name       string
		require    string
		wantMarker string
		wantFailed bool
	}{
		{"NotRequiredSkips", "podman", "SANDBOXER-SKIPPED runtime=docker test=TestX/y\n", false},
		{"RequiredFails", "docker", "SANDBOXER-REQUIRED-SKIPPED runtime=docker test=TestX/y\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvRequire, tt.require)
			var out bytes.Buffer
			saved := markers
			markers = &out
			t.Cleanup(func() { markers = saved })
			tb := &endedTB{name: "TestX/y"}
			Unavailable(tb, "docker", "daemon down: %s", "refused")
			assert.Equal(t, tt.wantMarker, out.String())
			if tt.wantFailed {
				assert.Equal(t, "docker is required (SANDBOXER_REQUIRE) but unavailable: daemon down: refused", tb.failed)
				assert.Empty(t, tb.skipped)
				return
			}
			assert.Equal(t, "docker unavailable: daemon down: refused", tb.skipped)
			assert.Empty(t, tb.failed)
		})
	}
}
