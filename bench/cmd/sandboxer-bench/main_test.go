package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/bench"
)

// TestChooseAllIncludesAnOptInBackendOnlyWhenItHolds: "all" is every
// backend, less an opt-in one (kubernetes without KUBECONFIG); naming it
// asks for it anyway, and then it must answer.
func TestChooseAllIncludesAnOptInBackendOnlyWhenItHolds(t *testing.T) {
	on := false
	list := []backend{{name: "docker"}, {name: "kubernetes", optIn: func() bool { return on }}}
	names := func(bs []backend) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.name)
		}
		return out
	}
	tests := []struct {
		name     string
		list     string
		on       bool
		want     []string
		explicit bool
	}{
		{"AllWithoutKubeconfig", "all", false, []string{"docker"}, false},
		{"AllWithKubeconfig", "all", true, []string{"docker", "kubernetes"}, false},
		{"EmptyIsAll", "", true, []string{"docker", "kubernetes"}, false},
		{"NamedWithoutKubeconfig", "kubernetes", false, []string{"kubernetes"}, true},
		{"Named", " docker,kubernetes ", false, []string{"docker", "kubernetes"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			on = tt.on
			got, explicit, err := chooseFrom(list, tt.list)
			require.NoError(t, err)
			assert.Equal(t, tt.want, names(got))
			assert.Equal(t, tt.explicit, explicit)
		})
	}
	_, _, err := chooseFrom(list, "docker,k8s")
	assert.ErrorContains(t, err, `unknown runtime "k8s"`)
}

// TestKubernetesIsABackendOptedInByKubeconfig: the driver knows the
// kubernetes row, and "all" takes it when KUBECONFIG is set.
func TestKubernetesIsABackendOptedInByKubeconfig(t *testing.T) {
	var k *backend
	for i := range backends {
		if backends[i].name == "kubernetes" {
			k = &backends[i]
		}
	}
	require.NotNil(t, k)
	require.NotNil(t, k.optIn)
	t.Setenv("KUBECONFIG", "")
	assert.False(t, k.optIn())
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	assert.True(t, k.optIn())
}

// TestCapAtOnceLowersAndSaysSo: a backend's cap lowers the owners and the
// real sweeps to what it fits, and the report's header says so; a suite
// already within it is left alone, and a backend without a cap changes
// nothing.
func TestCapAtOnceLowersAndSaysSo(t *testing.T) {
	capped := backend{name: "kubernetes", atOnce: 16, why: "the node fits 16"}
	tests := []struct {
		name                string
		b                   backend
		owners, sweep       int
		wantOwners, wantSwp int
		note                string
	}{
		{"Lowered", capped, 20, 50, 16, 16, "owners at once 16 (asked 20), real sweeps of 16 (asked 50): the node fits 16"},
		{"OnlyTheSweep", capped, 10, 50, 10, 16, "owners at once 10 (asked 10), real sweeps of 16 (asked 50): the node fits 16"},
		{"Within", capped, 10, 12, 10, 12, ""},
		{"NoCap", backend{name: "docker"}, 20, 50, 20, 50, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &bench.Suite{Owners: tt.owners, RealSweep: tt.sweep}
			tt.b.capAtOnce(s)
			assert.Equal(t, tt.wantOwners, s.Owners)
			assert.Equal(t, tt.wantSwp, s.RealSweep)
			if tt.note == "" {
				assert.Empty(t, s.Notes)
			} else {
				assert.Equal(t, []string{tt.note}, s.Notes)
			}
		})
	}
}
