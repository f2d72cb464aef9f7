package provision_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// keys are the label keys of the default prefix, which the world's
// provisioners use.
var keys = labels.For(labels.DefaultPrefix)

// world is a fake runtime holding the default engines' images (with the
// VOLUMEs of the official images) and answering their probes as a ready
// server would.
type world struct {
	t    *testing.T
	fake *fakeruntime.Runtime
	logs *syncBuffer
	mu   sync.Mutex
	evs  []provision.Event
	// storeless: provisioners see the fake without its image store
	// (noImageStore).
	storeless bool
}

func newWorld(t *testing.T) *world {
	t.Helper()
	f := fakeruntime.New()
	t.Cleanup(func() { f.Close() })
	f.AddImage("postgres:16-alpine", "/var/lib/postgresql/data")
	f.AddImage("redis:8-alpine", "/data")
	f.AddImage("mongo:8", "/data/db", "/data/configdb")
	f.AddImage("mariadb:11", "/var/lib/mysql")
	f.Script("pg_isready", fakeruntime.Result{Stdout: "accepting connections"})
	f.Script("psql", fakeruntime.Result{Stdout: "1\n"})
	f.Script("redis-cli", fakeruntime.Result{Stdout: "PONG\n"})
	f.Script("mongosh", fakeruntime.Result{Stdout: "1\n"})
	f.Script("mariadb", fakeruntime.Result{Stdout: "1\n"})
	return &world{t: t, fake: f, logs: &syncBuffer{}}
}

// options are hermetic defaults: no image overrides from the environment,
// events recorded, logs captured at debug level, and readiness by the exec
// probe, which the fake answers from its script (it runs no server to log
// in to; readiness_test.go covers the wire check with real listeners).
// Every sandbox starts cold: warm_test.go is where warm start is the
// subject (a template build would add its own container and calls to what
// the other tests count).
func (w *world) options() provision.Options {
	return provision.Options{
		Warm:      provision.WarmOff,
		Readiness: provision.ReadinessExec,
		Getenv:    func(string) string { return "" },
		Logger:    slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnEvent: func(ev provision.Event) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.evs = append(w.evs, ev)
		},
	}
}

func (w *world) provisioner(opts provision.Options) *provision.Provisioner {
	w.t.Helper()
	var rt runtime.ContainerRuntime = w.fake
	if w.storeless {
		rt = storeless{w.fake}
	}
	p, err := provision.New(rt, opts)
	require.NoError(w.t, err)
	return p
}

// owned lists the containers carrying owner's label.
func (w *world) owned(owner string) []runtime.Container {
	w.t.Helper()
	cs, err := w.fake.List(context.Background(), map[string]string{keys.Owner: owner})
	require.NoError(w.t, err)
	return cs
}

func (w *world) events(kind provision.EventKind) []provision.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []provision.Event
	for _, ev := range w.evs {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// totalCalls is the number of calls of every verb.
func (w *world) totalCalls() int {
	n := 0
	for _, v := range []string{
		fakeruntime.VerbVersion, fakeruntime.VerbImageExists, fakeruntime.VerbPull, fakeruntime.VerbRun,
		fakeruntime.VerbCreate, fakeruntime.VerbInspect, fakeruntime.VerbExec, fakeruntime.VerbStop,
		fakeruntime.VerbKill, fakeruntime.VerbRemove, fakeruntime.VerbList, fakeruntime.VerbSnapshot,
		fakeruntime.VerbCreateNetwork, fakeruntime.VerbRemoveNetwork,
		fakeruntime.VerbImageID, fakeruntime.VerbSaveImage, fakeruntime.VerbLoadImage, fakeruntime.VerbRemoveImage,
	} {
		n += w.fake.Calls(v)
	}
	return n
}

// named returns the container called name; the test fails without one.
func (w *world) named(name string) runtime.Container {
	w.t.Helper()
	for _, c := range w.fake.Containers() {
		if c.Name == name {
			return c
		}
	}
	require.FailNow(w.t, "no container "+name)
	return runtime.Container{}
}

// hang makes every call of verbs on object ("" : any object) block until
// the call's context ends: a runtime stuck on one container (a dead shim,
// a daemon that stopped answering). It returns the number of calls held.
func (w *world) hang(object string, verbs ...string) *atomic.Int32 {
	var held atomic.Int32
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if !slices.Contains(verbs, c.Verb) || (object != "" && c.Object != object) {
			return nil
		}
		held.Add(1)
		<-ctx.Done()
		return ctx.Err()
	})
	return &held
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func passwords(sb provision.Sandbox) []string {
	var out []string
	for _, v := range sb.Env {
		if v.Secret && len(v.Value) == 2*engines.PasswordBytes {
			out = append(out, v.Value)
		}
	}
	return out
}

type syncBuffer = testkit.SyncBuffer

// record collects values from hooks that run concurrently.
type record[T any] struct {
	mu   sync.Mutex
	vals []T
}

func (r *record[T]) add(v ...T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vals = append(r.vals, v...)
}

func (r *record[T]) get() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.vals...)
}

func (r *record[T]) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vals = nil
}
