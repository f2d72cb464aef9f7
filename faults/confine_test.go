package faults

import (
	"context"
	"os/exec"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime/containerd"
)

// TestSandboxesRunConfined: every sandbox Provision makes, warm and cold,
// judged ready over the wire or by its exec probe, runs under the runtime's default seccomp filter, with no_new_privs, and
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
		// (the others have no warm start). Readiness exec: each engine's
		// probe, its own client run inside the confined sandbox as root.
		for _, tc := range []struct {
			name      string
			warm      provision.Warm
			readiness provision.Readiness
			services  []string
		}{
			{"Warm", provision.WarmAuto, provision.ReadinessAuto, allEngines},
			{"Cold", provision.WarmOff, provision.ReadinessAuto, []string{"postgres"}},
			{"ExecProbe", provision.WarmAuto, provision.ReadinessExec, allEngines},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := e.Provisioner(func(o *provision.Options) { o.Warm, o.Readiness = tc.warm, tc.readiness })
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
// stdout. On the rootless row it is the unprivileged user's own podman,
// run as that user (its default connection: its rootless service).
func ownExec(t testing.TB, ctx context.Context, b testruntimes.Runtime, id string, argv ...string) string {
	t.Helper()
	switch {
	case b.Name == testenv.PodmanRootless:
		return asRootlessUser(t, ctx, append([]string{"podman", "exec", id}, argv...)...)
	case b.RT.Name() == containerd.Name:
		return string(b.Own(t, ctx, append([]string{"tasks", "exec", "--exec-id", "sbx-confine-" + testkit.RandomHex(4), id}, argv...)...))
	}
	return string(b.Own(t, ctx, append([]string{"exec", id}, argv...)...))
}

// asRootlessUser runs argv as the podman-rootless row's user, with the
// environment of a login session of its own, and returns its stdout.
func asRootlessUser(t testing.TB, ctx context.Context, argv ...string) string {
	t.Helper()
	name := testenv.Getenv(testenv.EnvPodmanRootlessUser)
	if name == "" {
		testenv.Unavailable(t, testenv.PodmanRootless, "%s is not set (run `make env`)", testenv.EnvPodmanRootlessUser)
	}
	u, err := user.Lookup(name)
	require.NoError(t, err)
	args := append([]string{"--reuid=" + u.Uid, "--regid=" + u.Gid, "--init-groups", "--",
		"env", "-i", "HOME=" + u.HomeDir, "USER=" + name, "PATH=/usr/local/bin:/usr/bin:/bin", "XDG_RUNTIME_DIR=/run/user/" + u.Uid,
	}, argv...)
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, "setpriv", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s (as %s): %s", strings.Join(argv, " "), name, stderr.String())
	return string(out)
}
