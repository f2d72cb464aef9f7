package runtime_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// TestRunSpecNormalizeCapabilities: a run spec keeps only capabilities of
// the baseline set, named one way; NET_RAW, SYS_ADMIN and anything else
// are refused as ErrInvalid.
func TestRunSpecNormalizeCapabilities(t *testing.T) {
	in := runtime.RunSpec{Image: "i", Capabilities: []string{"setuid", "CAP_CHOWN", "SETUID", " Cap_Setgid "}}
	got, err := in.Normalize()
	require.NoError(t, err)
	assert.Equal(t, []string{"CHOWN", "SETGID", "SETUID"}, got.Capabilities, "upper case, no CAP_, sorted, each once")
	assert.Equal(t, []string{"CAP_CHOWN", "CAP_SETGID", "CAP_SETUID"}, got.CapabilityNames())
	assert.Equal(t, "setuid", in.Capabilities[0], "the caller's slice is not modified")

	none, err := runtime.RunSpec{Image: "i"}.Normalize()
	require.NoError(t, err)
	assert.Empty(t, none.Capabilities)
	assert.NotNil(t, none.CapabilityNames(), "no capability is an empty list, never the backend's default")

	for _, c := range []string{"NET_RAW", "CAP_NET_RAW", "SYS_ADMIN", "sys_ptrace", "ALL", "", "CAP_BOGUS"} {
		t.Run("Refuses"+c, func(t *testing.T) {
			_, err := runtime.RunSpec{Image: "i", Capabilities: []string{"CHOWN", c}}.Normalize()
			require.Error(t, err)
			assert.True(t, errors.Is(err, runtime.ErrInvalid), "%v", err)
			assert.Contains(t, err.Error(), "is not one a sandbox may keep")
		})
	}
}
