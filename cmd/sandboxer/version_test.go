package main

import (
	"encoding/json"
	goruntime "runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadVersionFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.6",
		Main:      debug.Module{Path: "github.com/roboco/sandboxer", Version: "v0.3.1"},
		Settings: []debug.BuildSetting{
			{Key: "CGO_ENABLED", Value: "0"},
			{Key: "GOARCH", Value: "arm64"},
			{Key: "GOOS", Value: "linux"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-12-01T20:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	v := readVersion(bi, true)
	assert.Equal(t, versionInfo{
		Module: "github.com/roboco/sandboxer", Version: "v0.3.1",
		Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-12-01T20:00:00Z", Modified: true,
		Go: "go1.26.6", Platform: "linux/arm64", CGO: false,
	}, v)
	assert.Equal(t, "sandboxer v0.3.1 (revision 0123456789abcdef0123456789abcdef01234567, modified, 2026-12-01T20:00:00Z) go1.26.6 linux/arm64", v.String())

	bare := readVersion(nil, false)
	assert.Equal(t, "unknown", bare.Version)
	assert.Equal(t, goruntime.Version(), bare.Go)
	assert.Equal(t, goruntime.GOOS+"/"+goruntime.GOARCH, bare.Platform)
	assert.Equal(t, "sandboxer unknown "+goruntime.Version()+" "+bare.Platform, bare.String())
}

// TestVersionCommandReportsThisBinary: `sandboxer version` prints this
// (test) binary's own build info, and contacts no runtime (the hermetic
// environment has none).
func TestVersionCommandReportsThisBinary(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	require.True(t, ok)
	code, out, errOut := mainInProcess(t, nil, "version")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, readVersion(bi, true).String()+"\n", out)
	assert.Contains(t, out, goruntime.Version())

	code, out, errOut = mainInProcess(t, nil, "version", "--format", "json")
	require.Equal(t, 0, code, errOut)
	var v versionInfo
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	assert.Equal(t, bi.Main.Path, v.Module)
	assert.Equal(t, goruntime.Version(), v.Go)

	code, _, errOut = mainInProcess(t, nil, "version", "--format", "yaml")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `--format "yaml"`)
}
