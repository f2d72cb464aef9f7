package conformance

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// testLimitsRefusedWhereUnenforceable is MemoryCPUPidsLimitsInCgroup on a
// rootless runtime on cgroup v1, which has no cgroup of its own to put
// limits in: each limit alone is refused as runtime.ErrUnenforceableLimits
// (an ErrUnsupported), by
// Run and by Create, with an error that names the runtime and the
// container, and nothing is left behind; the same spec without limits
// runs. (A limit is never dropped silently: the adapters' explicit
// opt-outs, such as podman.WithUnenforcedLimits, are the caller's to
// choose.)
func testLimitsRefusedWhereUnenforceable(t *testing.T, s *suite) {
	ctx := testContext(t)
	t.Logf("%s is rootless on cgroup v%s: limits cannot be enforced", s.rt.Name(), s.info.CgroupVersion)
	cases := []struct {
		name   string
		modify func(*runtime.RunSpec)
	}{
		{"Memory", func(r *runtime.RunSpec) { r.MemoryBytes = 64 << 20 }},
		{"CPUs", func(r *runtime.RunSpec) { r.CPUs = 0.5 }},
		{"Pids", func(r *runtime.RunSpec) { r.PidsLimit = 64 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := s.spec(t)
			tc.modify(&spec)
			s.track(t, spec.Name)
			_, err := s.rt.Run(ctx, spec)
			require.ErrorIs(t, err, runtime.ErrUnenforceableLimits, "run")
			assert.Contains(t, err.Error(), s.rt.Name(), "the error names the runtime")
			assert.Contains(t, err.Error(), spec.Name, "the error names the container")
			_, err = s.rt.Create(ctx, spec)
			require.ErrorIs(t, err, runtime.ErrUnenforceableLimits, "create")
			_, err = s.rt.Inspect(ctx, spec.Name)
			assert.ErrorIs(t, err, runtime.ErrNotFound, "nothing was made")
			left, err := s.rt.List(ctx, map[string]string{testLabel: t.Name()})
			require.NoError(t, err)
			assert.Empty(t, left, "nothing was made")
		})
	}
	t.Run("WithoutLimitsRuns", func(t *testing.T) {
		spec := s.spec(t)
		c := s.run(t, ctx, spec)
		assert.Equal(t, spec.Name, c.Name)
	})
}
