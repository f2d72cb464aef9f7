package conformance

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// testListBySelectorAcrossStates: List returns exactly the containers whose
// labels match every pair of the selector, whether created, running or
// exited, with their states; containers that match only some pairs, or a
// value that merely starts like the wanted one, are left out.
func testListBySelectorAcrossStates(t *testing.T, s *suite) {
	ctx := testContext(t)
	group := randomHex(4)
	const (
		groupKey = "sbx.conf/group"
		roleKey  = "sbx.conf/role"
	)
	withLabels := func(pairs map[string]string) runtime.RunSpec {
		spec := s.spec(t)
		spec.Labels = s.labels(t, pairs)
		return spec
	}
	member := map[string]string{groupKey: group, roleKey: "member"}

	created := withLabels(member)
	s.create(t, ctx, created)

	running := withLabels(member)
	s.run(t, ctx, running)

	exited := withLabels(member)
	exited.Command = []string{"true"}
	s.run(t, ctx, exited)
	s.waitState(t, ctx, exited.Name, runtime.StateExited)

	decoyRole := withLabels(map[string]string{groupKey: group, roleKey: "decoy"})
	s.run(t, ctx, decoyRole)
	decoyGroup := withLabels(map[string]string{groupKey: group + "-other", roleKey: "member"})
	s.run(t, ctx, decoyGroup)
	decoyPrefix := withLabels(map[string]string{groupKey: group[:4], roleKey: "member"})
	s.run(t, ctx, decoyPrefix)
	decoyKeyOnly := withLabels(map[string]string{roleKey: "member"})
	s.run(t, ctx, decoyKeyOnly)

	cases := []struct {
		name      string
		selector  map[string]string
		want      []string
		wantState map[string]runtime.State
	}{
		{
			name:     "every pair must match",
			selector: member,
			want:     []string{created.Name, running.Name, exited.Name},
			wantState: map[string]runtime.State{
				created.Name: runtime.StateCreated,
				running.Name: runtime.StateRunning,
				exited.Name:  runtime.StateExited,
			},
		},
		{
			name:     "one pair",
			selector: map[string]string{groupKey: group},
			want:     []string{created.Name, running.Name, exited.Name, decoyRole.Name},
		},
		{
			name:     "value matches exactly, not by prefix",
			selector: map[string]string{groupKey: group[:4], roleKey: "member"},
			want:     []string{decoyPrefix.Name},
		},
		{
			name:     "no match",
			selector: map[string]string{groupKey: group, roleKey: "absent"},
			want:     []string{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Scoped to this run, so other users of the backend are not seen.
			selector := map[string]string{runLabel: s.runID}
			for k, v := range tc.selector {
				selector[k] = v
			}
			got, err := s.rt.List(ctx, selector)
			require.NoError(t, err, "list %v", selector)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			assert.Equal(t, want, containerNames(got), "containers listed for %v", tc.selector)
			for _, c := range got {
				assertLabels(t, tc.selector, c.Labels, "listed "+c.Name)
				if state, ok := tc.wantState[c.Name]; ok {
					assert.Equal(t, state, c.State, "state of %s", c.Name)
				}
			}
		})
	}
}

// testSnapshotMatchesListAndKnowsEveryContainer: Snapshot's Matched is
// what List returns for the same selector (same containers, same states),
// and its Refs hold the name and the ID of every container that exists,
// matched or not, created, running or exited; a removed container's
// references are gone from the next snapshot.
func testSnapshotMatchesListAndKnowsEveryContainer(t *testing.T, s *suite) {
	ctx := testContext(t)
	group := randomHex(4)
	const groupKey = "sbx.conf/snap"
	member := func() runtime.RunSpec {
		spec := s.spec(t)
		spec.Labels = s.labels(t, map[string]string{groupKey: group})
		return spec
	}
	created := member()
	s.create(t, ctx, created)
	running := member()
	s.run(t, ctx, running)
	exited := member()
	exited.Command = []string{"true"}
	s.run(t, ctx, exited)
	s.waitState(t, ctx, exited.Name, runtime.StateExited)
	outsider := s.spec(t) // not matched: known all the same
	s.run(t, ctx, outsider)

	selector := map[string]string{runLabel: s.runID, groupKey: group}
	listed, err := s.rt.List(ctx, selector)
	require.NoError(t, err)
	snap, err := s.rt.Snapshot(ctx, selector)
	require.NoError(t, err)
	assert.Equal(t, containerNames(listed), containerNames(snap.Matched), "Matched is List's answer")
	states := map[string]runtime.State{}
	for _, c := range listed {
		states[c.Name] = c.State
	}
	for _, c := range snap.Matched {
		assert.Equal(t, states[c.Name], c.State, "state of %s", c.Name)
		assertLabels(t, selector, c.Labels, "matched "+c.Name)
		assert.False(t, c.Created.IsZero(), "%s has a creation time", c.Name)
	}
	for _, spec := range []runtime.RunSpec{created, running, exited, outsider} {
		c, err := s.rt.Inspect(ctx, spec.Name)
		require.NoError(t, err)
		assert.True(t, snap.Exists(spec.Name), "the snapshot knows %s by name", spec.Name)
		assert.True(t, snap.Exists(c.ID), "the snapshot knows %s by ID", spec.Name)
	}
	assert.False(t, snap.Exists(""), "the empty reference names nothing")

	gone, err := s.rt.Inspect(ctx, running.Name)
	require.NoError(t, err)
	require.NoError(t, s.rt.Remove(ctx, running.Name))
	snap, err = s.rt.Snapshot(ctx, selector)
	require.NoError(t, err)
	assert.False(t, snap.Exists(running.Name), "a removed container's name is gone")
	assert.False(t, snap.Exists(gone.ID), "a removed container's ID is gone")
	assert.NotContains(t, containerNames(snap.Matched), running.Name)
}
