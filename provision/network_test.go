package provision_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// networks lists the fake's owner networks by name.
func (w *world) networks() map[string]runtime.Network {
	w.t.Helper()
	nets, err := w.fake.ListNetworks(context.Background(), nil)
	require.NoError(w.t, err)
	out := map[string]runtime.Network{}
	for _, n := range nets {
		out[n.Name] = n
	}
	return out
}

func TestOwnerNetworkName(t *testing.T) {
	assert.Equal(t, "sbx-roboco-agent-42", provision.OwnerNetworkName("roboco-agent-42"))
	long := "roboco-agent-" + strings.Repeat("a", 55)
	other := "roboco-agent-" + strings.Repeat("a", 54) + "b"
	n := provision.OwnerNetworkName(long)
	assert.Len(t, n, 63, "sbx- + 50 + - + 8 hex")
	assert.True(t, strings.HasPrefix(n, "sbx-"+long[:50]+"-"), n)
	assert.NotEqual(t, n, provision.OwnerNetworkName(other), "two long owners that share a beginning")
	short := "x" + strings.Repeat("a", 58) // sbx- + 59 = 63: still plain
	assert.Equal(t, "sbx-"+short, provision.OwnerNetworkName(short))
	assert.Len(t, provision.OwnerNetworkName(short+"a"), 63)
}

func TestPrivateAndNetworkAreExclusive(t *testing.T) {
	err := provision.Options{Private: true, Network: "agents"}.Validate()
	require.ErrorIs(t, err, provision.ErrInvalid)
	require.NoError(t, provision.Options{Private: true}.Validate())
}

func TestHostModeCreatesAPlainOwnerNetworkOnce(t *testing.T) {
	w := newWorld(t)
	now := time.Now()
	opts := w.options()
	opts.Now = func() time.Time { return now }
	opts.Labels = map[string]string{"team": "a"}
	p := w.provisioner(opts)
	sb, err := p.Provision(ctxT(t), "n1", []string{"postgres", "redis"})
	require.NoError(t, err)
	name := provision.OwnerNetworkName("roboco-agent-n1")
	assert.Equal(t, name, sb.Network)
	nets := w.networks()
	require.Contains(t, nets, name)
	assert.False(t, nets[name].Internal, "host mode: a plain network")
	assert.Equal(t, map[string]string{
		keys.Sandbox: labels.SandboxValue, keys.Owner: "roboco-agent-n1", keys.Network: labels.NetworkOwnerValue,
		keys.Created: strconv.FormatInt(now.Unix(), 10), "team": "a",
	}, nets[name].Labels)
	for _, c := range w.owned("roboco-agent-n1") {
		assert.Equal(t, []string{name}, keysOf(c.Networks), "%s joins the owner's network only", c.Name)
		assert.NotEmpty(t, c.Ports, "host mode publishes")
	}
	for _, c := range sb.Containers {
		assert.Equal(t, "127.0.0.1", c.Endpoint.Host, "host mode hands out the published port")
	}
	assert.Equal(t, 1, w.fake.Calls(fakeruntime.VerbCreateNetwork))
	assert.Len(t, w.events(provision.EventNetworkCreated), 1)

	// A second call of the owner reuses the network.
	sb2, err := p.Provision(ctxT(t), "n1", []string{"mongo"})
	require.NoError(t, err)
	assert.Equal(t, name, sb2.Network)
	assert.Len(t, w.networks(), 1, "still one network")
	assert.Len(t, w.events(provision.EventNetworkCreated), 1, "created once per owner")
	assert.Equal(t, []string{name}, keysOf(w.named(sb2.Containers[0].Name).Networks))
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestPrivateModeJoinsAnInternalNetworkAndPublishesNothing(t *testing.T) {
	w := newWorld(t)
	opts := w.options()
	opts.Private = true
	p := w.provisioner(opts)
	sb, err := p.Provision(ctxT(t), "p1", []string{"postgres", "redis"})
	require.NoError(t, err)
	name := provision.OwnerNetworkName("roboco-agent-p1")
	require.Contains(t, w.networks(), name)
	assert.True(t, w.networks()[name].Internal, "private mode: an internal network")
	for _, c := range sb.Containers {
		ctr := w.named(c.Name)
		assert.Empty(t, ctr.Ports, "nothing published")
		assert.Equal(t, ctr.Networks[name], c.Endpoint.Host, "the address on the owner's network")
		assert.NotEqual(t, "127.0.0.1", c.Endpoint.Host)
	}
	assert.Equal(t, "5432", sb.Map()["ROBOCO_TEST_DB_PORT"], "the container port")

	var buf bytes.Buffer
	require.NoError(t, sb.Render(&buf, provision.FormatDotenv))
	assert.Contains(t, buf.String(), "\nSANDBOXER_NETWORK="+name+"\n")
	buf.Reset()
	require.NoError(t, sb.Render(&buf, provision.FormatShell))
	assert.Contains(t, buf.String(), "export SANDBOXER_NETWORK='"+name+"'\n")
	buf.Reset()
	require.NoError(t, sb.Render(&buf, provision.FormatJSON))
	var got struct{ Network string }
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	assert.Equal(t, name, got.Network)
}

func TestCallerNetworkMakesNoOwnerNetwork(t *testing.T) {
	w := newWorld(t)
	_, err := w.fake.CreateNetwork(ctxT(t), runtime.NetworkSpec{Name: "agents"})
	require.NoError(t, err)
	opts := w.options()
	opts.Network = "agents"
	p := w.provisioner(opts)
	sb, err := p.Provision(ctxT(t), "c1", []string{"redis"})
	require.NoError(t, err)
	assert.Equal(t, "agents", sb.Network)
	assert.Equal(t, 1, w.fake.Calls(fakeruntime.VerbCreateNetwork), "only the test's")
	_, err = p.Teardown(ctxT(t), "c1")
	require.NoError(t, err)
	assert.Contains(t, w.networks(), "agents", "the caller's network is the caller's")
}

func TestAnOwnerIsInOneModeAtATime(t *testing.T) {
	w := newWorld(t)
	host := w.provisioner(w.options())
	_, err := host.Provision(ctxT(t), "m1", []string{"redis"})
	require.NoError(t, err)
	opts := w.options()
	opts.Private = true
	private := w.provisioner(opts)
	_, err = private.Provision(ctxT(t), "m1", []string{"postgres"})
	require.ErrorIs(t, err, provision.ErrConflict)
	assert.Contains(t, err.Error(), "roboco-agent-m1", "names the owner")
	assert.Len(t, w.owned("roboco-agent-m1"), 1, "nothing of the refused call is left")
	name := provision.OwnerNetworkName("roboco-agent-m1")
	require.Contains(t, w.networks(), name, "the host-mode network stays")
	assert.False(t, w.networks()[name].Internal)
}

func TestAForeignNetworkOfTheNameIsAConflict(t *testing.T) {
	w := newWorld(t)
	name := provision.OwnerNetworkName("roboco-agent-f1")
	_, err := w.fake.CreateNetwork(ctxT(t), runtime.NetworkSpec{Name: name, Labels: map[string]string{"someone": "else"}})
	require.NoError(t, err)
	_, err = w.provisioner(w.options()).Provision(ctxT(t), "f1", []string{"redis"})
	require.ErrorIs(t, err, provision.ErrConflict)
	assert.Empty(t, w.owned("roboco-agent-f1"))
	assert.Contains(t, w.networks(), name, "not ours: left alone")
}

func TestTheNetworkGoesWithTheOwnersLastSandbox(t *testing.T) {
	w := newWorld(t)
	p := w.provisioner(w.options())
	first, err := p.Provision(ctxT(t), "l1", []string{"redis"})
	require.NoError(t, err)
	second, err := p.Provision(ctxT(t), "l1", []string{"postgres"})
	require.NoError(t, err)
	other, err := p.Provision(ctxT(t), "l2", []string{"redis"})
	require.NoError(t, err)
	name := provision.OwnerNetworkName("roboco-agent-l1")

	_, err = p.TeardownSandbox(ctxT(t), first)
	require.NoError(t, err)
	assert.Contains(t, w.networks(), name, "a sandbox of the owner is still on it")
	_, err = p.TeardownSandbox(ctxT(t), second)
	require.NoError(t, err)
	assert.NotContains(t, w.networks(), name, "removed with the owner's last sandbox")
	assert.Contains(t, w.networks(), other.Network, "a second owner's network is untouched")
	assert.Len(t, w.events(provision.EventNetworkRemoved), 1)

	_, err = p.Teardown(ctxT(t), "l2")
	require.NoError(t, err)
	assert.Empty(t, w.networks(), "Teardown removes the owner's network")
	_, err = p.Teardown(ctxT(t), "l2")
	require.NoError(t, err, "idempotent")
}

func TestAnAttachedAgentKeepsTheNetworkForTheJanitor(t *testing.T) {
	w := newWorld(t)
	opts := w.options()
	opts.Private = true
	p := w.provisioner(opts)
	sb, err := p.Provision(ctxT(t), "a1", []string{"redis"})
	require.NoError(t, err)
	// The agent, attached as the README says.
	_, err = w.fake.Run(ctxT(t), runtime.RunSpec{Name: "roboco-agent-a1", Image: "redis:8-alpine", Network: sb.Network})
	require.NoError(t, err)
	removed, err := p.Teardown(ctxT(t), "a1")
	require.NoError(t, err, "ErrInUse is not the teardown's error")
	assert.Len(t, removed, 1)
	assert.Contains(t, w.networks(), sb.Network)
	assert.Len(t, w.events(provision.EventNetworkKept), 1)
	assert.Contains(t, w.logs.String(), "network-kept", "logged (debug)")
}

func TestRollbackRemovesTheNetworkItMade(t *testing.T) {
	w := newWorld(t)
	w.fake.Fail(fakeruntime.VerbRun, "roboco-sandbox-redis-r1", errors.New("boom"))
	p := w.provisioner(w.options())
	_, err := p.Provision(ctxT(t), "r1", []string{"postgres", "redis"})
	require.Error(t, err)
	var pe *provision.Error
	require.ErrorAs(t, err, &pe)
	assert.NoError(t, pe.Rollback)
	assert.Empty(t, w.owned("roboco-agent-r1"))
	assert.Empty(t, w.networks(), "the network this call made is gone")
}

func TestRollbackKeepsANetworkAnEarlierCallUses(t *testing.T) {
	w := newWorld(t)
	p := w.provisioner(w.options())
	_, err := p.Provision(ctxT(t), "r2", []string{"postgres"})
	require.NoError(t, err)
	w.fake.Fail(fakeruntime.VerbRun, "roboco-sandbox-redis-r2", errors.New("boom"))
	_, err = p.Provision(ctxT(t), "r2", []string{"redis"})
	require.Error(t, err)
	assert.Len(t, w.owned("roboco-agent-r2"), 1)
	assert.Contains(t, w.networks(), provision.OwnerNetworkName("roboco-agent-r2"))
}

func TestARunThatFindsTheNetworkGoneRecreatesItOnce(t *testing.T) {
	w := newWorld(t)
	name := provision.OwnerNetworkName("roboco-agent-g1")
	var removedOnce atomic.Bool
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbRun && removedOnce.CompareAndSwap(false, true) {
			// A concurrent teardown of the owner's last sandbox.
			return w.fake.RemoveNetwork(ctx, name)
		}
		return nil
	})
	p := w.provisioner(w.options())
	sb, err := p.Provision(ctxT(t), "g1", []string{"redis"})
	require.NoError(t, err)
	assert.Contains(t, w.networks(), name)
	assert.Equal(t, 2, w.fake.Calls(fakeruntime.VerbCreateNetwork), "made, then made again")
	assert.Equal(t, []string{name}, keysOf(w.named(sb.Containers[0].Name).Networks))
}

func TestARunThatFindsTheNetworkGoneTwiceFails(t *testing.T) {
	w := newWorld(t)
	name := provision.OwnerNetworkName("roboco-agent-g2")
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbRun {
			return w.fake.RemoveNetwork(ctx, name)
		}
		return nil
	})
	_, err := w.provisioner(w.options()).Provision(ctxT(t), "g2", []string{"redis"})
	require.ErrorIs(t, err, runtime.ErrNotFound)
	assert.Equal(t, 2, w.fake.Calls(fakeruntime.VerbCreateNetwork), "recreated once, not in a loop")
	assert.Empty(t, w.owned("roboco-agent-g2"))
}

func TestANetworkCreateFailureFailsTheCall(t *testing.T) {
	w := newWorld(t)
	w.fake.Fail(fakeruntime.VerbCreateNetwork, "", errors.New("no pool"))
	_, err := w.provisioner(w.options()).Provision(ctxT(t), "e1", []string{"redis"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no pool")
	assert.Empty(t, w.owned("roboco-agent-e1"))
	assert.Zero(t, w.fake.Calls(fakeruntime.VerbRun), "nothing runs without its network")
}

func TestARuntimeThatCannotListNetworksReusesByName(t *testing.T) {
	w := newWorld(t)
	w.fake.Fail(fakeruntime.VerbListNetworks, "", runtime.ErrUnsupported)
	p := w.provisioner(w.options())
	_, err := p.Provision(ctxT(t), "u1", []string{"redis"})
	require.NoError(t, err)
	_, err = p.Provision(ctxT(t), "u1", []string{"postgres"})
	require.NoError(t, err, "the second call reuses the network")
	assert.Len(t, w.owned("roboco-agent-u1"), 2)
}

// TestALosingCallLeavesTheNetworkToASiblingInFlight: call A makes the
// owner's network and fails; call B of the same owner found the network
// made and runs its sandbox only after A has rolled back. A's rollback
// must not remove the network B is about to join (B would find it gone
// and have to make it again): the last of the owner's overlapping calls
// to leave decides, and B's sandbox then keeps it.
func TestALosingCallLeavesTheNetworkToASiblingInFlight(t *testing.T) {
	w := newWorld(t)
	name := provision.OwnerNetworkName("roboco-agent-f1")
	bRuns := make(chan struct{})
	aDone := make(chan struct{})
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb != fakeruntime.VerbRun {
			return nil
		}
		switch c.Object {
		case "roboco-sandbox-redis-f1": // A's: fails once B is about to run
			select {
			case <-bRuns:
				return errors.New("boom")
			case <-ctx.Done():
				return ctx.Err()
			}
		case "roboco-sandbox-pg-f1": // B's: runs after A returned
			close(bRuns)
			select {
			case <-aDone:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	p := w.provisioner(w.options())
	ctx := ctxT(t)
	var aErr error
	go func() {
		defer close(aDone)
		_, aErr = p.Provision(ctx, "f1", []string{"redis"})
	}()
	// B starts once A has made the network.
	require.Eventually(t, func() bool { return w.fake.Calls(fakeruntime.VerbCreateNetwork) == 1 }, 10*time.Second, time.Millisecond)
	sb, err := p.Provision(ctx, "f1", []string{"postgres"})
	<-aDone
	require.Error(t, aErr, "A's run failed")
	require.NoError(t, err, "B")
	assert.Zero(t, w.fake.Calls(fakeruntime.VerbRemoveNetwork), "B joined the network A made: A's rollback did not remove it")
	assert.Equal(t, 2, w.fake.Calls(fakeruntime.VerbCreateNetwork), "A made it, B found it made: nobody made it again")
	assert.Contains(t, w.networks(), name)
	assert.Equal(t, []string{name}, keysOf(w.named(sb.Containers[0].Name).Networks))
}

// TestTheLastLosingCallRemovesTheNetwork: two overlapping calls of one
// owner both fail; the network the first made goes with the last one out.
func TestTheLastLosingCallRemovesTheNetwork(t *testing.T) {
	w := newWorld(t)
	bRuns := make(chan struct{})
	aDone := make(chan struct{})
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb != fakeruntime.VerbRun {
			return nil
		}
		switch c.Object {
		case "roboco-sandbox-redis-f2":
			<-bRuns
			return errors.New("boom A")
		case "roboco-sandbox-pg-f2":
			close(bRuns)
			<-aDone
			return errors.New("boom B")
		}
		return nil
	})
	p := w.provisioner(w.options())
	ctx := ctxT(t)
	go func() {
		defer close(aDone)
		_, _ = p.Provision(ctx, "f2", []string{"redis"})
	}()
	require.Eventually(t, func() bool { return w.fake.Calls(fakeruntime.VerbCreateNetwork) == 1 }, 10*time.Second, time.Millisecond)
	_, err := p.Provision(ctx, "f2", []string{"postgres"})
	require.Error(t, err)
	assert.Empty(t, w.owned("roboco-agent-f2"))
	assert.Empty(t, w.networks(), "the last call out removed the network the first made")
}
