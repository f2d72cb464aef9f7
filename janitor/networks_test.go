package janitor_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/runtime"
)

// ownerNetwork creates owner's network as the provisioner does, created
// age ago; extra labels are merged over them ("-" deletes one).
func (w *world) ownerNetwork(name, owner string, age time.Duration, extra map[string]string) {
	w.t.Helper()
	lbls := keys.NetworkOf(owner)
	lbls[keys.Created] = strconv.FormatInt(w.clock.Now().Add(-age).Unix(), 10)
	for k, v := range extra {
		if v == "-" {
			delete(lbls, k)
		} else {
			lbls[k] = v
		}
	}
	_, err := w.fake.CreateNetwork(context.Background(), runtime.NetworkSpec{Name: name, Labels: lbls})
	require.NoError(w.t, err)
}

func (w *world) networkNames() []string {
	w.t.Helper()
	nets, err := w.fake.ListNetworks(context.Background(), nil)
	require.NoError(w.t, err)
	out := []string{}
	for _, n := range nets {
		out = append(out, n.Name)
	}
	return out
}

func networkNames(ns []janitor.Network) []string {
	out := []string{}
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}

func whyOf(ns []janitor.Network, name string) string {
	for _, n := range ns {
		if n.Name == name {
			return n.Why
		}
	}
	return "(not kept)"
}

func TestSweepOwnerNetworks(t *testing.T) {
	w := newWorld(t)
	hour := time.Hour
	w.agent("roboco-agent-live", runtime.StateRunning)
	w.ownerNetwork("sbx-roboco-agent-gone", "roboco-agent-gone", hour, nil)
	w.ownerNetwork("sbx-roboco-agent-live", "roboco-agent-live", hour, nil)
	w.ownerNetwork("sbx-roboco-agent-young", "roboco-agent-young", 10*time.Second, nil)
	w.ownerNetwork("sbx-roboco-agent-nolabel", "roboco-agent-nolabel", hour, map[string]string{keys.Created: "-"})
	w.ownerNetwork("sbx-roboco-agent-noowner", "x", hour, map[string]string{keys.Owner: "-"})
	// Gone owner, but a sandbox of it (in grace) is still there.
	w.ownerNetwork("sbx-roboco-agent-busy", "roboco-agent-busy", hour, nil)
	w.sandbox("roboco-sandbox-pg-busy", "roboco-agent-busy", time.Second, nil)
	// Gone owner, no sandbox, but a container (the agent's stand-in) is attached.
	w.ownerNetwork("sbx-roboco-agent-attached", "roboco-agent-attached", hour, nil)
	w.fake.Seed(runtime.Container{Name: "someone", Image: "agent", Created: w.clock.Now(), Networks: map[string]string{"sbx-roboco-agent-attached": "10.9.0.2"}})
	// A network that is not an owner network is never looked at.
	_, err := w.fake.CreateNetwork(context.Background(), runtime.NetworkSpec{Name: "agents", Labels: map[string]string{keys.Sandbox: "1"}})
	require.NoError(t, err)

	j := w.janitor(janitor.Options{})
	rep, err := j.Sweep(context.Background())
	require.Error(t, err, "the network without an owner label is undecided")
	assert.Equal(t, []string{"sbx-roboco-agent-gone"}, networkNames(rep.NetworksRemoved))
	assert.Equal(t, []string{"agents", "sbx-roboco-agent-attached", "sbx-roboco-agent-busy", "sbx-roboco-agent-live",
		"sbx-roboco-agent-nolabel", "sbx-roboco-agent-noowner", "sbx-roboco-agent-young"}, w.networkNames())
	assert.Equal(t, janitor.KeptOwnerAlive, whyOf(rep.NetworksKept, "sbx-roboco-agent-live"))
	assert.Equal(t, janitor.KeptInGrace, whyOf(rep.NetworksKept, "sbx-roboco-agent-young"))
	assert.Equal(t, janitor.KeptNoCreated, whyOf(rep.NetworksKept, "sbx-roboco-agent-nolabel"))
	assert.Equal(t, janitor.KeptUndecided, whyOf(rep.NetworksKept, "sbx-roboco-agent-noowner"))
	assert.Equal(t, janitor.KeptSandboxOn, whyOf(rep.NetworksKept, "sbx-roboco-agent-busy"))
	assert.Equal(t, janitor.KeptInUse, whyOf(rep.NetworksKept, "sbx-roboco-agent-attached"))
	assert.NotContains(t, networkNames(rep.NetworksKept), "agents")
	assert.Equal(t, "networks: removed 1, kept 6", rep.NetworksString())
}

func TestSweepRemovesTheNetworkWithTheOrphansItRemoves(t *testing.T) {
	w := newWorld(t)
	w.ownerNetwork("sbx-roboco-agent-o", "roboco-agent-o", time.Hour, nil)
	w.sandbox("roboco-sandbox-pg-o", "roboco-agent-o", time.Hour, nil)
	rep, err := w.janitor(janitor.Options{}).Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"roboco-sandbox-pg-o"}, sandboxNames(rep.Removed))
	assert.Equal(t, []string{"sbx-roboco-agent-o"}, networkNames(rep.NetworksRemoved), "in the same sweep")
	assert.Empty(t, w.networkNames())
}

func TestSweepNetworksDryRun(t *testing.T) {
	w := newWorld(t)
	w.ownerNetwork("sbx-roboco-agent-d", "roboco-agent-d", time.Hour, nil)
	rep, err := w.janitor(janitor.Options{DryRun: true}).Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"sbx-roboco-agent-d"}, networkNames(rep.NetworksRemoved))
	assert.Equal(t, []string{"sbx-roboco-agent-d"}, w.networkNames(), "nothing removed")
	assert.Zero(t, w.fake.Calls(fakeruntime.VerbRemoveNetwork))
}

func TestSweepNetworksUndecidedOwnerIsKept(t *testing.T) {
	w := newWorld(t)
	w.ownerNetwork("sbx-roboco-agent-u", "roboco-agent-u", time.Hour, nil)
	j := w.janitor(janitor.Options{Liveness: lifetime.LivenessFunc(func(context.Context, []lifetime.Owner) (map[lifetime.Owner]bool, error) {
		return nil, errors.New("cannot tell")
	})})
	rep, err := j.Sweep(context.Background())
	require.ErrorIs(t, err, janitor.ErrUndecided)
	assert.Empty(t, rep.NetworksRemoved)
	assert.Equal(t, janitor.KeptUndecided, whyOf(rep.NetworksKept, "sbx-roboco-agent-u"))
	assert.Equal(t, []string{"sbx-roboco-agent-u"}, w.networkNames())
}

func TestSweepNetworksGraceFromTheCreatedLabel(t *testing.T) {
	w := newWorld(t)
	w.ownerNetwork("sbx-roboco-agent-g", "roboco-agent-g", janitor.DefaultGrace-time.Minute, nil)
	j := w.janitor(janitor.Options{})
	rep, err := j.Sweep(context.Background())
	require.NoError(t, err)
	assert.Empty(t, rep.NetworksRemoved)
	w.clock.Advance(2 * time.Minute)
	rep, err = j.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"sbx-roboco-agent-g"}, networkNames(rep.NetworksRemoved), "past the grace window")
}

func TestSweepNetworksListFailureIsAnError(t *testing.T) {
	w := newWorld(t)
	w.fake.Fail(fakeruntime.VerbListNetworks, "", errors.New("daemon says no"))
	_, err := w.janitor(janitor.Options{}).Sweep(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "owner networks")
}

func TestSweepNetworksUnsupportedIsNone(t *testing.T) {
	w := newWorld(t)
	w.fake.Fail(fakeruntime.VerbListNetworks, "", runtime.ErrUnsupported)
	_, err := w.janitor(janitor.Options{}).Sweep(context.Background())
	require.NoError(t, err)
}
