package janitor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/runtime"
)

// adoptingWorld is a world whose fake can adopt (runtime.Adopter).
func adoptingWorld(t *testing.T) (*world, fakeruntime.Adopting) {
	w := newWorld(t)
	a := fakeruntime.Adopting{Runtime: w.fake}
	return w, a
}

func adoptedBy(t *testing.T, f *fakeruntime.Runtime) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range f.Containers() {
		out[c.Name] = c.AdoptedBy
	}
	return out
}

// sweepOnce makes one sweep of rt by a janitor with (valid) opts.
func sweepOnce(t *testing.T, rt runtime.ContainerRuntime, opts janitor.Options) (janitor.Report, error) {
	t.Helper()
	j, err := janitor.New(rt, opts)
	require.NoError(t, err)
	return j.Sweep(context.Background())
}

func TestSweepAdoptsSandboxesOfExistingOwners(t *testing.T) {
	ctx := context.Background()
	w, a := adoptingWorld(t)
	w.agent("roboco-agent-1", runtime.StateRunning)
	w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", time.Second, nil)                // in grace: still adopted
	w.sandbox("roboco-sandbox-redis-1", "roboco-agent-1", time.Hour, nil)               // kept
	w.sandbox("roboco-sandbox-pg-2", "roboco-agent-2", time.Second, nil)                // owner not there yet
	w.sandbox("roboco-sandbox-pg-3", "", time.Hour, map[string]string{keys.Owner: "-"}) // no owner: never

	j, err := janitor.New(a, janitor.Options{Now: w.clock.Now})
	require.NoError(t, err)
	rep, err := j.Sweep(ctx)
	require.Error(t, err, "the sandbox without an owner label is an error of the report")
	assert.Equal(t, []string{"roboco-sandbox-pg-1", "roboco-sandbox-redis-1"}, sandboxNames(rep.Adopted))
	assert.Equal(t, []string{"roboco-sandbox-redis-1"}, sandboxNames(rep.Kept), "adopted sandboxes stay in their list")
	assert.Equal(t, []string{"roboco-sandbox-pg-1", "roboco-sandbox-pg-2"}, sandboxNames(rep.Skipped))
	assert.Contains(t, rep.String(), ", adopted 2")
	got := adoptedBy(t, w.fake)
	assert.Equal(t, "roboco-agent-1", got["roboco-sandbox-pg-1"])
	assert.Equal(t, "roboco-agent-1", got["roboco-sandbox-redis-1"])
	assert.Empty(t, got["roboco-sandbox-pg-2"])
	assert.Empty(t, got["roboco-sandbox-pg-3"])

	// A second sweep adopts nothing again: it reads AdoptedBy.
	rep, _ = j.Sweep(ctx)
	assert.Empty(t, rep.Adopted)
	assert.Equal(t, 1, w.fake.Calls(fakeruntime.VerbAdopt))

	// The agent arrives: the next sweep adopts its sandbox.
	w.agent("roboco-agent-2", runtime.StateCreated)
	rep, _ = j.Sweep(ctx)
	assert.Equal(t, []string{"roboco-sandbox-pg-2"}, sandboxNames(rep.Adopted))
	// What adoption then does (the cluster's garbage collector removes the
	// sandboxes with their owner, with no sweep) is the runtime's to
	// prove, on a real cluster: runtime/kubernetes
	// TestAdoptedSandboxesGoWithTheirAgentPod.
}

func TestSweepAdoptionFailureKeepsTheSandboxCovered(t *testing.T) {
	w, a := adoptingWorld(t)
	w.agent("roboco-agent-1", runtime.StateRunning)
	w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", time.Hour, nil)
	w.fake.Fail(fakeruntime.VerbAdopt, "roboco-agent-1", errors.New("forbidden"))

	rep, err := sweepOnce(t, a, janitor.Options{Now: w.clock.Now})
	require.NoError(t, err, "a failed adoption is not a failed sweep: the janitor still covers the sandbox")
	assert.Empty(t, rep.Adopted)
	assert.Equal(t, []string{"roboco-sandbox-pg-1"}, sandboxNames(rep.Kept))
}

func TestSweepDryRunNoAdoptAndPlainRuntimesAdoptNothing(t *testing.T) {
	w, a := adoptingWorld(t)
	w.agent("roboco-agent-1", runtime.StateRunning)
	w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", time.Hour, nil)

	rep, err := sweepOnce(t, a, janitor.Options{Now: w.clock.Now, DryRun: true})
	require.NoError(t, err)
	assert.Empty(t, rep.Adopted)

	rep, err = sweepOnce(t, a, janitor.Options{Now: w.clock.Now, NoAdopt: true})
	require.NoError(t, err)
	assert.Empty(t, rep.Adopted, "NoAdopt")
	assert.Equal(t, []string{"roboco-sandbox-pg-1"}, sandboxNames(rep.Kept))

	// The plain fake (no runtime.Adopter): nothing to adopt with.
	rep, err = sweepOnce(t, w.fake, janitor.Options{Now: w.clock.Now})
	require.NoError(t, err)
	assert.Empty(t, rep.Adopted)
	assert.Zero(t, w.fake.Calls(fakeruntime.VerbAdopt))
	assert.Empty(t, adoptedBy(t, w.fake)["roboco-sandbox-pg-1"])
}
