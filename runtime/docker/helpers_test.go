package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/runtime"
)

// Every container and network a test makes carries testLabel=Name, plus a
// per-test run label, so that cleanup removes exactly the test's own.
const (
	testLabel    = "sandboxer.test"
	testRunLabel = "sandboxer.test.run"
)

// testCtx is a context bounded well within go test's own timeout.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newTestRuntime connects to the daemon of the environment (DOCKER_HOST,
// else the default socket); a daemon that does not answer skips the test,
// or fails it under SANDBOXER_REQUIRE=docker. -short (unit tests only)
// skips it.
func newTestRuntime(t *testing.T, opts ...Option) *Runtime {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the Docker daemon (-short runs unit tests only)")
	}
	testenv.Load()
	r, err := New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	if _, err := r.Version(testCtx(t)); err != nil {
		testenv.Unavailable(t, Name, "%v", err)
	}
	return r
}

// busybox returns the busybox fixture, making sure the daemon has it
// (pulling it from the loopback registry when needed).
func busybox(t *testing.T, r *Runtime) string {
	t.Helper()
	ref := testenv.Image(t, Name, "busybox")
	ctx := testCtx(t)
	ok, err := r.ImageExists(ctx, ref)
	require.NoError(t, err)
	if !ok {
		if err := r.PullImage(ctx, ref, nil); err != nil {
			testenv.Unavailable(t, Name, "image %s: %v", ref, err)
		}
	}
	return ref
}

// randomSuffix is 8 hex characters.
func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// testLabels labels a test's objects and registers the cleanup that
// removes every container (and network) carrying them.
func testLabels(t *testing.T, r *Runtime) map[string]string {
	t.Helper()
	run := randomSuffix(t)
	labels := map[string]string{testLabel: Name, testRunLabel: run}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cs, err := r.List(ctx, labels)
		if err != nil {
			t.Errorf("cleanup: list: %v", err)
			return
		}
		for _, c := range cs {
			if err := r.Remove(ctx, c.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	return labels
}

// testNetwork creates a labelled network removed at cleanup.
func testNetwork(t *testing.T, r *Runtime, labels map[string]string) string {
	t.Helper()
	name := "sandboxer-test-net-" + randomSuffix(t)
	_, err := r.CreateNetwork(testCtx(t), runtime.NetworkSpec{Name: name, Labels: labels})
	require.NoError(t, err)
	// Registered after testLabels' cleanup, so it runs before it: remove
	// the containers first, or the network is still in use.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if cs, err := r.List(ctx, labels); err == nil {
			for _, c := range cs {
				_ = r.Remove(ctx, c.ID)
			}
		}
		if err := r.RemoveNetwork(ctx, name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return name
}

// sleeper is a spec for a busybox container that just runs, and dies at
// once on SIGTERM (sh as PID 1 would ignore it).
func sleeper(image, name string, labels map[string]string) runtime.RunSpec {
	return runtime.RunSpec{
		Name:    name,
		Image:   image,
		Labels:  labels,
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
	}
}

// logRecorder is a slog.Handler that keeps every record, for tests that
// assert what the adapter logged.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *logRecorder) WithGroup(string) slog.Handler { return h }

// matching returns the records at level whose message contains text.
func (h *logRecorder) matching(level slog.Level, text string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.records {
		if r.Level == level && strings.Contains(r.Message, text) {
			out = append(out, r)
		}
	}
	return out
}

// attr returns the value of a record's attribute key ("" when absent).
func attr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}
