package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStats(t *testing.T) {
	tests := []struct {
		name             string
		samples          []float64
		median, min, max float64
	}{
		{"None", nil, 0, 0, 0},
		{"One", []float64{3}, 3, 3, 3},
		{"OddCountUnsorted", []float64{5, 1, 3}, 3, 1, 5},
		{"EvenCountTakesTheMiddleMean", []float64{4, 1, 3, 2}, 2.5, 1, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			med, lo, hi := Stats(tt.samples)
			assert.Equal(t, tt.median, med)
			assert.Equal(t, tt.min, lo)
			assert.Equal(t, tt.max, hi)
		})
	}
}

func TestPercentileNearestRank(t *testing.T) {
	s := []float64{20, 1, 19, 2, 18, 3, 17, 4, 16, 5, 15, 6, 14, 7, 13, 8, 12, 9, 11, 10}
	assert.Equal(t, 10.0, Percentile(s, 50))
	assert.Equal(t, 19.0, Percentile(s, 95))
	assert.Equal(t, 20.0, Percentile(s, 100))
	assert.Equal(t, 1.0, Percentile(s, 0))
	assert.Zero(t, Percentile(nil, 50))
}

func TestFinishRatiosAndTargets(t *testing.T) {
	yes, no := true, false
	r := &Report{Figures: []*Figure{
		{Name: "base", Unit: UnitMS, Samples: []float64{100, 200, 300}},
		{Name: "fast", Unit: UnitMS, Samples: []float64{210}, Baseline: "base", Target: &Target{Kind: TargetRatio, Value: 1.10}},
		{Name: "slow", Unit: UnitMS, Samples: []float64{240}, Baseline: "base", Target: &Target{Kind: TargetRatio, Value: 1.10}},
		{Name: "abs", Unit: UnitMS, Samples: []float64{9, 11, 12}, Target: &Target{Kind: TargetMax, Value: 10}},
		{Name: "count", Unit: UnitCount, Samples: []float64{20, 19}, Target: &Target{Kind: TargetMin, Value: 20}},
		{Name: "orphan", Unit: UnitMS, Samples: []float64{1}, Baseline: "missing", Target: &Target{Kind: TargetRatio, Value: 1}},
		{Name: "empty", Unit: UnitMS, Target: &Target{Kind: TargetMax, Value: 1}},
	}}
	r.Finish()
	tests := []struct {
		name  string
		ratio float64
		met   *bool
	}{
		{"fast", 1.05, &yes},
		{"slow", 1.20, &no},
		{"abs", 0, &no},
		{"count", 0, &no},
		{"orphan", 0, nil},
		{"empty", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := r.Figure(tt.name)
			require.NotNil(t, f)
			assert.InDelta(t, tt.ratio, f.Ratio, 1e-9)
			assert.Equal(t, tt.met, f.Met)
		})
	}
	table := r.Table()
	assert.Contains(t, table, "| fast | 210 ms | 210 ms | 210 ms | 1 | base (200 ms) | 1.05x | <= 1.10x | yes |")
	assert.Contains(t, table, "| slow | 240 ms | 240 ms | 240 ms | 1 | base (200 ms) | 1.20x | <= 1.10x | **no** |")
	assert.Contains(t, table, "| count | 19.5 | 19 | 20 | 2 |  |  | >= 20 | **no** |")
	assert.Contains(t, table, "| empty | n/a |  |  | 0 |  |  | <= 1 ms | n/a |")

	var buf bytes.Buffer
	require.NoError(t, r.WriteJSON(&buf))
	var back Report
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	assert.Len(t, back.Figures, len(r.Figures))
	buf.Reset()
	require.NoError(t, r.WriteMarkdown(&buf))
	assert.True(t, strings.HasPrefix(buf.String(), "# sandboxer bench"))
}

// TestMarkdownNamesEachImagesServer: the header says which server version
// each image ran, so that a figure is never read for another version.
func TestMarkdownNamesEachImagesServer(t *testing.T) {
	r := &Report{Runtime: "docker", Images: map[string]string{"postgres": "reg/postgres:1", "busybox": "reg/busybox:1"},
		Servers: map[string]string{"postgres": "16.14"}}
	var b bytes.Buffer
	require.NoError(t, r.WriteMarkdown(&b))
	assert.Contains(t, b.String(), "- image postgres: reg/postgres:1 (server 16.14)\n")
	assert.Contains(t, b.String(), "- image busybox: reg/busybox:1\n", "no server: nothing added")
}
