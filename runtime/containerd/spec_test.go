package containerd

import (
	"math"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

func TestCommandLine(t *testing.T) {
	image := ocispec.ImageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"serve", "--flag"}}
	cases := []struct {
		name  string
		image ocispec.ImageConfig
		spec  runtime.RunSpec
		want  []string
	}{
		{name: "image's entrypoint and cmd", image: image, want: []string{"/entry", "serve", "--flag"}},
		{name: "command replaces cmd, keeps entrypoint", image: image, spec: runtime.RunSpec{Command: []string{"run"}}, want: []string{"/entry", "run"}},
		{name: "entrypoint drops the image's cmd", image: image, spec: runtime.RunSpec{Entrypoint: []string{"sh"}}, want: []string{"sh"}},
		{name: "entrypoint and command", image: image, spec: runtime.RunSpec{Entrypoint: []string{"sh"}, Command: []string{"-c", "x"}}, want: []string{"sh", "-c", "x"}},
		{name: "empty entrypoint runs the command alone", image: image, spec: runtime.RunSpec{Entrypoint: []string{}, Command: []string{"true"}}, want: []string{"true"}},
		{name: "nothing at all", want: []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, commandLine(tc.image, tc.spec))
		})
	}
}

func TestTmpfsMounts(t *testing.T) {
	got, err := tmpfsMounts(map[string]string{"/scratch/": "rw,size=16m, mode=1777", "/cache": ""})
	require.NoError(t, err)
	assert.Equal(t, []specs.Mount{
		{Destination: "/cache", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec"}},
		{Destination: "/scratch", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec", "rw", "size=16m", "mode=1777"}},
	}, got, "defaults first, the spec's options after (they win), in path order")

	_, err = tmpfsMounts(map[string]string{"relative": ""})
	assert.Error(t, err, "a relative path is refused")
}

func TestRlimit(t *testing.T) {
	cases := []struct {
		name     string
		ulimit   runtime.Ulimit
		want     *specs.POSIXRlimit
		wantKind error // nil: any error is fine when wantErr
		wantErr  bool
	}{
		{name: "nofile", ulimit: runtime.Ulimit{Name: "nofile", Soft: 1000, Hard: 2000}, want: &specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Soft: 1000, Hard: 2000}},
		{name: "case-insensitive", ulimit: runtime.Ulimit{Name: "NPROC", Soft: 1, Hard: 1}, want: &specs.POSIXRlimit{Type: "RLIMIT_NPROC", Soft: 1, Hard: 1}},
		{name: "-1 is unlimited", ulimit: runtime.Ulimit{Name: "core", Soft: -1, Hard: -1}, want: &specs.POSIXRlimit{Type: "RLIMIT_CORE", Soft: math.MaxUint64, Hard: math.MaxUint64}},
		{name: "unknown name is unsupported", ulimit: runtime.Ulimit{Name: "bogus", Soft: 1, Hard: 1}, wantErr: true, wantKind: runtime.ErrUnsupported},
		{name: "soft above hard", ulimit: runtime.Ulimit{Name: "nofile", Soft: 3, Hard: 2}, wantErr: true},
		{name: "negative", ulimit: runtime.Ulimit{Name: "nofile", Soft: -2, Hard: 2}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rlimit(tc.ulimit)
			if tc.wantErr {
				require.Error(t, err)
				if tc.wantKind != nil {
					assert.ErrorIs(t, err, tc.wantKind)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestCheckLimits(t *testing.T) {
	cases := []struct {
		name     string
		spec     runtime.RunSpec
		wantKind error
		wantErr  bool
	}{
		{name: "none"},
		{name: "all three", spec: runtime.RunSpec{MemoryBytes: 64 << 20, CPUs: 0.5, PidsLimit: 10}},
		{name: "negative memory", spec: runtime.RunSpec{MemoryBytes: -1}, wantErr: true},
		{name: "CPU quota below the kernel's minimum", spec: runtime.RunSpec{CPUs: 0.001}, wantErr: true, wantKind: runtime.ErrUnsupported},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkLimits(tc.spec)
			if !tc.wantErr {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			if tc.wantKind != nil {
				assert.ErrorIs(t, err, tc.wantKind)
			}
		})
	}
}
