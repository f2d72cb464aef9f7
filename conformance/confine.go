package conformance

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// testConfinedToTheSpecsCapabilities: every container runs under the
// runtime's default seccomp filter, with no_new_privs, and with the
// capabilities of its run spec and no other, in its bounding set too, as
// the kernel reports them in /proc/<pid>/status inside the container: its
// main process and an exec'd one alike. A container that asks for none has
// none (a chown as root fails), one that asks for CHOWN can chown; NET_RAW
// and SYS_ADMIN are refused as ErrInvalid, and nothing is made.
func testConfinedToTheSpecsCapabilities(t *testing.T, s *suite) {
	ctx := testContext(t)
	cases := []struct {
		name string
		caps []string
		// chown is whether root may chown a file it owns to another user.
		chown bool
	}{
		{name: "None", caps: nil, chown: false},
		{name: "ChownSetuidSetgid", caps: []string{"CHOWN", "cap_setuid", "SETGID"}, chown: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := s.spec(t)
			spec.Capabilities = tc.caps
			s.run(t, ctx, spec)
			for _, proc := range []string{"1", "self"} {
				path := "/proc/" + proc + "/status"
				st := testkit.AssertConfined(t, path, s.readFile(t, ctx, spec.Name, path), tc.caps)
				assert.Equal(t, testkit.CapabilityNames(st.CapBnd), testkit.CapabilityNames(st.CapEff), "%s: root's effective set is all of its bounding set", path)
			}
			res, err := s.rt.Exec(ctx, spec.Name, runtime.ExecSpec{Cmd: []string{"sh", "-c", "touch /tmp/owned && chown 4242:4242 /tmp/owned"}})
			require.NoError(t, err)
			assert.Equal(t, tc.chown, res.ExitCode == 0, "chown as root (exit %d: %s)", res.ExitCode, res.Stderr)
		})
	}
	for _, c := range []string{"NET_RAW", "SYS_ADMIN"} {
		t.Run("Refuses"+c, func(t *testing.T) {
			spec := s.spec(t)
			spec.Capabilities = []string{"CHOWN", c}
			s.track(t, spec.Name)
			_, err := s.rt.Run(ctx, spec)
			require.ErrorIs(t, err, runtime.ErrInvalid)
			assert.Contains(t, err.Error(), s.rt.Name(), "the error names the runtime")
			_, err = s.rt.Inspect(ctx, spec.Name)
			assert.ErrorIs(t, err, runtime.ErrNotFound, "a refused run leaves nothing")
		})
	}
}
