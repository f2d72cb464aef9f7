package podman

import (
	"encoding/json"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// serviceHere are hard limits like those of the service on the test VM
// (no CAP_SYS_RESOURCE: nofile 20000, nproc 32768).
var serviceHere = map[string]uint64{"nofile": 20000, "nproc": 32768, "memlock": 8 << 20}

func TestSpecFor(t *testing.T) {
	tests := []struct {
		name     string
		spec     runtime.RunSpec
		limits   map[string]uint64
		lifetime time.Duration
		check    func(t *testing.T, sg *specGenerator, clamped []string)
		wantErr  string
	}{
		{
			name: "ImageOnlyKeepsImageDefaults",
			spec: runtime.RunSpec{Name: "c1", Image: "busybox:latest"},
			check: func(t *testing.T, sg *specGenerator, _ []string) {
				assert.Equal(t, "c1", sg.Name)
				assert.Equal(t, "busybox:latest", sg.Image)
				assert.Nil(t, sg.Entrypoint)
				assert.Nil(t, sg.Command)
				assert.Nil(t, sg.Env)
				assert.Nil(t, sg.ResourceLimits)
				assert.Nil(t, sg.Mounts)
				assert.Equal(t, namespace{NSMode: "bridge"}, sg.NetNS, "the service's default network")
				assert.Nil(t, sg.Networks)
				assert.Nil(t, sg.PortMappings)
				assert.Zero(t, sg.Timeout)
				assert.False(t, sg.Privileged)
				assert.False(t, sg.HTTPProxy, "the service's proxy settings stay out")
			},
		},
		{
			name: "EnvEntrypointCommandLabels",
			spec: runtime.RunSpec{
				Image:      "i",
				Env:        map[string]string{"A": "1=one", "EMPTY": ""},
				Entrypoint: []string{"/bin/sh", "-c"},
				Command:    []string{"sleep 1"},
				Labels:     map[string]string{"k": " v "},
			},
			check: func(t *testing.T, sg *specGenerator, _ []string) {
				assert.Equal(t, map[string]string{"A": "1=one", "EMPTY": ""}, sg.Env)
				assert.Equal(t, []string{"/bin/sh", "-c"}, sg.Entrypoint)
				assert.Equal(t, []string{"sleep 1"}, sg.Command)
				assert.Equal(t, map[string]string{"k": " v "}, sg.Labels)
			},
		},
		{
			name: "EmptyEntrypointClearsTheImages",
			spec: runtime.RunSpec{Image: "i", Entrypoint: []string{}},
			check: func(t *testing.T, sg *specGenerator, _ []string) {
				assert.Equal(t, []string{""}, sg.Entrypoint, `libpod's spelling of "no entrypoint"`)
			},
		},
		{
			name: "TmpfsOptionsSplitInPathOrder",
			spec: runtime.RunSpec{Image: "i", Tmpfs: map[string]string{"/scratch": "rw, size=16m ,mode=750", "/cache": ""}},
			check: func(t *testing.T, sg *specGenerator, _ []string) {
				assert.Equal(t, []mountSpec{
					{Destination: "/cache", Type: "tmpfs", Source: "tmpfs"},
					{Destination: "/scratch", Type: "tmpfs", Source: "tmpfs", Options: []string{"rw", "size=16m", "mode=750"}},
				}, sg.Mounts)
			},
		},
		{
			name:    "RelativeTmpfsPath",
			spec:    runtime.RunSpec{Image: "i", Tmpfs: map[string]string{"data": ""}},
			wantErr: `tmpfs path "data" is not absolute`,
		},
		{
			name: "LimitsAsCgroupValues",
			spec: runtime.RunSpec{Image: "i", MemoryBytes: 512 << 20, CPUs: 1.5, PidsLimit: 100},
			check: func(t *testing.T, sg *specGenerator, _ []string) {
				require.NotNil(t, sg.ResourceLimits)
				assert.Equal(t, &memoryLimits{Limit: 512 << 20}, sg.ResourceLimits.Memory)
				assert.Equal(t, &cpuLimits{Quota: 150_000, Period: 100_000}, sg.ResourceLimits.CPU)
				assert.Equal(t, &pidsLimits{Limit: 100}, sg.ResourceLimits.Pids)
			},
		},
		{
			name: "OnlyTheLimitsAskedFor",
			spec: runtime.RunSpec{Image: "i", CPUs: 0.25},
			check: func(t *testing.T, sg *specGenerator, _ []string) {
				require.NotNil(t, sg.ResourceLimits)
				assert.Nil(t, sg.ResourceLimits.Memory)
				assert.Nil(t, sg.ResourceLimits.Pids)
				assert.Equal(t, &cpuLimits{Quota: 25_000, Period: 100_000}, sg.ResourceLimits.CPU)
			},
		},
		{
			name:    "NegativeLimit",
			spec:    runtime.RunSpec{Image: "i", MemoryBytes: -1},
			wantErr: "negative limit",
		},
		{
			name: "NetworkByName",
			spec: runtime.RunSpec{Image: "i", Network: "sbx-net"},
			check: func(t *testing.T, sg *specGenerator, _ []string) {
				assert.Equal(t, map[string]perNetworkOptions{"sbx-net": {}}, sg.Networks)
				assert.Equal(t, "bridge", sg.NetNS.NSMode)
			},
		},
		{
			name: "PortsDefaultToLoopbackTCPEphemeral",
			spec: runtime.RunSpec{Image: "i", Ports: []runtime.PortSpec{
				{ContainerPort: 5432},
				{ContainerPort: 53, Protocol: "UDP", HostIP: "0.0.0.0", HostPort: 5353},
			}},
			check: func(t *testing.T, sg *specGenerator, _ []string) {
				assert.Equal(t, []portMapping{
					{HostIP: "127.0.0.1", ContainerPort: 5432, HostPort: 0, Range: 1, Protocol: "tcp"},
					{HostIP: "0.0.0.0", ContainerPort: 53, HostPort: 5353, Range: 1, Protocol: "udp"},
				}, sg.PortMappings)
			},
		},
		{
			name:    "BadProtocol",
			spec:    runtime.RunSpec{Image: "i", Ports: []runtime.PortSpec{{ContainerPort: 1, Protocol: "sctp"}}},
			wantErr: `protocol "sctp"`,
		},
		{
			name:    "ContainerPortOutOfRange",
			spec:    runtime.RunSpec{Image: "i", Ports: []runtime.PortSpec{{ContainerPort: 70000}}},
			wantErr: "container port 70000 out of range",
		},
		{
			name:     "LifetimeRoundsUpToSeconds",
			spec:     runtime.RunSpec{Image: "i"},
			lifetime: 1500 * time.Millisecond,
			check: func(t *testing.T, sg *specGenerator, _ []string) {
				assert.Equal(t, uint(2), sg.Timeout)
			},
		},
		{
			name:    "NoImage",
			spec:    runtime.RunSpec{Name: "c1"},
			wantErr: "no image given",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// What create does: the port's rules first, then the mapping.
			spec, err := tc.spec.Normalize()
			if tc.wantErr != "" {
				require.ErrorIs(t, err, runtime.ErrInvalid)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			sg, clamped := specFor(spec, tc.limits, tc.lifetime)
			tc.check(t, sg, clamped)
		})
	}
}

// TestSpecGeneratorJSON pins the wire names libpod reads.
func TestSpecGeneratorJSON(t *testing.T) {
	spec, err := runtime.RunSpec{
		Name: "c1", Image: "i", Network: "n", MemoryBytes: 1 << 20, CPUs: 1, PidsLimit: 5,
		Tmpfs:        map[string]string{"/t": "size=1m"},
		Ulimits:      []runtime.Ulimit{{Name: "nofile", Soft: 10, Hard: 20}},
		Ports:        []runtime.PortSpec{{ContainerPort: 80}},
		Capabilities: []string{"setuid", "CHOWN"},
	}.Normalize()
	require.NoError(t, err)
	sg, _ := specFor(spec, nil, 3*time.Second)
	b, err := json.Marshal(sg)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"name": "c1", "image": "i", "httpproxy": false, "privileged": false,
		"cap_drop": ["ALL"], "cap_add": ["CAP_CHOWN", "CAP_SETUID"], "no_new_privileges": true,
		"mounts": [{"destination": "/t", "type": "tmpfs", "source": "tmpfs", "options": ["size=1m"]}],
		"resource_limits": {"memory": {"limit": 1048576}, "cpu": {"quota": 100000, "period": 100000}, "pids": {"limit": 5}},
		"r_limits": [{"type": "nofile", "soft": 10, "hard": 20}],
		"netns": {"nsmode": "bridge"},
		"Networks": {"n": {}},
		"portmappings": [{"host_ip": "127.0.0.1", "container_port": 80, "host_port": 0, "range": 1, "protocol": "tcp"}],
		"timeout": 3
	}`, string(b))
}

func TestRlimitsFor(t *testing.T) {
	tests := []struct {
		name        string
		ulimits     []runtime.Ulimit
		limits      map[string]uint64
		want        []rlimitSpec
		wantClamped int
		wantErr     string
	}{
		{
			name:   "NoneAskedSetsNofileAndNprocToWhatTheServiceCanGrant",
			limits: serviceHere,
			want:   []rlimitSpec{{Type: "nofile", Soft: 20000, Hard: 20000}, {Type: "nproc", Soft: 32768, Hard: 32768}},
		},
		{
			name:   "AServiceAbovePodmansDefaultGetsTheDefault",
			limits: map[string]uint64{"nofile": 1 << 30, "nproc": 1 << 30},
			want:   []rlimitSpec{{Type: "nofile", Soft: 1 << 20, Hard: 1 << 20}, {Type: "nproc", Soft: 1 << 20, Hard: 1 << 20}},
		},
		{
			name: "UnknownServiceLimitsLeavePodmansDefaults",
			want: nil,
		},
		{
			name:    "WithinTheServiceLimitsAsAsked",
			ulimits: []runtime.Ulimit{{Name: "nofile", Soft: 1000, Hard: 2000}, {Name: "nproc", Soft: 300, Hard: 600}},
			limits:  serviceHere,
			want:    []rlimitSpec{{Type: "nofile", Soft: 1000, Hard: 2000}, {Type: "nproc", Soft: 300, Hard: 600}},
		},
		{
			name:        "AboveTheServiceLimitsClamped",
			ulimits:     []runtime.Ulimit{{Name: "nofile", Soft: 65536, Hard: 65536}, {Name: "RLIMIT_MEMLOCK", Soft: -1, Hard: -1}},
			limits:      serviceHere,
			want:        []rlimitSpec{{Type: "nofile", Soft: 20000, Hard: 20000}, {Type: "memlock", Soft: 8 << 20, Hard: 8 << 20}, {Type: "nproc", Soft: 32768, Hard: 32768}},
			wantClamped: 2,
		},
		{
			name:    "SoftBelowAClampedHardIsKept",
			ulimits: []runtime.Ulimit{{Name: "nofile", Soft: 1024, Hard: 1 << 20}},
			limits:  serviceHere,
			want:    []rlimitSpec{{Type: "nofile", Soft: 1024, Hard: 20000}, {Type: "nproc", Soft: 32768, Hard: 32768}},

			wantClamped: 1,
		},
		{
			name:    "UnlimitedWithoutKnownLimits",
			ulimits: []runtime.Ulimit{{Name: "core", Soft: -1, Hard: -1}},
			want:    []rlimitSpec{{Type: "core", Soft: math.MaxUint64, Hard: math.MaxUint64}},
		},
		{
			name:    "UnknownName",
			ulimits: []runtime.Ulimit{{Name: "files", Soft: 1, Hard: 1}},
			wantErr: `unknown ulimit "files"`,
		},
		{
			name:    "Twice",
			ulimits: []runtime.Ulimit{{Name: "nofile", Soft: 1, Hard: 1}, {Name: "NOFILE", Soft: 2, Hard: 2}},
			wantErr: "given twice",
		},
		{
			name:    "SoftAboveHard",
			ulimits: []runtime.Ulimit{{Name: "nofile", Soft: 3, Hard: 2}},
			wantErr: "soft limit 3 above hard limit 2",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := runtime.RunSpec{Image: "i", Ulimits: tc.ulimits}.Normalize()
			if tc.wantErr != "" {
				require.ErrorIs(t, err, runtime.ErrInvalid)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			got, clamped := rlimitsFor(spec.Ulimits, tc.limits)
			assert.Equal(t, tc.want, got)
			assert.Len(t, clamped, tc.wantClamped, "clamped: %q", clamped)
		})
	}
}

func TestCheckLimits(t *testing.T) {
	asked := &resourceLimits{
		Memory: &memoryLimits{Limit: 64 << 20},
		CPU:    &cpuLimits{Quota: 50_000, Period: 100_000},
		Pids:   &pidsLimits{Limit: 64},
	}
	tests := []struct {
		name     string
		asked    *resourceLimits
		got      *hostConfig
		warnings []string
		wantErr  string
	}{
		{name: "NothingAsked", got: &hostConfig{}},
		{name: "AllKeptAsQuota", asked: asked, got: &hostConfig{Memory: 64 << 20, CPUQuota: 50_000, CPUPeriod: 100_000, PidsLimit: 64}},
		{name: "AllKeptAsNanoCPUs", asked: asked, got: &hostConfig{Memory: 64 << 20, NanoCPUs: 500_000_000, PidsLimit: 64}},
		{name: "MemoryDropped", asked: asked, got: &hostConfig{CPUQuota: 50_000, CPUPeriod: 100_000, PidsLimit: 64}, wantErr: "memory limit 67108864 bytes stored as 0"},
		{name: "CPUDropped", asked: asked, got: &hostConfig{Memory: 64 << 20, PidsLimit: 64}, wantErr: "CPU limit 0.5 stored as 0"},
		{name: "PidsDropped", asked: asked, got: &hostConfig{Memory: 64 << 20, NanoCPUs: 500_000_000}, wantErr: "pids limit 64 stored as 0"},
		{
			name:     "RootlessCgroupV1Warning",
			asked:    asked,
			got:      &hostConfig{Memory: 64 << 20, NanoCPUs: 500_000_000, PidsLimit: 64},
			warnings: []string{"Resource limits are not supported and ignored on cgroups V1 rootless systems"},
			wantErr:  "ignored on cgroups V1 rootless",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkLimits(tc.asked, tc.got, tc.warnings)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestCheckEnforceable(t *testing.T) {
	limited := runtime.RunSpec{Image: "i", MemoryBytes: 1 << 20}
	tests := []struct {
		name    string
		svc     service
		spec    runtime.RunSpec
		opts    []Option
		wantErr string
	}{
		{name: "RootfulCgroupV1", svc: service{cgroupV1: true}, spec: limited},
		{name: "RootlessCgroupV2", svc: service{rootless: true}, spec: limited},
		{name: "RootlessCgroupV1WithoutLimits", svc: service{rootless: true, cgroupV1: true}, spec: runtime.RunSpec{Image: "i"}},
		{name: "RootlessCgroupV1WithLimits", svc: service{rootless: true, cgroupV1: true}, spec: limited, wantErr: "rootless Podman on cgroup v1"},
		{name: "RootlessCgroupV1OptedOut", svc: service{rootless: true, cgroupV1: true}, spec: limited, opts: []Option{WithUnenforcedLimits()}},
		{name: "RootlessCgroupV2Delegated", svc: service{rootless: true, controllers: []string{"cpu", "memory", "pids"}}, spec: limited},
		{name: "RootlessCgroupV2MemoryNotDelegated", svc: service{rootless: true, controllers: []string{"cpu", "pids"}}, spec: limited, wantErr: "no memory cgroup controller delegated (it has: cpu pids)"},
		{name: "RootlessCgroupV2CPUNotDelegated", svc: service{rootless: true, controllers: []string{"memory", "pids"}}, spec: runtime.RunSpec{Image: "i", MemoryBytes: 1 << 20, CPUs: 0.5}, wantErr: "no cpu cgroup controller"},
		{name: "RootlessCgroupV2NothingDelegatedNoLimits", svc: service{rootless: true, controllers: []string{}}, spec: runtime.RunSpec{Image: "i"}},
		{name: "RootfulCgroupV2NoControllersListed", svc: service{controllers: []string{}}, spec: limited},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]Option{WithHost("unix:///nonexistent.sock"), WithLogger(slog.New(slog.DiscardHandler))}, tc.opts...)
			r, err := New(opts...)
			require.NoError(t, err)
			err = r.checkEnforceable(t.Context(), &tc.svc, tc.spec)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}
