package docker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// retryMessage is what the adapter logs, at debug level, for each retry.
const retryMessage = "retrying with fresh ports"

// takenAddr is the address the injected start failures name: not a port
// any test asks for.
const takenAddr = "127.0.0.1:1"

// portRace stands in for the other runtime of the race. The daemon picks
// an ephemeral port at the start, so a test cannot take it beforehand:
// as the hook run before each start of Run, portRace answers the first
// upTo attempts with the error the daemon gives when its proxy finds the
// port taken, instead of starting them; the containers, their removal and
// the attempts after those are the real daemon's.
type portRace struct {
	upTo int

	mu       sync.Mutex
	attempts int
	ids      []string
}

// newPortRace installs a portRace as r's beforeStart hook.
func newPortRace(t *testing.T, r *Runtime, upTo int) *portRace {
	p := &portRace{upTo: upTo}
	r.beforeStart = p.beforeStart
	t.Cleanup(func() { r.beforeStart = nil })
	return p
}

func (p *portRace) beforeStart(_ context.Context, attempt int, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts = attempt
	p.ids = append(p.ids, id)
	if attempt > p.upTo {
		return nil
	}
	return daemonError(fmt.Sprintf("driver failed programming external connectivity on endpoint x (%s): "+
		"Error starting userland proxy: listen tcp4 %s: bind: address already in use", id, takenAddr))
}

// TestRunRetriesATakenEphemeralPort: a start that fails because its
// ephemeral host port was taken is retried with a new container under the
// same name, which gets its own ports; a fixed port beside it (released by
// the daemon when the start failed) is bound by the retry.
func TestRunRetriesATakenEphemeralPort(t *testing.T) {
	logs := &adaptertest.LogRecorder{}
	r := newTestRuntime(t, WithLogger(slog.New(logs)))
	img := testkit.Image(t, r, "busybox")
	tests := []struct {
		name  string
		ports func() []runtime.PortSpec
	}{
		{name: "OnlyEphemeralPorts", ports: func() []runtime.PortSpec {
			return []runtime.PortSpec{{ContainerPort: 8080}, {ContainerPort: 8081}}
		}},
		{name: "BesideAFixedPort", ports: func() []runtime.PortSpec {
			return []runtime.PortSpec{{ContainerPort: 8080}, {ContainerPort: 8081, HostPort: testkit.FreePort(t)}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := adaptertest.Ctx(t)
			labels := adaptertest.Labels(t, r)
			spec := adaptertest.Sleeper(img, "sandboxer-test-portrace-"+testkit.RandomHex(4), labels)
			spec.Ports = tc.ports()
			race := newPortRace(t, r, 1)
			before := len(logs.Matching(slog.LevelDebug, retryMessage))

			c, err := r.Run(ctx, spec)
			require.NoError(t, err)

			assert.Equal(t, 2, race.attempts, "one retry")
			assert.True(t, c.Running())
			require.Len(t, c.Ports, len(spec.Ports))
			for _, b := range c.Ports {
				assert.Positive(t, b.HostPort)
			}
			require.Len(t, race.ids, 2)
			assert.NotEqual(t, race.ids[0], c.ID)
			_, err = r.Inspect(ctx, race.ids[0])
			assert.ErrorIs(t, err, runtime.ErrNotFound, "the first attempt's container was removed")
			all, err := r.List(ctx, labels)
			require.NoError(t, err)
			require.Len(t, all, 1, "exactly one container")
			assert.Equal(t, c.ID, all[0].ID)

			retries := logs.Matching(slog.LevelDebug, retryMessage)
			require.Len(t, retries, before+1, "the retry is logged at debug level")
			last := retries[len(retries)-1]
			assert.Equal(t, "1", adaptertest.Attr(last, "attempt"))
			assert.Equal(t, spec.Name, adaptertest.Attr(last, "container"))
			assert.Equal(t, takenAddr, adaptertest.Attr(last, "port"))
		})
	}
}

// TestRunGivesUpOnEphemeralPortsAfterThreeAttempts: the retries are
// bounded, and what is left is an error naming the port and nothing else.
func TestRunGivesUpOnEphemeralPortsAfterThreeAttempts(t *testing.T) {
	logs := &adaptertest.LogRecorder{}
	r := newTestRuntime(t, WithLogger(slog.New(logs)))
	ctx := adaptertest.Ctx(t)
	labels := adaptertest.Labels(t, r)
	spec := adaptertest.Sleeper(testkit.Image(t, r, "busybox"), "sandboxer-test-portrace-"+testkit.RandomHex(4), labels)
	spec.Ports = []runtime.PortSpec{{ContainerPort: 8080}}
	race := newPortRace(t, r, adapterkit.MaxRunAttempts)

	_, err := r.Run(ctx, spec)
	require.Error(t, err)

	assert.Equal(t, adapterkit.MaxRunAttempts, race.attempts)
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, runtime.OpRun, re.Op)
	adaptertest.AssertNoKind(t, err)
	assert.Contains(t, err.Error(), spec.Name)
	assert.Contains(t, err.Error(), fmt.Sprintf("published host port %s is already in use (%d attempts", takenAddr, adapterkit.MaxRunAttempts))
	assert.Len(t, logs.Matching(slog.LevelDebug, retryMessage), adapterkit.MaxRunAttempts-1)
	adaptertest.AssertNothingLeft(t, ctx, r, labels, spec.Name)
}

// TestRunWithATakenFixedHostPort: a host port asked for explicitly and
// held by someone else (a process, or another container) is a real
// conflict: no retry, an error naming the port, no container left.
func TestRunWithATakenFixedHostPort(t *testing.T) {
	logs := &adaptertest.LogRecorder{}
	r := newTestRuntime(t, WithLogger(slog.New(logs)))
	img := testkit.Image(t, r, "busybox")
	tests := []struct {
		name string
		// hold takes a host port and returns it.
		hold      func(t *testing.T, labels map[string]string) int
		ephemeral bool
		// wantMsg is what the daemon says (after the port).
		wantMsg string
	}{
		{name: "HeldByAProcess", hold: func(t *testing.T, _ map[string]string) int { return testkit.HoldPort(t) }, wantMsg: "bind: address already in use"},
		{name: "HeldByAProcessBesideAnEphemeralPort", hold: func(t *testing.T, _ map[string]string) int { return testkit.HoldPort(t) }, ephemeral: true, wantMsg: "bind: address already in use"},
		{
			name: "HeldByAnotherContainer",
			hold: func(t *testing.T, labels map[string]string) int {
				other := adaptertest.Sleeper(img, "sandboxer-test-portholder-"+testkit.RandomHex(4), labels)
				other.Ports = []runtime.PortSpec{{ContainerPort: 8080, HostPort: testkit.FreePort(t)}}
				c, err := r.Run(adaptertest.Ctx(t), other)
				require.NoError(t, err)
				require.Len(t, c.Ports, 1)
				return c.Ports[0].HostPort
			},
			ephemeral: true,
			wantMsg:   "port is already allocated",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := adaptertest.Ctx(t)
			labels := adaptertest.Labels(t, r)
			held := tc.hold(t, labels)
			spec := adaptertest.Sleeper(img, "sandboxer-test-portbusy-"+testkit.RandomHex(4), labels)
			spec.Ports = []runtime.PortSpec{{ContainerPort: 8080, HostPort: held}}
			if tc.ephemeral {
				spec.Ports = append(spec.Ports, runtime.PortSpec{ContainerPort: 8081})
			}
			race := newPortRace(t, r, 0)
			before := len(logs.Matching(slog.LevelDebug, retryMessage))

			_, err := r.Run(ctx, spec)
			require.Error(t, err)

			addr := fmt.Sprintf("127.0.0.1:%d", held)
			assert.Contains(t, err.Error(), "published host port "+addr+" is already in use: ")
			assert.Contains(t, err.Error(), tc.wantMsg)
			assert.Contains(t, err.Error(), spec.Name)
			adaptertest.AssertNoKind(t, err)
			assert.Equal(t, 1, race.attempts, "not retried")
			assert.Len(t, logs.Matching(slog.LevelDebug, retryMessage), before, "no retry logged")
			left, err := r.List(ctx, map[string]string{adaptertest.RunLabel: labels[adaptertest.RunLabel]})
			require.NoError(t, err)
			for _, c := range left {
				assert.NotEqual(t, spec.Name, c.Name, "a failed run leaves no container")
			}
			_, err = r.Inspect(ctx, spec.Name)
			assert.ErrorIs(t, err, runtime.ErrNotFound)
		})
	}
}
