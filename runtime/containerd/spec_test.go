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
	got := tmpfsMounts(map[string]string{"/scratch/": "rw,size=16m, mode=1777", "/cache": ""})
	assert.Equal(t, []specs.Mount{
		{Destination: "/cache", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec"}},
		{Destination: "/scratch", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec", "rw", "size=16m", "mode=1777"}},
	}, got, "defaults first, the spec's options after (they win), in path order")
}

func TestRlimit(t *testing.T) {
	cases := []struct {
		name   string
		ulimit runtime.Ulimit
		want   *specs.POSIXRlimit
	}{
		{name: "nofile", ulimit: runtime.Ulimit{Name: "nofile", Soft: 1000, Hard: 2000}, want: &specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Soft: 1000, Hard: 2000}},
		{name: "short name from any spelling", ulimit: runtime.Ulimit{Name: "RLIMIT_NPROC", Soft: 1, Hard: 1}, want: &specs.POSIXRlimit{Type: "RLIMIT_NPROC", Soft: 1, Hard: 1}},
		{name: "-1 is unlimited", ulimit: runtime.Ulimit{Name: "core", Soft: -1, Hard: -1}, want: &specs.POSIXRlimit{Type: "RLIMIT_CORE", Soft: math.MaxUint64, Hard: math.MaxUint64}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// What create does: the port's rules first, then the mapping.
			spec, err := runtime.RunSpec{Image: "i", Ulimits: []runtime.Ulimit{tc.ulimit}}.Normalize()
			require.NoError(t, err)
			assert.Equal(t, tc.want, rlimit(spec.Ulimits[0]))
		})
	}
	for _, name := range runtime.UlimitNames {
		assert.Contains(t, rlimits, name, "every ulimit the port accepts has a kernel name here")
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
