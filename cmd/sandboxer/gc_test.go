package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/runtime"
)

// reportSweeps are two runtimes' sweeps with something in every list of
// a janitor.Report, two of a kind where order could go wrong.
func reportSweeps() []sweep {
	sb := func(name, engine, owner string, age time.Duration) janitor.Sandbox {
		return janitor.Sandbox{ID: "id-" + name, Name: name, Engine: engine, Owner: lifetime.Owner{Name: owner}, State: runtime.StateRunning, Status: "running", Age: age}
	}
	net := func(name, owner, why string, err error) janitor.Network {
		return janitor.Network{Name: name, Owner: lifetime.Owner{Name: owner}, Age: 2 * time.Hour, Why: why, Err: err}
	}
	return []sweep{
		{on: "docker", rep: janitor.Report{
			Removed:         []janitor.Sandbox{sb("sbx-pg-a", "postgres", "agent-a", 3*time.Hour), sb("sbx-redis-a", "redis", "agent-a", 3*time.Hour)},
			Vanished:        []janitor.Sandbox{sb("sbx-pg-v", "postgres", "agent-v", 90*time.Second)},
			Kept:            []janitor.Sandbox{sb("sbx-mongo-k", "mongo", "agent-k", 50*time.Hour)},
			Skipped:         []janitor.Sandbox{sb("sbx-pg-s", "postgres", "agent-s", 5*time.Second)},
			Errors:          []janitor.Failure{{Sandbox: sb("sbx-pg-e", "postgres", "agent-e", time.Hour), Err: errors.New("kill:\n  timed out")}},
			Adopted:         []janitor.Sandbox{sb("sbx-mongo-k", "mongo", "agent-k", 50*time.Hour)},
			NetworksRemoved: []janitor.Network{net("sbx-net-a", "agent-a", "", nil)},
			NetworksKept:    []janitor.Network{net("sbx-net-k", "agent-k", "owner alive", nil), net("sbx-net-e", "agent-e", "owner undecided", errors.New("inspect: down"))},
		}},
		{on: "podman (rootless Podman socket)", rep: janitor.Report{
			Removed: []janitor.Sandbox{sb("sbx-pg-b", "postgres", "agent-b", 4*time.Minute)},
			Kept:    []janitor.Sandbox{sb("sbx-redis-l", "redis", "agent-l", 4*time.Minute)},
			Errors:  []janitor.Failure{{Sandbox: sb("sbx-redis-e", "redis", "", time.Minute), Err: errors.New("no owner label")}},
		}},
	}
}

// golden compares got with testdata/name; SANDBOXER_UPDATE_GOLDEN=1
// rewrites the file instead.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if os.Getenv("SANDBOXER_UPDATE_GOLDEN") == "1" {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "%s (SANDBOXER_UPDATE_GOLDEN=1 rewrites it)", path)
}

// TestGCReportText: the text report lists the sandboxes list by list
// (removed or would remove, vanished, kept, skipped, adopted, errors),
// each list across the runtimes in sweep order, then the owner networks
// alike, then the summary line.
func TestGCReportText(t *testing.T) {
	for _, dryRun := range []bool{false, true} {
		var buf bytes.Buffer
		writeReport(&buf, reportSweeps(), dryRun)
		golden(t, fmt.Sprintf("gc-report-dry-run-%t.txt", dryRun), buf.Bytes())
	}
}

// TestGCReportJSON: the JSON report holds every list of every sweep, each
// entry with its runtime, in sweep order; a sweep of nothing has every
// list as [], never null.
func TestGCReportJSON(t *testing.T) {
	for name, sweeps := range map[string][]sweep{"gc-report.json": reportSweeps(), "gc-report-empty.json": nil} {
		var buf bytes.Buffer
		require.NoError(t, writeJSON(&buf, gcJSON(sweeps, false)))
		golden(t, name, buf.Bytes())
	}
}
