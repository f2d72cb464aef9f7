package faults

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime/containerd"
)

// TestSandboxesRunConfined: every sandbox Provision makes, warm and cold,
// runs under the runtime's default seccomp filter, with no_new_privs, and
// with its engine's capabilities (engines.Spec.Capabilities) as its
// bounding set, never NET_RAW or SYS_ADMIN, as /proc/1/status and the
// exec's own /proc/self/status read through the runtime's own CLI (docker
// exec, podman --url exec, as the rootless service's user on the rootless
// row, ctr tasks exec) show; and each engine, so confined, still started,
// got ready and lets its real client log in.
func TestSandboxesRunConfined(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := testruntimes.NewWorld(t, b)
		ctx := testkit.Context(t, 8*time.Minute)
		e.Warm()
		for _, mode := range []provision.Warm{provision.WarmAuto, provision.WarmOff} {
			t.Run("Warm="+string(mode), func(t *testing.T) {
				p := e.Provisioner(func(o *provision.Options) { o.Warm = mode })
				owner := e.Owner("confined")
				sb, err := p.Provision(ctx, owner, allEngines)
				require.NoError(t, err)
				t.Cleanup(func() {
					cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					_, _ = p.Teardown(cctx, owner)
				})
				require.Len(t, sb.Containers, len(allEngines))
				for _, c := range sb.Containers {
					t.Run(c.Engine, func(t *testing.T) {
						eng, ok := engines.Default.Lookup(c.Engine)
						require.True(t, ok)
						want := testkit.CapabilityMask(t, eng.Spec().Capabilities...)
						require.NotZero(t, want, "control: %s declares the capabilities its entrypoint needs", c.Engine)
						forbidden := testkit.CapabilityMask(t, "NET_RAW", "SYS_ADMIN")
						for _, proc := range []string{"1", "self"} {
							st := testkit.ParseProcStatus(t, ownExec(t, ctx, b, c.ID, "cat", "/proc/"+proc+"/status"))
							assert.Equal(t, 2, st.Seccomp, "/proc/%s/status: Seccomp (2: the runtime's default filter)", proc)
							assert.Equal(t, 1, st.NoNewPrivs, "/proc/%s/status: NoNewPrivs", proc)
							assert.Equal(t, testkit.CapabilityNames(want), testkit.CapabilityNames(st.CapBnd), "/proc/%s/status: CapBnd is the engine's capabilities", proc)
							assert.Zero(t, st.CapEff&^st.CapBnd, "/proc/%s/status: CapEff within CapBnd", proc)
							assert.Zero(t, (st.CapEff|st.CapBnd|st.CapPrm|st.CapAmb)&forbidden, "/proc/%s/status: NET_RAW or SYS_ADMIN held: %v", proc, testkit.CapabilityNames(st.CapBnd))
						}
						s, err := testruntimes.Login(ctx, sb, c)
						require.NoError(t, err, "%s's real client logs in to the confined sandbox", c.Engine)
						t.Logf("%s: %s logged in to %s, bounding set %v", c.Name, s.Client, s.Server, testkit.CapabilityNames(want))
					})
				}
			})
		}
	})
}

// ownExec runs argv in container id with the runtime's own CLI (docker
// exec, podman exec, ctr tasks exec), not the adapter, and returns its
// stdout.
func ownExec(t testing.TB, ctx context.Context, b testruntimes.Runtime, id string, argv ...string) string {
	t.Helper()
	args := append([]string{"exec", id}, argv...)
	if b.RT.Name() == containerd.Name {
		args = append([]string{"tasks", "exec", "--exec-id", "sbx-confine-" + testkit.RandomHex(4), id}, argv...)
	}
	return string(b.Own(t, ctx, args...))
}
