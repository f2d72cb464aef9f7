package adapterkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// errBusy is a start that failed on a taken host port, as a backend says it.
func errBusy(addr string) error {
	return fmt.Errorf("listen tcp4 %s: bind: address already in use", addr)
}

var testBusyPatterns = []*regexp.Regexp{regexp.MustCompile(`listen tcp4 (\S+): bind: address already in use`)}

// fakeBackend records what a Runner asked of it; starts[i] is the error of
// the i-th start (nil past the end).
type fakeBackend struct {
	starts     []error
	discardErr error
	inspectErr error

	created   []string
	discarded []string
	attempts  []int
	log       bytes.Buffer
}

func (f *fakeBackend) runner() Runner {
	return Runner{
		Runtime: "fake",
		Log:     slog.New(slog.NewTextHandler(&f.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Create: func(context.Context) (string, error) {
			id := fmt.Sprintf("c%d", len(f.created)+1)
			f.created = append(f.created, id)
			return id, nil
		},
		Start: func(_ context.Context, attempt int, _ string) error {
			f.attempts = append(f.attempts, attempt)
			if i := attempt - 1; i < len(f.starts) {
				return f.starts[i]
			}
			return nil
		},
		Inspect: func(_ context.Context, id string) (runtime.Container, error) {
			return runtime.Container{ID: id, State: runtime.StateRunning}, f.inspectErr
		},
		Discard: func(_ context.Context, id string) error {
			f.discarded = append(f.discarded, id)
			return f.discardErr
		},
		PortBusy: func(err error) (string, int, bool) {
			if err == nil || !strings.Contains(err.Error(), "address already in use") {
				return "", 0, false
			}
			addr, port, _ := FindBusyPort(err.Error(), testBusyPatterns)
			return addr, port, true
		},
		Retryable: func(ports []runtime.PortSpec, taken int) bool {
			for _, p := range ports {
				if p.HostPort == 0 {
					return taken != 8080
				}
			}
			return false
		},
		Wrap: func(object string, err error) error {
			return runtime.NewError("fake", runtime.OpRun, object, nil, err)
		},
	}
}

func TestRunnerRun(t *testing.T) {
	ephemeral := runtime.RunSpec{Name: "box", Image: "i", Ports: []runtime.PortSpec{{ContainerPort: 80}}}
	fixed := runtime.RunSpec{Name: "box", Image: "i", Ports: []runtime.PortSpec{{ContainerPort: 80, HostPort: 8080}}}
	other := errors.New("OCI runtime error")
	cases := []struct {
		name          string
		spec          runtime.RunSpec
		starts        []error
		discardErr    error
		inspectErr    error
		wantID        string
		wantErr       []string
		wantAttempts  []int
		wantDiscarded []string
		wantRetries   int
	}{
		{name: "StartsFirstTime", spec: ephemeral, wantID: "c1", wantAttempts: []int{1}},
		{
			name: "OtherStartFailureIsNotRetried", spec: ephemeral, starts: []error{other},
			wantErr: []string{"fake: run box: OCI runtime error"}, wantAttempts: []int{1}, wantDiscarded: []string{"c1"},
		},
		{
			name: "TakenEphemeralPortIsRetried", spec: ephemeral, starts: []error{errBusy("127.0.0.1:40001")},
			wantID: "c2", wantAttempts: []int{1, 2}, wantDiscarded: []string{"c1"}, wantRetries: 1,
		},
		{
			name: "GivesUpAfterMaxAttempts", spec: ephemeral,
			starts:       []error{errBusy("127.0.0.1:40001"), errBusy("127.0.0.1:40002"), errBusy("127.0.0.1:40003")},
			wantErr:      []string{"fake: run box: published host port 127.0.0.1:40003 is already in use (3 attempts, each with fresh ephemeral host ports)"},
			wantAttempts: []int{1, 2, 3}, wantDiscarded: []string{"c1", "c2", "c3"}, wantRetries: 2,
		},
		{
			name: "TakenFixedPortIsNotRetried", spec: fixed, starts: []error{errBusy("127.0.0.1:8080")},
			wantErr:      []string{"fake: run box: published host port 127.0.0.1:8080 is already in use: listen tcp4"},
			wantAttempts: []int{1}, wantDiscarded: []string{"c1"},
		},
		{
			name: "NotRetriedWhenTheContainerStays", spec: ephemeral, starts: []error{errBusy("127.0.0.1:40001")}, discardErr: errors.New("still there"),
			wantErr: []string{"is already in use"}, wantAttempts: []int{1}, wantDiscarded: []string{"c1"},
		},
		{
			name: "UnseenContainerIsDiscarded", spec: ephemeral, inspectErr: errors.New("inspect failed"),
			wantErr: []string{"inspect failed"}, wantAttempts: []int{1}, wantDiscarded: []string{"c1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBackend{starts: tc.starts, discardErr: tc.discardErr, inspectErr: tc.inspectErr}
			c, err := f.runner().Run(t.Context(), tc.spec)
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, m := range tc.wantErr {
					assert.Contains(t, err.Error(), m)
				}
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.wantID, c.ID)
			}
			assert.Equal(t, tc.wantAttempts, f.attempts, "attempts")
			assert.Equal(t, tc.wantDiscarded, f.discarded, "discarded")
			assert.Equal(t, tc.wantRetries, strings.Count(f.log.String(), "retrying with fresh ports"), "retries logged")
		})
	}

	t.Run("NotRetriedOnceTheCallerGaveUp", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		f := &fakeBackend{}
		r := f.runner()
		r.Start = func(context.Context, int, string) error {
			cancel()
			return errBusy("127.0.0.1:40001")
		}
		_, err := r.Run(ctx, ephemeral)
		assert.ErrorContains(t, err, "is already in use")
		assert.Equal(t, []string{"c1"}, f.created)
	})
	t.Run("CreateFailureIsReturnedAsItIs", func(t *testing.T) {
		f := &fakeBackend{}
		r := f.runner()
		want := runtime.NewError("fake", runtime.OpRun, "box", runtime.ErrImageNotFound, nil)
		r.Create = func(context.Context) (string, error) { return "", want }
		_, err := r.Run(t.Context(), ephemeral)
		assert.Same(t, want, err)
		assert.Empty(t, f.attempts)
	})
}

func TestPortBusyError(t *testing.T) {
	cause := errors.New("bind failed")
	assert.Equal(t, "a published host port is already in use: bind failed", PortBusyError("", 1, cause).Error())
	assert.Equal(t, "published host port 127.0.0.1:1 is already in use: bind failed", PortBusyError("127.0.0.1:1", 1, cause).Error())
	err := PortBusyError("127.0.0.1:1", 3, cause)
	assert.Equal(t, "published host port 127.0.0.1:1 is already in use (3 attempts, each with fresh ephemeral host ports): bind failed", err.Error())
	assert.ErrorIs(t, err, cause)
}

func TestFindBusyPort(t *testing.T) {
	patterns := []*regexp.Regexp{
		regexp.MustCompile(`listen tcp4 (\S+): bind`),
		regexp.MustCompile(`failed to bind port (\d+) `),
		regexp.MustCompile(`host port for (\[[0-9a-fA-F:.]+\]|[0-9.]+):(\d+)`),
		regexp.MustCompile(`Bind for (\S+) failed`),
	}
	cases := []struct {
		name      string
		msg       string
		wantAddr  string
		wantPort  int
		wantFound bool
	}{
		{name: "Address", msg: "listen tcp4 127.0.0.1:38389: bind: address already in use", wantAddr: "127.0.0.1:38389", wantPort: 38389, wantFound: true},
		{name: "PortAlone", msg: "failed to bind port 8080 (address already in use)", wantAddr: "8080", wantPort: 8080, wantFound: true},
		{name: "IPAndPortGroups", msg: "host port for 0.0.0.0:7148:172.18.0.2:7148/tcp", wantAddr: "0.0.0.0:7148", wantPort: 7148, wantFound: true},
		{name: "IPv6AndPortGroups", msg: "host port for [::1]:7148", wantAddr: "[::1]:7148", wantPort: 7148, wantFound: true},
		{name: "AddressWithoutPort", msg: "Bind for somewhere failed", wantAddr: "somewhere", wantFound: true},
		{name: "NoMatch", msg: "address already in use"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, port, found := FindBusyPort(tc.msg, patterns)
			assert.Equal(t, tc.wantFound, found, "found")
			assert.Equal(t, tc.wantAddr, addr, "addr")
			assert.Equal(t, tc.wantPort, port, "port")
		})
	}
}

func TestDiscard(t *testing.T) {
	t.Run("RunsAfterTheCallerGaveUp", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		var sawErr error
		var sawDeadline bool
		err := Discard(ctx, slog.New(slog.DiscardHandler), "fake", runtime.OpRun, "c1", func(ctx context.Context, id string) error {
			sawErr = ctx.Err()
			_, sawDeadline = ctx.Deadline()
			return nil
		})
		require.NoError(t, err)
		assert.NoError(t, sawErr, "the removal's context is not the cancelled one")
		assert.True(t, sawDeadline, "the removal is bounded")
	})
	t.Run("FailureIsLoggedAndReturned", func(t *testing.T) {
		var log bytes.Buffer
		gone := errors.New("busy")
		err := Discard(t.Context(), slog.New(slog.NewTextHandler(&log, nil)), "fake", runtime.OpCreate, "c1", func(context.Context, string) error { return gone })
		assert.Same(t, gone, err)
		assert.Contains(t, log.String(), "fake: could not remove a half-made container")
		assert.Contains(t, log.String(), "container=c1")
	})
}

func TestObject(t *testing.T) {
	assert.Equal(t, "box", Object(runtime.RunSpec{Name: "box"}, "id"))
	assert.Equal(t, "id", Object(runtime.RunSpec{}, "id"))
}
