package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReportNamesTheFailedLeafTests runs a real failing test binary's -v
// output through the real test2json, as make ci does (it needs only the
// go tool, so it runs under -short too).
func TestReportNamesTheFailedLeafTests(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n\ngo 1.22\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x_test.go"), []byte(`package x
import "testing"
func TestOK(t *testing.T) { t.Log("fine") }
func TestParent(t *testing.T) {
	t.Run("good", func(t *testing.T) {})
	t.Run("bad", func(t *testing.T) { t.Log("the reason it failed"); t.Fail() })
}
`), 0o644))
	cmd := exec.Command("go", "test", "-count=1", "-v", ".")
	cmd.Dir = dir
	log, err := cmd.CombinedOutput()
	require.Error(t, err, "the test package fails: %s", log)

	conv := exec.Command("go", "tool", "test2json")
	conv.Stdin = bytes.NewReader(log)
	stream, err := conv.Output()
	require.NoError(t, err)

	var out bytes.Buffer
	require.NoError(t, report(bytes.NewReader(stream), &out, 40))
	assert.Contains(t, out.String(), "failed leaf tests: 1\n")
	assert.Contains(t, out.String(), "--- TestParent/bad")
	assert.Contains(t, out.String(), "the reason it failed")
	assert.NotContains(t, out.String(), "--- TestParent (")
	assert.NotContains(t, out.String(), "TestOK")
}

func TestLeafTests(t *testing.T) {
	assert.Equal(t, []string{"A/b", "C"}, leafTests([]string{"A/b", "A", "C", "C"}))
}
