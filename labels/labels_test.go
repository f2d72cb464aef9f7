package labels_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/labels"
)

// TestKeysAreTheSchema pins the keys as they appear on containers: a
// janitor of one version must read what a provisioner of another wrote.
func TestKeysAreTheSchema(t *testing.T) {
	assert.Equal(t, labels.Keys{
		Prefix:     "sbx",
		Sandbox:    "sbx.sandbox",
		Owner:      "sbx.sandbox.owner",
		Engine:     "sbx.sandbox.engine",
		Call:       "sbx.sandbox.call",
		Network:    "sbx.sandbox.network",
		Created:    "sbx.sandbox.created",
		OwnerBoot:  "sbx.sandbox.owner.boot",
		OwnerPIDNS: "sbx.sandbox.owner.pidns",
		OwnerPID:   "sbx.sandbox.owner.pid",
		OwnerStart: "sbx.sandbox.owner.start",
		OwnerRun:   "sbx.sandbox.owner.run",
		OwnerRunID: "sbx.sandbox.owner.run.id",
	}, labels.For("sbx"))
}

func TestEmptyPrefixIsTheDefault(t *testing.T) {
	assert.Equal(t, labels.For(labels.DefaultPrefix), labels.For(""))
	assert.Equal(t, "roboco.sandbox", labels.For("").Sandbox)
	require.NoError(t, labels.ValidatePrefix(labels.DefaultPrefix))
}

func TestSelectors(t *testing.T) {
	k := labels.For("sbx")
	assert.Equal(t, map[string]string{"sbx.sandbox": "1"}, k.Sandboxes())
	assert.Equal(t, map[string]string{"sbx.sandbox": "1", "sbx.sandbox.owner": "sbx-agent-1"}, k.OwnedBy("sbx-agent-1"))
	assert.Equal(t, map[string]string{"sbx.sandbox": "1", "sbx.sandbox.network": "owner"}, k.OwnerNetworks())
	assert.Equal(t, map[string]string{"sbx.sandbox": "1", "sbx.sandbox.network": "owner", "sbx.sandbox.owner": "sbx-agent-1"}, k.NetworkOf("sbx-agent-1"))
}

func TestReserved(t *testing.T) {
	k := labels.For("sbx")
	for _, key := range []string{k.Sandbox, k.Owner, k.Engine, k.Call} {
		assert.True(t, k.Reserved(key), key)
	}
	for _, key := range []string{k.OwnerPID, k.OwnerBoot, "sbx.test", "other.sandbox"} {
		assert.False(t, k.Reserved(key), key)
	}
}

func TestValidatePrefix(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
		ok     bool
	}{
		{"Default", "roboco", true},
		{"OneChar", "r", true},
		{"DotsAndDashes", "my.team-1", true},
		{"ThirtyTwo", strings.Repeat("a", 32), true},
		{"Empty", "", false},
		{"ThirtyThree", strings.Repeat("a", 33), false},
		{"UpperCase", "Roboco", false},
		{"Underscore", "rob_oco", false},
		{"LeadingDash", "-roboco", false},
		{"TrailingDot", "roboco.", false},
		{"Space", "rob oco", false},
		{"DoubledDot", "rob..oco", false},
		{"DotDash", "rob.-oco", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := labels.ValidatePrefix(tt.prefix)
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, labels.ErrInvalidPrefix)
			assert.Contains(t, err.Error(), labels.PrefixRule)
		})
	}
}
