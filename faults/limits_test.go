package faults

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// TestCLILimitsReachTheCgroup: `sandboxer --memory 256m --cpus 0.5 up`
// gives the sandbox exactly those limits, not the defaults (512 MiB, one
// CPU), as the kernel holds them in the container's own cgroup files
// (memory.limit_in_bytes, cpu.cfs_quota_us / cpu.cfs_period_us on cgroup
// v1), read inside the container, on every runtime. The provisioner's
// TestImageOverrides asks for the same values of a fake runtime.
func TestCLILimitsReachTheCgroup(t *testing.T) {
	const (
		memory = 256 << 20
		cpus   = 0.5
	)
	require.NotEqual(t, int64(memory), provision.DefaultMemoryBytes, "a value other than the default")
	require.NotEqual(t, cpus, provision.DefaultCPUs, "a value other than the default")
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := testruntimes.NewWorld(t, b)
		ctx := testkit.Context(t, 5*time.Minute)
		e.Warm()
		var env []string
		for name, ref := range e.Images {
			env = append(env, provision.ImageEnvName(name)+"="+ref)
		}
		global := append(slices.Clone(b.CLIFlags), "--label-prefix", e.Prefix)
		owner := e.Owner("limits")

		info, err := b.RT.Version(ctx)
		require.NoError(t, err)
		if info.Rootless && info.CgroupVersion == "1" {
			// The kernel cannot hold these limits for a rootless runtime on
			// cgroup v1: without the opt-out `up` refuses (exit 4) rather
			// than run unlimited, and leaves nothing (the conformance suite
			// asserts the refusal at the port).
			strict := slices.DeleteFunc(slices.Clone(global), func(f string) bool { return f == "--unenforced-limits" })
			up := runCLI(ctx, t, env, append(strict, "--memory", "256m", "--cpus", "0.5", "up", "--owner", owner, "--services", "redis")...)
			assert.Equal(t, 4, up.code, "stderr: %s", up.stderr)
			assert.Contains(t, up.stderr, "cannot enforce")
			assert.Empty(t, e.SandboxNames(ctx), "nothing left by the refused up")
			return
		}

		up := runCLI(ctx, t, env, append(global, "--memory", "256m", "--cpus", "0.5", "up", "--owner", owner, "--services", "redis")...)
		require.Equal(t, 0, up.code, "stderr: %s", up.stderr)
		sandboxes := e.Sandboxes(ctx)
		require.Len(t, sandboxes, 1, "up made one sandbox")

		got := testkit.ReadCgroupLimits(t, func(path string) (string, bool) {
			res, err := b.RT.Exec(ctx, sandboxes[0].ID, runtime.ExecSpec{Cmd: []string{"cat", path}})
			require.NoError(t, err, "cat %s inside the sandbox", path)
			return string(res.Stdout), res.ExitCode == 0
		})
		assert.Equal(t, int64(memory), got.Memory, "memory limit (cgroup %s)", got.Version)
		assert.InDelta(t, cpus, got.CPUs, 0.001, "CPU quota/period (cgroup %s)", got.Version)

		down := runCLI(ctx, t, env, append(global, "down", "--owner", owner)...)
		assert.Equal(t, 0, down.code, "stderr: %s", down.stderr)
		assert.Empty(t, e.SandboxNames(ctx), "down removed the sandbox")
	})
}
