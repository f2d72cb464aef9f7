package docker

import (
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/strslice"
	"github.com/docker/go-connections/nat"
	"github.com/docker/go-units"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

func ptr[T any](v T) *T { return &v }

func TestContainerConfig(t *testing.T) {
	tests := []struct {
		name    string
		spec    runtime.RunSpec
		check   func(t *testing.T, cfg *container.Config, host *container.HostConfig, net *network.NetworkingConfig)
		wantErr string
	}{
		{
			name: "ImageOnlyKeepsImageDefaults",
			spec: runtime.RunSpec{Name: "c1", Image: "busybox:latest"},
			check: func(t *testing.T, cfg *container.Config, host *container.HostConfig, net *network.NetworkingConfig) {
				assert.Equal(t, "busybox:latest", cfg.Image)
				assert.Nil(t, cfg.Entrypoint)
				assert.Nil(t, cfg.Cmd)
				assert.Nil(t, cfg.Env)
				assert.Zero(t, host.Memory)
				assert.Zero(t, host.NanoCPUs)
				assert.Nil(t, host.PidsLimit)
				assert.Empty(t, host.NetworkMode)
				assert.Nil(t, net)
				assert.Empty(t, host.PortBindings)
			},
		},
		{
			name: "EnvIsSortedKeyValue",
			spec: runtime.RunSpec{Image: "i", Env: map[string]string{"B": "2", "A": "1=one", "EMPTY": ""}},
			check: func(t *testing.T, cfg *container.Config, _ *container.HostConfig, _ *network.NetworkingConfig) {
				assert.Equal(t, []string{"A=1=one", "B=2", "EMPTY="}, cfg.Env)
			},
		},
		{
			name: "EntrypointAndCommand",
			spec: runtime.RunSpec{Image: "i", Entrypoint: []string{"/bin/sh", "-c"}, Command: []string{"sleep 1"}},
			check: func(t *testing.T, cfg *container.Config, _ *container.HostConfig, _ *network.NetworkingConfig) {
				assert.Equal(t, []string{"/bin/sh", "-c"}, []string(cfg.Entrypoint))
				assert.Equal(t, []string{"sleep 1"}, []string(cfg.Cmd))
			},
		},
		{
			name: "EmptyEntrypointClearsTheImages",
			spec: runtime.RunSpec{Image: "i", Entrypoint: []string{}},
			check: func(t *testing.T, cfg *container.Config, _ *container.HostConfig, _ *network.NetworkingConfig) {
				assert.NotNil(t, cfg.Entrypoint)
				assert.Empty(t, cfg.Entrypoint)
			},
		},
		{
			name: "LabelsAndTmpfsAreCopied",
			spec: runtime.RunSpec{Image: "i", Labels: map[string]string{"a": "1", "b": ""}, Tmpfs: map[string]string{"/data": "rw,size=64m", "/tmp": ""}},
			check: func(t *testing.T, cfg *container.Config, host *container.HostConfig, _ *network.NetworkingConfig) {
				assert.Equal(t, map[string]string{"a": "1", "b": ""}, cfg.Labels)
				assert.Equal(t, map[string]string{"/data": "rw,size=64m", "/tmp": ""}, host.Tmpfs)
			},
		},
		{
			name: "Limits",
			spec: runtime.RunSpec{
				Image: "i", MemoryBytes: 512 << 20, CPUs: 1.5, PidsLimit: 100,
				Ulimits: []runtime.Ulimit{{Name: "nofile", Soft: 1024, Hard: 2048}},
			},
			check: func(t *testing.T, _ *container.Config, host *container.HostConfig, _ *network.NetworkingConfig) {
				assert.Equal(t, int64(512<<20), host.Memory)
				assert.Equal(t, int64(1_500_000_000), host.NanoCPUs)
				assert.Equal(t, ptr(int64(100)), host.PidsLimit)
				assert.Equal(t, []*units.Ulimit{{Name: "nofile", Soft: 1024, Hard: 2048}}, host.Ulimits)
			},
		},
		{
			name: "FractionalCPUsRoundToNano",
			spec: runtime.RunSpec{Image: "i", CPUs: 0.1},
			check: func(t *testing.T, _ *container.Config, host *container.HostConfig, _ *network.NetworkingConfig) {
				assert.Equal(t, int64(100_000_000), host.NanoCPUs)
			},
		},
		{
			name: "NetworkJoinsByName",
			spec: runtime.RunSpec{Image: "i", Network: "sbx-net"},
			check: func(t *testing.T, _ *container.Config, host *container.HostConfig, net *network.NetworkingConfig) {
				assert.Equal(t, container.NetworkMode("sbx-net"), host.NetworkMode)
				require.NotNil(t, net)
				assert.Contains(t, net.EndpointsConfig, "sbx-net")
			},
		},
		{
			name: "PortsDefaultToLoopbackAndEphemeral",
			spec: runtime.RunSpec{Image: "i", Ports: []runtime.PortSpec{
				{ContainerPort: 5432},
				{ContainerPort: 53, Protocol: "udp", HostIP: "0.0.0.0", HostPort: 5353},
			}},
			check: func(t *testing.T, cfg *container.Config, host *container.HostConfig, _ *network.NetworkingConfig) {
				assert.Equal(t, nat.PortSet{"5432/tcp": {}, "53/udp": {}}, cfg.ExposedPorts)
				assert.Equal(t, nat.PortMap{
					"5432/tcp": {{HostIP: "127.0.0.1", HostPort: ""}},
					"53/udp":   {{HostIP: "0.0.0.0", HostPort: "5353"}},
				}, host.PortBindings)
			},
		},
		{
			name: "NeverPrivilegedNoMounts",
			spec: runtime.RunSpec{Image: "i", Tmpfs: map[string]string{"/data": ""}},
			check: func(t *testing.T, _ *container.Config, host *container.HostConfig, _ *network.NetworkingConfig) {
				assert.False(t, host.Privileged)
				assert.Empty(t, host.Binds)
				assert.Empty(t, host.Mounts)
				assert.Empty(t, host.VolumesFrom)
				assert.Empty(t, host.CapAdd, "no capability unless the spec asks")
				assert.Equal(t, strslice.StrSlice{"ALL"}, host.CapDrop)
				assert.Empty(t, host.Devices)
			},
		},
		{
			name: "ConfinedToTheSpecsCapabilities",
			spec: runtime.RunSpec{Image: "i", Capabilities: []string{"setuid", "CHOWN"}},
			check: func(t *testing.T, _ *container.Config, host *container.HostConfig, _ *network.NetworkingConfig) {
				assert.Equal(t, strslice.StrSlice{"ALL"}, host.CapDrop, "every other capability is dropped")
				assert.Equal(t, strslice.StrSlice{"CAP_CHOWN", "CAP_SETUID"}, host.CapAdd)
				assert.Equal(t, []string{"no-new-privileges"}, host.SecurityOpt, "no-new-privileges, and no seccomp option over the daemon's default profile")
			},
		},
		{name: "NoImage", spec: runtime.RunSpec{Name: "c1"}, wantErr: "no image"},
		{name: "NegativeMemory", spec: runtime.RunSpec{Image: "i", MemoryBytes: -1}, wantErr: "negative limit"},
		{name: "BadProtocol", spec: runtime.RunSpec{Image: "i", Ports: []runtime.PortSpec{{ContainerPort: 80, Protocol: "icmp"}}}, wantErr: "neither tcp nor udp"},
		{name: "BadContainerPort", spec: runtime.RunSpec{Image: "i", Ports: []runtime.PortSpec{{ContainerPort: 0}}}, wantErr: "out of range"},
		{name: "UnnamedUlimit", spec: runtime.RunSpec{Image: "i", Ulimits: []runtime.Ulimit{{Soft: 1, Hard: 1}}}, wantErr: "ulimit without a name"},
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
			cfg, host, net := containerConfig(spec)
			tc.check(t, cfg, host, net)
		})
	}
}

func TestCheckLimits(t *testing.T) {
	asked := container.Resources{Memory: 64 << 20, NanoCPUs: 500_000_000, PidsLimit: ptr(int64(50))}
	tests := []struct {
		name     string
		asked    container.Resources
		got      container.Resources
		warnings []string
		wantErr  string
	}{
		{name: "AllKept", asked: asked, got: asked},
		{name: "NothingAsked", asked: container.Resources{}, got: container.Resources{}},
		{name: "SwapWarningIsNotADrop", asked: asked, got: asked, warnings: []string{"Your kernel does not support swap limit capabilities or the cgroup is not mounted. Memory limited without swap."}},
		{name: "MemoryDropped", asked: asked, got: container.Resources{NanoCPUs: asked.NanoCPUs, PidsLimit: asked.PidsLimit}, wantErr: "memory limit 67108864 bytes stored as 0"},
		{name: "CPUDropped", asked: asked, got: container.Resources{Memory: asked.Memory, PidsLimit: asked.PidsLimit}, wantErr: "CPU limit"},
		{name: "PidsDropped", asked: asked, got: container.Resources{Memory: asked.Memory, NanoCPUs: asked.NanoCPUs}, wantErr: "pids limit 50 stored as none"},
		{name: "DiscardWarning", asked: asked, got: asked, warnings: []string{"Your kernel does not support PIDs limit capabilities or the cgroup is not mounted. PIDs limit discarded."}, wantErr: "PIDs limit discarded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkLimits(tc.asked, &container.HostConfig{Resources: tc.got}, tc.warnings)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestRetryable(t *testing.T) {
	fixed := runtime.PortSpec{ContainerPort: 80, HostPort: 8080}
	ephemeral := runtime.PortSpec{ContainerPort: 81}
	tests := []struct {
		name  string
		ports []runtime.PortSpec
		taken int
		want  bool
	}{
		{name: "EphemeralTaken", ports: []runtime.PortSpec{ephemeral}, taken: 32768, want: true},
		{name: "UnnamedPortWithAnEphemeralOne", ports: []runtime.PortSpec{ephemeral}, want: true},
		{name: "OnlyFixedPorts", ports: []runtime.PortSpec{fixed}, taken: 8080},
		{name: "OnlyFixedPortsUnnamed", ports: []runtime.PortSpec{fixed}},
		{name: "FixedTakenBesideAnEphemeral", ports: []runtime.PortSpec{fixed, ephemeral}, taken: 8080},
		{name: "EphemeralTakenBesideAFixed", ports: []runtime.PortSpec{fixed, ephemeral}, taken: 32768, want: true},
		{name: "NoPorts", taken: 32768},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, retryable(tc.ports, tc.taken))
		})
	}
}
