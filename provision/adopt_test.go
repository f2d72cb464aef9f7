package provision_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// adopting is the world's fake with runtime.Adopter, and a provisioner on it.
func adopting(t *testing.T, w *world) *provision.Provisioner {
	t.Helper()
	p, err := provision.New(fakeruntime.Adopting{Runtime: w.fake}, w.options())
	require.NoError(t, err)
	return p
}

func TestAdoptAfterTheOwnerExists(t *testing.T) {
	w := newWorld(t)
	p := adopting(t, w)
	sb, err := p.Provision(ctxT(t), "ad", []string{"postgres", "redis"})
	require.NoError(t, err)
	assert.Empty(t, sb.AdoptedBy, "the owner did not exist when Provision returned")
	assert.Empty(t, w.events(provision.EventAdopted))

	_, err = p.Adopt(ctxT(t), "ad")
	require.ErrorIs(t, err, runtime.ErrNotFound, "no owner yet: nothing to adopt by")
	for _, c := range w.owned(sb.Owner) {
		assert.Empty(t, c.AdoptedBy)
	}

	w.fake.Seed(runtime.Container{Name: sb.Owner, Image: "agent", State: runtime.StateRunning})
	adopted, err := p.Adopt(ctxT(t), "ad")
	require.NoError(t, err)
	assert.Len(t, adopted, 2)
	for _, c := range w.owned(sb.Owner) {
		assert.Equal(t, sb.Owner, c.AdoptedBy, c.Name)
	}
	assert.Len(t, w.events(provision.EventAdopted), 2)

	again, err := p.Adopt(ctxT(t), "ad")
	require.NoError(t, err)
	assert.Empty(t, again, "adopted already: nothing is asked of the runtime again")
	// Provision's own try, the one without an owner, the one that adopted.
	// What adoption then does (the cluster's garbage collector removes the
	// sandboxes with their owner) is the runtime's to prove, on a real
	// cluster: runtime/kubernetes TestAdoptedSandboxesGoWithTheirAgentPod.
	assert.Equal(t, 3, w.fake.Calls(fakeruntime.VerbAdopt))
}

func TestProvisionAdoptsWhenTheOwnerExists(t *testing.T) {
	w := newWorld(t)
	p := adopting(t, w)
	owner := p.OwnerName("pre")
	w.fake.Seed(runtime.Container{Name: owner, Image: "agent", State: runtime.StateRunning})
	sb, err := p.Provision(ctxT(t), "pre", []string{"redis", "mongo"})
	require.NoError(t, err)
	assert.Equal(t, owner, sb.AdoptedBy)
	for _, c := range w.owned(owner) {
		assert.Equal(t, owner, c.AdoptedBy, c.Name)
	}
}

func TestProvisionSucceedsWhenAdoptionFails(t *testing.T) {
	w := newWorld(t)
	p := adopting(t, w)
	owner := p.OwnerName("fa")
	w.fake.Seed(runtime.Container{Name: owner, Image: "agent", State: runtime.StateRunning})
	w.fake.Fail(fakeruntime.VerbAdopt, "", errors.New("forbidden"))
	sb, err := p.Provision(ctxT(t), "fa", []string{"redis"})
	require.NoError(t, err, "the sandboxes are ready; the janitor still covers them")
	assert.Empty(t, sb.AdoptedBy)
	assert.Contains(t, w.logs.String(), "forbidden")
}

func TestAdoptOnARuntimeThatCannot(t *testing.T) {
	w := newWorld(t)
	p := w.provisioner(w.options())
	_, err := p.Provision(ctxT(t), "no", []string{"redis"})
	require.NoError(t, err)
	_, err = p.Adopt(ctxT(t), "no")
	require.ErrorIs(t, err, runtime.ErrUnsupported)
	assert.Contains(t, err.Error(), "janitor")
	_, err = p.Adopt(ctxT(t), "bad id!")
	require.Error(t, err)
	assert.NotErrorIs(t, err, runtime.ErrUnsupported, "the owner id is checked first")
}
