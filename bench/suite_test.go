package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
)

// TestEnginesComeFromTheRegistry: the suite names no engine itself.
func TestEnginesComeFromTheRegistry(t *testing.T) {
	s := &Suite{}
	s.defaults()
	assert.Equal(t, engines.Default.Names()[0], s.OwnersEngine)
	assert.Equal(t, "redis", s.SweepEngine, "the quickest to be ready in the default registry")

	_, err := (&Suite{OwnersEngine: "mysql"}).Run(context.Background())
	assert.ErrorContains(t, err, `engine "mysql" is not registered`)
}

// TestOnlyNamesKnownParts: a part the suite does not have is an error
// before anything runs (RT is nil: nothing is asked of a runtime).
func TestOnlyNamesKnownParts(t *testing.T) {
	_, err := (&Suite{Only: []string{PartTrio, "teardwon"}}).Run(context.Background())
	assert.ErrorContains(t, err, `unknown part "teardwon"`)
	for _, part := range Parts {
		s := &Suite{Only: []string{part}}
		assert.True(t, s.wants(part), part)
	}
	assert.True(t, (&Suite{}).wants(PartCapacity), "no Only: every part")
	assert.False(t, (&Suite{Only: []string{PartTrio}}).wants(PartEngines))
}

// TestFakeSweepsJudgeWhatTheySeed: the fake sweeps' sandboxes are named and
// labelled as the provisioner does, so that the janitor keeps every one
// while their owners live and removes every one once they are gone.
func TestFakeSweepsJudgeWhatTheySeed(t *testing.T) {
	s := &Suite{FakeSweep: 20, Rounds: 1}
	s.defaults()
	s.report = &Report{}
	s.declare()
	s.fakeSweeps(context.Background())
	require.Empty(t, s.report.Errors)
	for _, fig := range []string{FigFakeKept, FigFakeGone, FigFakeList} {
		assert.Len(t, s.report.Figure(fig).Samples, 10, fig)
	}
	for _, fig := range []string{FigFakeKeptList, FigFakeGoneList} {
		for _, calls := range s.report.Figure(fig).Samples {
			assert.Equal(t, 1.0, calls, "%s: one listing per sweep", fig)
		}
	}
}
