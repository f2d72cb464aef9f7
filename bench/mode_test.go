package bench

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/runtime"
)

// TestModeForFollowsTheRuntimesForms: the mode comes from what the runtime
// says of itself, not from its name.
func TestModeForFollowsTheRuntimesForms(t *testing.T) {
	tests := []struct {
		name  string
		forms runtime.Forms
		want  Mode
	}{
		{"PortAsWritten", runtime.Forms{}, ModeHost},
		{"NoHostPorts", runtime.Forms{NoHostPorts: true}, ModeNetwork},
		{"Cluster", runtime.Forms{NoHostPorts: true, StopRemoves: true}, ModeNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ModeFor(tt.forms))
		})
	}
}

// TestUnmeasurableNamesThePartsAndWhy: without an image store the image
// checks and warm start are n/a, with the runtime named; otherwise nothing
// is.
func TestUnmeasurableNamesThePartsAndWhy(t *testing.T) {
	assert.Empty(t, Unmeasurable("docker", true))
	na := Unmeasurable("kubernetes", false)
	require.Len(t, na, 2)
	for _, part := range []string{PartImage, PartWarm} {
		assert.Contains(t, na[part], "n/a on kubernetes: ", part)
		assert.Contains(t, na[part], "image store", part)
	}
}

// TestSuiteLeavesOutWhatItCannotMeasure: a part that is n/a is not run even
// when asked for, and its figures carry the reason.
func TestSuiteLeavesOutWhatItCannotMeasure(t *testing.T) {
	s := &Suite{}
	s.defaults()
	s.report = &Report{}
	s.na = Unmeasurable("kubernetes", false)
	s.declare()
	s.declareWarm([]string{"postgres"})
	s.notMeasured()
	assert.False(t, s.wants(PartImage))
	assert.False(t, s.wants(PartWarm))
	assert.True(t, s.wants(PartEngines))
	assert.False(t, (&Suite{Only: []string{PartImage}, na: s.na}).wants(PartImage), "asked for, still n/a")
	byPart := map[string][]string{
		PartImage: {FigImage, FigRawImage},
		PartWarm:  {FigWarm("postgres"), FigFirstUse("postgres"), figTemplateBuild("postgres"), FigWarmTrio},
	}
	for part, names := range byPart {
		for _, name := range names {
			f := s.report.Figure(name)
			require.NotNil(t, f, name)
			assert.Equal(t, s.na[part], f.NA, name)
		}
	}
	assert.Empty(t, s.report.Figure(FigProvision("postgres")).NA)
}

// TestSpecFollowsTheMode: host mode publishes the engine's port on
// 127.0.0.1; network mode publishes nothing and joins the run's network.
func TestSpecFollowsTheMode(t *testing.T) {
	cred := engines.Credentials{User: "u", Password: "p", Database: "d"}
	tests := []struct {
		name    string
		mode    Mode
		network string
		ports   []runtime.PortSpec
	}{
		{"Host", ModeHost, "", []runtime.PortSpec{{ContainerPort: 5432, Protocol: "tcp", HostIP: runtime.DefaultHostIP}}},
		{"Network", ModeNetwork, "sbxbench-net", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Suite{Images: map[string]string{"postgres": "img"}, mode: tt.mode, network: tt.network}
			s.defaults()
			spec := s.spec("postgres", "n", cred, nil)
			assert.Equal(t, tt.ports, spec.Ports)
			assert.Equal(t, tt.network, spec.Network)
			assert.Equal(t, "img", spec.Image)
		})
	}
}

// TestMarkdownSaysTheModeNotesAndNA: the header names the row's mode and
// its notes; a figure that cannot be measured shows n/a and why.
func TestMarkdownSaysTheModeNotesAndNA(t *testing.T) {
	for _, mode := range []Mode{ModeHost, ModeNetwork} {
		t.Run(string(mode), func(t *testing.T) {
			r := &Report{Runtime: "rt", Mode: mode, Notes: []string{"owners at once 16 (asked 20): fits"}, Figures: []*Figure{
				{Name: FigImage, Unit: UnitMS, Target: &Target{Kind: TargetMax, Value: 10}, Note: "the adapter's ImageExists", NA: "n/a on rt: no image store"},
				{Name: "measured", Unit: UnitMS, Samples: []float64{5}, Note: "kept"},
			}}
			r.Finish()
			var buf bytes.Buffer
			require.NoError(t, r.WriteMarkdown(&buf))
			md := buf.String()
			assert.Contains(t, md, "- mode: "+string(mode)+" mode: ")
			assert.Contains(t, md, "- note: owners at once 16 (asked 20): fits\n")
			assert.Contains(t, md, "| image-present check | n/a |  |  | 0 |  |  | <= 10 ms | n/a | n/a on rt: no image store |")
			assert.Contains(t, md, "| measured | 5.00 ms | 5.00 ms | 5.00 ms | 1 |  |  |  |  | kept |")
		})
	}
}

// TestHostLineOmitsAnUnreportedCgroup: a cluster reports no cgroup
// version, and the header then shows none rather than "cgroup v".
func TestHostLineOmitsAnUnreportedCgroup(t *testing.T) {
	assert.Contains(t, hostLine("vm", "1"), ", cgroup v1")
	assert.NotContains(t, hostLine("vm", ""), "cgroup")
}
