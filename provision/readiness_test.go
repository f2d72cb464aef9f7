package provision_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/redis"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

func TestParseReadiness(t *testing.T) {
	for in, want := range map[string]provision.Readiness{"": provision.ReadinessAuto, "auto": provision.ReadinessAuto, "wire": provision.ReadinessWire, "exec": provision.ReadinessExec} {
		got, err := provision.ParseReadiness(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := provision.ParseReadiness("tcp")
	assert.ErrorIs(t, err, provision.ErrInvalid)
	assert.ErrorIs(t, provision.Options{Readiness: "tcp"}.Validate(), provision.ErrInvalid)
}

// TestReachable: the one dial that decides between the wire check and the
// exec probe. A refusal answers (nothing listens yet, but the address is
// routed to), as does a listener; silence does not.
func TestReachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	listening := endpointOf(t, ln.Addr().String())
	refused := endpointOf(t, strings.TrimPrefix(testkit.RefusedTCP(t), "tcp://"))

	ok, err := provision.Reachable(context.Background(), listening)
	assert.True(t, ok, "a listener answers: %v", err)
	ok, err = provision.Reachable(context.Background(), refused)
	assert.True(t, ok, "a refusal answers: nothing listens yet, but the address is reachable: %v", err)

	// A dial that times out (a firewall that drops, no route back) means
	// "cannot reach from here".
	start := time.Now()
	ok, err = provision.Reachable(context.Background(), endpointOf(t, testkit.SilentTCP(t)))
	assert.False(t, ok)
	assert.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second, "the decision is bounded")
}

func endpointOf(t *testing.T, addr string) engines.Endpoint {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	return engines.Endpoint{Host: host, Port: p}
}

// wireRedis is the redis engine with a scripted login: it records the URLs
// it was asked to log in at and succeeds from the nth attempt on (never,
// when n is 0), failing before with err.
type wireRedis struct {
	redis.Engine
	n    int64
	err  error
	mu   *sync.Mutex
	urls *[]string
	got  *atomic.Int64
}

func newWireRedis(n int64, err error) wireRedis {
	return wireRedis{n: n, err: err, mu: &sync.Mutex{}, urls: &[]string{}, got: &atomic.Int64{}}
}

func (e wireRedis) Login(_ context.Context, rawURL string) (engines.Session, error) {
	e.mu.Lock()
	*e.urls = append(*e.urls, rawURL)
	e.mu.Unlock()
	if k := e.got.Add(1); e.n > 0 && k >= e.n {
		return engines.Session{Client: "scripted"}, nil
	}
	return engines.Session{}, e.err
}

func (e wireRedis) logins() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), *e.urls...)
}

// TestReadinessMode: which check judges a sandbox ready, on the fake
// runtime (whose published ports are real 127.0.0.1 listeners, and whose
// network addresses are routed nowhere).
func TestReadinessMode(t *testing.T) {
	unreachable := func(context.Context, engines.Endpoint) (bool, error) {
		return false, errors.New("i/o timeout")
	}
	answers := func(context.Context, engines.Endpoint) (bool, error) { return true, nil }
	tests := []struct {
		name      string
		readiness provision.Readiness
		network   string
		reach     func(context.Context, engines.Endpoint) (bool, error)
		wantMode  provision.Readiness
		wantWhy   string
		rootless  bool // the runtime says it is rootless
	}{
		{"HostModeIsWire", provision.ReadinessAuto, "", unreachable, provision.ReadinessWire, "host mode", false},
		{"ReachableNetworkIsWire", provision.ReadinessAuto, "sbx-net", answers, provision.ReadinessWire, "answers from here", false},
		{"UnreachableNetworkFallsBackToExec", provision.ReadinessAuto, "sbx-net", unreachable, provision.ReadinessExec, "does not answer from here (i/o timeout)", false},
		{"RootlessRuntimesNetworkIsExecEvenWhenADialAnswers", provision.ReadinessAuto, "sbx-net", answers, provision.ReadinessExec, "rootless: ", true},
		{"ForcedExecInHostMode", provision.ReadinessExec, "", answers, provision.ReadinessExec, "forced", false},
		{"ForcedWireOnAnUnreachableNetwork", provision.ReadinessWire, "sbx-net", unreachable, provision.ReadinessWire, "forced", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			provision.SetReachable(t, tt.reach)
			w := newWorld(t)
			eng := newWireRedis(3, errors.New("connection refused"))
			opts := w.options()
			opts.Registry = engines.MustRegistry(eng)
			opts.Readiness = tt.readiness
			opts.Network = tt.network
			w.fake.SetRootless(tt.rootless)
			if tt.network != "" {
				_, err := w.fake.CreateNetwork(context.Background(), runtime.NetworkSpec{Name: tt.network})
				require.NoError(t, err)
			}
			sb, err := w.provisioner(opts).Provision(ctxT(t), "rd", []string{"redis"})
			require.NoError(t, err)
			ready := w.events(provision.EventReady)
			require.Len(t, ready, 1)
			assert.Equal(t, tt.wantMode, ready[0].Readiness)
			assert.Contains(t, ready[0].ReadinessWhy, tt.wantWhy)
			logins := eng.logins()
			if tt.wantMode == provision.ReadinessExec {
				assert.Empty(t, logins, "no login in exec mode")
				return
			}
			assert.Equal(t, 3, ready[0].Attempts, "ready at the first successful login")
			require.Len(t, logins, 3)
			assert.Equal(t, sb.Map()["ROBOCO_TEST_REDIS_URL"], logins[0], "the login uses the URL the consumer gets")
			u, err := url.Parse(logins[0])
			require.NoError(t, err)
			want := "127.0.0.1"
			if tt.network != "" {
				want = sb.Containers[0].Endpoint.Host
				assert.NotEqual(t, "127.0.0.1", want)
			}
			assert.Equal(t, want, u.Hostname(), "at the consumer's endpoint")
		})
	}
}

// TestWireCheckNeverAcceptingFailsWithTheLastClientError: a server that
// never accepts the handed-out password fails the provision at its
// deadline with the client's last error, the password redacted, and the
// sandbox rolled back.
func TestWireCheckNeverAcceptingFailsWithTheLastClientError(t *testing.T) {
	w := newWorld(t)
	var pw atomic.Value
	eng := newWireRedis(0, nil)
	rejecting := rejectingRedis{wireRedis: eng, pw: &pw}
	opts := w.options()
	opts.Registry = engines.MustRegistry(rejecting)
	opts.Readiness = provision.ReadinessWire
	opts.ReadyTimeout = 500 * time.Millisecond
	_, err := w.provisioner(opts).Provision(ctxT(t), "rej", []string{"redis"})
	require.Error(t, err)
	assert.ErrorIs(t, err, provision.ErrNotReady)
	assert.ErrorContains(t, err, "WRONGPASS invalid username-password pair")
	secret, _ := pw.Load().(string)
	require.NotEmpty(t, secret)
	assert.NotContains(t, err.Error(), secret, "the password is redacted")
	assert.Empty(t, w.owned("roboco-agent-rej"), "rolled back")
	assert.Greater(t, len(eng.logins()), 3, "polled, not one attempt")
}

// rejectingRedis answers every login with redis's wrong-password error,
// quoting the URL (a careless client might) to prove the redaction.
type rejectingRedis struct {
	wireRedis
	pw *atomic.Value
}

func (e rejectingRedis) Login(ctx context.Context, rawURL string) (engines.Session, error) {
	_, _ = e.wireRedis.Login(ctx, rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		return engines.Session{}, err
	}
	p, _ := u.User.Password()
	e.pw.Store(p)
	return engines.Session{}, errors.New("WRONGPASS invalid username-password pair or user is disabled (" + rawURL + ")")
}

// TestWireCheckStopsAtAnExitedSandbox: a sandbox that exits while the
// wire check polls fails the provision long before its deadline.
func TestWireCheckStopsAtAnExitedSandbox(t *testing.T) {
	w := newWorld(t)
	eng := newWireRedis(0, errors.New("connection refused"))
	opts := w.options()
	opts.Registry = engines.MustRegistry(eng)
	opts.Readiness = provision.ReadinessWire
	opts.ReadyTimeout = time.Minute
	go func() {
		// Once the wire check polls, the sandbox crashes.
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); <-tick.C {
			if len(eng.logins()) > 0 {
				cs, _ := w.fake.List(context.Background(), map[string]string{keys.Owner: "roboco-agent-dies"})
				for _, c := range cs {
					w.fake.SetState(c.ID, runtime.StateExited, 137)
				}
				return
			}
		}
	}()
	start := time.Now()
	_, err := w.provisioner(opts).Provision(ctxT(t), "dies", []string{"redis"})
	require.Error(t, err)
	assert.ErrorIs(t, err, provision.ErrNotReady)
	assert.ErrorContains(t, err, "sandbox is exited (exit code 137)")
	assert.Less(t, time.Since(start), 10*time.Second, "did not wait out the deadline")
}

// TestWireDelay: the wire check polls every 5 ms for its first 100 ms (a
// refused dial costs microseconds, and a light server is up by then), then
// backs off by half each pause up to the baseline's 20 ms, never beyond.
func TestWireDelay(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	tests := []struct {
		name          string
		elapsed, prev time.Duration
		want          time.Duration
	}{
		{"FirstPause", 0, ms(5), ms(5)},
		{"StillBrisk", ms(99), ms(5), ms(5)},
		{"BackOffStarts", ms(100), ms(5), ms(7.5)},
		{"BacksOffByHalf", ms(120), ms(10), ms(15)},
		{"Capped", ms(150), ms(15), ms(20)},
		{"StaysCapped", ms(5000), ms(20), ms(20)},
		{"NoPrevious", ms(200), 0, ms(7.5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, provision.WireDelay(tt.elapsed, tt.prev))
		})
	}
	// Over a 15 s deadline the schedule never pauses longer than 20 ms:
	// the wait after the server is up stays within one pause.
	var elapsed, prev time.Duration
	for elapsed < 15*time.Second {
		prev = provision.WireDelay(elapsed, prev)
		require.LessOrEqual(t, prev, ms(20), "at %s", elapsed)
		require.GreaterOrEqual(t, prev, ms(5), "at %s", elapsed)
		elapsed += prev
	}
}
