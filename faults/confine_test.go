package faults

import (
	"context"
	"testing"
	"time"

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
		// Warm off: postgres's cold start, through its image's entrypoint
		// (the others have no warm start).
		for _, tc := range []struct {
			warm     provision.Warm
			services []string
		}{{provision.WarmAuto, allEngines}, {provision.WarmOff, []string{"postgres"}}} {
			t.Run("Warm="+string(tc.warm), func(t *testing.T) {
				p := e.Provisioner(func(o *provision.Options) { o.Warm = tc.warm })
				owner := e.Owner("confined")
				sb, err := p.Provision(ctx, owner, tc.services)
				require.NoError(t, err)
				t.Cleanup(func() {
					cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					_, _ = p.Teardown(cctx, owner)
				})
				require.Len(t, sb.Containers, len(tc.services))
				for _, c := range sb.Containers {
					t.Run(c.Engine, func(t *testing.T) {
						eng, ok := engines.Default.Lookup(c.Engine)
						require.True(t, ok)
						caps := eng.Spec().Capabilities
						require.NotEmpty(t, caps, "control: %s declares the capabilities its entrypoint needs", c.Engine)
						for _, proc := range []string{"1", "self"} {
							testkit.AssertConfined(t, "/proc/"+proc+"/status", ownExec(t, ctx, b, c.ID, "cat", "/proc/"+proc+"/status"), caps)
						}
						s, err := testruntimes.Login(ctx, sb, c)
						require.NoError(t, err, "%s's real client logs in to the confined sandbox", c.Engine)
						t.Logf("%s: %s logged in to %s, bounding set %v", c.Name, s.Client, s.Server, caps)
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
