package containerd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

func TestDiagnoseCNIPlugins(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	r, err := New(WithAddress("/nonexistent/containerd.sock"), WithCNIPluginDirs(first, second), WithStateDir(t.TempDir()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })

	cni := func(ds []runtime.Diagnostic) []runtime.Diagnostic {
		var out []runtime.Diagnostic
		for _, d := range ds {
			if d.Check == "cni-plugins" {
				out = append(out, d)
			}
		}
		return out
	}

	got := cni(r.Diagnose(t.Context()))
	require.Len(t, got, 1, "no plugin at all")
	assert.Contains(t, got[0].Problem, "bridge, host-local, portmap, firewall, loopback")
	assert.Contains(t, got[0].Problem, first, "names the directories it looked in")

	for _, p := range cniPlugins {
		dir := first
		if p == "loopback" {
			dir = second
		}
		if p != "portmap" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), 0o755))
		}
	}
	got = cni(r.Diagnose(t.Context()))
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Problem, "no CNI plugin portmap in")

	require.NoError(t, os.WriteFile(filepath.Join(first, "portmap"), []byte("#!/bin/sh\n"), 0o755))
	assert.Empty(t, cni(r.Diagnose(t.Context())), "every plugin found, across directories")
}

func TestDiagnoseRoot(t *testing.T) {
	r, err := New(WithAddress("/nonexistent/containerd.sock"), WithCNIPluginDirs(t.TempDir()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	var checks []string
	for _, d := range r.Diagnose(t.Context()) {
		checks = append(checks, d.Check)
	}
	if os.Geteuid() == 0 {
		assert.NotContains(t, checks, "root")
	} else {
		assert.Contains(t, checks, "root")
	}
}
