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

// TestCLILinksEveryRuntime: the CLI program (not only this test binary,
// which links them through internal/testruntimes too) links every
// adapter, as the go tool reads its imports, so each runtime detection may
// find is one it can use.
func TestCLILinksEveryRuntime(t *testing.T) {
	assert.Equal(t, detect.Choosable(), detect.Linked())
	if testing.Short() {
		t.Skip("runs go list")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-deps", "github.com/roboco/sandboxer/cmd/sandboxer").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	for _, name := range detect.Choosable() {
		assert.True(t, slices.Contains(deps, detect.Import(name)), "the CLI does not link %s", detect.Import(name))
	}
}
