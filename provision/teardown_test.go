package provision_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// TestTeardownSandboxRemovesOnlyItsCall: TeardownSandbox of one Provision's
// result removes that call's sandboxes and leaves the owner's others (an
// earlier call's, for a live agent) running; a Sandbox no Provision
// returned is refused, nothing touched.
func TestTeardownSandboxRemovesOnlyItsCall(t *testing.T) {
	w := newWorld(t)
	p := w.provisioner(w.options())
	earlier, err := p.Provision(ctxT(t), "42", []string{"redis"})
	require.NoError(t, err)
	later, err := p.Provision(ctxT(t), "42", []string{"postgres", "mongo"})
	require.NoError(t, err)
	require.Len(t, w.owned(earlier.Owner), 3)

	removed, err := p.TeardownSandbox(ctxT(t), later)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"roboco-sandbox-pg-42", "roboco-sandbox-mongo-42"}, names(removed))
	left := w.owned(earlier.Owner)
	require.Len(t, left, 1, "the earlier call's sandbox stays")
	assert.Equal(t, earlier.Containers[0].ID, left[0].ID)

	removed, err = p.TeardownSandbox(ctxT(t), later)
	require.NoError(t, err, "idempotent")
	assert.Empty(t, removed)

	_, err = p.TeardownSandbox(ctxT(t), provision.Sandbox{OwnerID: "42", Owner: earlier.Owner, Containers: earlier.Containers})
	assert.ErrorIs(t, err, provision.ErrInvalid, "a hand-made Sandbox names no call")
	assert.Len(t, w.owned(earlier.Owner), 1, "nothing touched")
}

func names(cs []runtime.Container) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}
