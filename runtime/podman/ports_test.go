package podman

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
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

// portTaker plays the other runtime of the race: as the hook run before
// each start of Run, it binds the host ports the service chose at create
// for the attempts it is told to, the way another runtime's proxy takes a
// port between Podman's choice and its bind.
type portTaker struct {
	r *Runtime
	// upTo is the last attempt whose ports are taken.
	upTo int
	// only, when non-zero, is the one container port whose host port is
	// taken.
	only int

	mu        sync.Mutex
	attempts  int
	ids       []string
	taken     []string // "127.0.0.1:38389", in the order taken
	listeners []net.Listener
}

// newPortTaker installs a portTaker as r's beforeStart hook; its listeners
// are closed when the test ends.
func newPortTaker(t *testing.T, r *Runtime, upTo, only int) *portTaker {
	p := &portTaker{r: r, upTo: upTo, only: only}
	r.beforeStart = p.beforeStart
	t.Cleanup(func() {
		r.beforeStart = nil
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, l := range p.listeners {
			_ = l.Close()
		}
	})
	return p
}

func (p *portTaker) beforeStart(ctx context.Context, attempt int, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts = attempt
	p.ids = append(p.ids, id)
	if attempt > p.upTo {
		return nil
	}
	c, err := p.r.Inspect(ctx, id)
	if err != nil {
		return fmt.Errorf("port taker: %w", err)
	}
	for _, b := range c.Ports {
		if p.only != 0 && b.ContainerPort != p.only {
			continue
		}
		if b.HostPort == 0 {
			return fmt.Errorf("port taker: no host port chosen at create for %d/%s", b.ContainerPort, b.Protocol)
		}
		addr := net.JoinHostPort(b.HostIP, strconv.Itoa(b.HostPort))
		l, err := net.Listen("tcp4", addr)
		if err != nil {
			return fmt.Errorf("port taker: %w", err)
		}
		p.listeners = append(p.listeners, l)
		p.taken = append(p.taken, addr)
	}
	return nil
}

// TestRunRetriesATakenEphemeralPort provokes the race of two runtimes on
// one host: the ephemeral port Podman chose at create is taken before the
// start binds it. Run removes the failed container and creates it again
// with a fresh port.
func TestRunRetriesATakenEphemeralPort(t *testing.T) {
	logs := &adaptertest.LogRecorder{}
	r := newTestRuntime(t, WithLogger(slog.New(logs)))
	ctx := adaptertest.Ctx(t)
	labels := adaptertest.Labels(t, r)
	spec := adaptertest.Sleeper(testkit.Image(t, r, "busybox"), "sandboxer-test-portrace-"+testkit.RandomHex(4), labels)
	spec.Ports = []runtime.PortSpec{{ContainerPort: 8080}, {ContainerPort: 8081}}
	taker := newPortTaker(t, r, 1, 0)

	c, err := r.Run(ctx, spec)
	require.NoError(t, err)

	assert.Equal(t, 2, taker.attempts, "one retry")
	require.Len(t, taker.taken, 2, "the first attempt's ports were taken")
	assert.True(t, c.Running())
	require.Len(t, c.Ports, 2)
	for _, b := range c.Ports {
		assert.Positive(t, b.HostPort)
		assert.NotContains(t, taker.taken, net.JoinHostPort(b.HostIP, strconv.Itoa(b.HostPort)), "a fresh port")
	}
	_, err = r.Inspect(ctx, taker.ids[0])
	assert.ErrorIs(t, err, runtime.ErrNotFound, "the first attempt's container was removed")
	all, err := r.List(ctx, labels)
	require.NoError(t, err)
	require.Len(t, all, 1, "exactly one container")
	assert.Equal(t, c.ID, all[0].ID)

	retries := logs.Matching(slog.LevelDebug, retryMessage)
	require.Len(t, retries, 1, "the retry is logged at debug level")
	assert.Equal(t, "1", adaptertest.Attr(retries[0], "attempt"))
	assert.Equal(t, spec.Name, adaptertest.Attr(retries[0], "container"))
	assert.Contains(t, taker.taken, adaptertest.Attr(retries[0], "port"), "the log names the taken port")
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
	taker := newPortTaker(t, r, adapterkit.MaxRunAttempts, 0)

	_, err := r.Run(ctx, spec)
	require.Error(t, err)

	assert.Equal(t, adapterkit.MaxRunAttempts, taker.attempts)
	require.Len(t, taker.taken, adapterkit.MaxRunAttempts)
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, runtime.OpRun, re.Op)
	adaptertest.AssertNoKind(t, err)
	assert.Contains(t, err.Error(), spec.Name)
	assert.Contains(t, err.Error(), fmt.Sprintf("published host port %s is already in use (%d attempts", taker.taken[adapterkit.MaxRunAttempts-1], adapterkit.MaxRunAttempts))
	assert.Len(t, logs.Matching(slog.LevelDebug, retryMessage), adapterkit.MaxRunAttempts-1)
	adaptertest.AssertNothingLeft(t, ctx, r, labels, spec.Name)
}

// TestRunWithATakenFixedHostPort: a host port asked for explicitly and
// held by someone else is a real conflict: no retry, an error naming the
// port, no container left.
func TestRunWithATakenFixedHostPort(t *testing.T) {
	tests := []struct {
		name  string
		ports func(held int) []runtime.PortSpec
		// take, when non-zero, is the container port whose ephemeral host
		// port the test takes before the start (else the held port is
		// the taken one).
		take int
	}{
		{
			name:  "OnlyFixedPorts",
			ports: func(held int) []runtime.PortSpec { return []runtime.PortSpec{{ContainerPort: 8080, HostPort: held}} },
		},
		{
			name: "FixedPortBesideAnEphemeralOne",
			ports: func(held int) []runtime.PortSpec {
				return []runtime.PortSpec{{ContainerPort: 8080, HostPort: held}, {ContainerPort: 8081}}
			},
		},
		{
			// The ephemeral port is the one taken, but Podman keeps the
			// failed start's fixed port bound until its garbage
			// collection: a retry would fail on it.
			name: "EphemeralPortTakenBesideAFixedOne",
			ports: func(int) []runtime.PortSpec {
				return []runtime.PortSpec{{ContainerPort: 8080, HostPort: testkit.FreePort(t)}, {ContainerPort: 8081}}
			},
			take: 8081,
		},
	}
	logs := &adaptertest.LogRecorder{}
	r := newTestRuntime(t, WithLogger(slog.New(logs)))
	img := testkit.Image(t, r, "busybox")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := adaptertest.Ctx(t)
			labels := adaptertest.Labels(t, r)
			held := testkit.HoldPort(t)
			spec := adaptertest.Sleeper(img, "sandboxer-test-portbusy-"+testkit.RandomHex(4), labels)
			spec.Ports = tc.ports(held)
			upTo := 0
			if tc.take != 0 {
				upTo = 1
			}
			taker := newPortTaker(t, r, upTo, tc.take)
			before := len(logs.Matching(slog.LevelDebug, retryMessage))

			_, err := r.Run(ctx, spec)
			require.Error(t, err)

			want := fmt.Sprintf("127.0.0.1:%d", held)
			if tc.take != 0 {
				require.Len(t, taker.taken, 1)
				want = taker.taken[0]
			}
			assert.Contains(t, err.Error(), "published host port "+want+" is already in use: ")
			assert.Contains(t, err.Error(), spec.Name)
			adaptertest.AssertNoKind(t, err)
			assert.Equal(t, 1, taker.attempts, "not retried")
			assert.Len(t, logs.Matching(slog.LevelDebug, retryMessage), before, "no retry logged")
			adaptertest.AssertNothingLeft(t, ctx, r, labels, spec.Name)
		})
	}
}
