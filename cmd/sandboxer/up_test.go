package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCPUsFlagRefusesWhatIsNoNumberOfCores: --cpus NaN, ±Inf or an absurd
// count (which would pass a "> 0" check and become MinInt64 quotas) is
// exit 2 with the rule, before any runtime is contacted (none answers
// here), for every command that provisions.
func TestCPUsFlagRefusesWhatIsNoNumberOfCores(t *testing.T) {
	commands := [][]string{
		{"up", "--owner", "1", "-s", "redis"},
		{"run", "-s", "redis", "--", "true"},
		{"spawn", "--owner", "1", "--services-json", `["redis"]`},
	}
	for _, v := range []string{"NaN", "nan", "+Inf", "Inf", "1e300", "8193"} {
		for _, cmd := range commands {
			t.Run(v+"/"+cmd[0], func(t *testing.T) {
				code, _, stderr := mainInProcess(t, map[string]string{"ROBOCO_SANDBOX_DB_ENABLED": "1"}, append([]string{"--cpus", v}, cmd...)...)
				assert.Equal(t, ExitUsage, code, stderr)
				assert.Contains(t, stderr, "invalid cpus")
				assert.Contains(t, stderr, "must be a positive number of cores, at most 8192")
				assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
			})
		}
	}
}

// TestEnvFileWriterDiscard: Discard removes the file Commit moved into
// place, and never a file the writer did not write (an existing one,
// before Commit), whatever Abort did first.
func TestEnvFileWriterDiscard(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sandbox.env")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))

	w, err := newEnvFile(path)
	require.NoError(t, err)
	w.Abort()
	w.Discard()
	data, err := os.ReadFile(path)
	require.NoError(t, err, "not committed: the existing file stays")
	assert.Equal(t, "old", string(data))

	w, err = newEnvFile(path)
	require.NoError(t, err)
	require.NoError(t, w.Commit([]byte("K=v\n")))
	w.Abort()
	w.Discard()
	assertNoFiles(t, dir)
}
