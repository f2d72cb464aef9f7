package runtime_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/runtime"
)

// destroyWorld is a fake runtime holding one container, the one a caller
// listed, and a record of the destructive calls that reached it.
type destroyWorld struct {
	fake   *fakeruntime.Runtime
	listed runtime.Container
	mu     sync.Mutex
	verbs  []string // of the kills and removes, in order
	refs   []string // what each was called with
}

func newDestroyWorld(t *testing.T) *destroyWorld {
	t.Helper()
	w := &destroyWorld{fake: fakeruntime.New()}
	t.Cleanup(func() { w.fake.Close() })
	w.listed = w.fake.Seed(runtime.Container{
		Name: "roboco-sandbox-pg-1", Image: "postgres:16-alpine",
		Created: time.Date(2030, 1, 2, 3, 4, 5, 250_000_000, time.UTC),
		Labels:  map[string]string{"roboco.sandbox": "1", "roboco.sandbox.call": "c1"},
	})
	w.fake.OnCall(func(_ context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbKill || c.Verb == fakeruntime.VerbRemove {
			w.mu.Lock()
			w.verbs = append(w.verbs, c.Verb)
			w.refs = append(w.refs, c.Object)
			w.mu.Unlock()
		}
		return nil
	})
	return w
}

// destructive returns the verbs of the kills and removes that reached the
// runtime, in order, and the references they were called with.
func (w *destroyWorld) destructive() (verbs, refs []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.verbs), slices.Clone(w.refs)
}

// replace removes the listed container and runs a newer one under its
// name (which gets a new ID), as a provisioner's pre-clear and run do.
// From a hook, ctx is the hooked call's.
func (w *destroyWorld) replace(ctx context.Context, t *testing.T) runtime.Container {
	require.NoError(t, w.fake.Remove(ctx, w.listed.ID))
	return w.fake.Seed(runtime.Container{
		Name: w.listed.Name, Image: w.listed.Image, Created: w.listed.Created.Add(time.Minute),
		Labels: map[string]string{"roboco.sandbox": "1", "roboco.sandbox.call": "c2"},
	})
}

// replaceAt replaces the listed container during the first call of verb
// on its ID, and returns where the newer container will be.
func (w *destroyWorld) replaceAt(t *testing.T, verb string) *runtime.Container {
	newer := new(runtime.Container)
	var done atomic.Bool
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb == verb && c.Object == w.listed.ID && done.CompareAndSwap(false, true) {
			*newer = w.replace(ctx, t)
		}
		return nil
	})
	return newer
}

func TestDestroy(t *testing.T) {
	const timeout = 100 * time.Millisecond
	tests := []struct {
		name string
		// setup steers the fake before Destroy; it returns where the
		// container that must exist afterwards will be (nil: none).
		setup func(t *testing.T, w *destroyWorld) *runtime.Container
		// cancelled: the caller's context has already ended.
		cancelled bool
		want      runtime.Outcome
		// wantErr: Destroy fails, the error contains each string and
		// matches wantIs.
		wantErr []string
		wantIs  error
		// wantCalls are the verbs of the kills and removes that reached
		// the runtime, a setup's own included.
		wantCalls []string
	}{
		{
			name:      "RunningIsRemovedInOneCall",
			want:      runtime.Removed,
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name: "ExitedIsRemoved",
			setup: func(t *testing.T, w *destroyWorld) *runtime.Container {
				require.True(t, w.fake.SetState(w.listed.ID, runtime.StateExited, 0))
				return nil
			},
			want:      runtime.Removed,
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name: "AbsentIsGone",
			setup: func(t *testing.T, w *destroyWorld) *runtime.Container {
				require.NoError(t, w.fake.Remove(context.Background(), w.listed.ID))
				return nil
			},
			want:      runtime.Gone,
			wantCalls: []string{fakeruntime.VerbRemove}, // the setup's own
		},
		{
			name: "NewerUnderTheNameIsLeftAlone",
			setup: func(t *testing.T, w *destroyWorld) *runtime.Container {
				newer := w.replace(context.Background(), t)
				return &newer
			},
			want:      runtime.Gone,
			wantCalls: []string{fakeruntime.VerbRemove}, // the replacement's own
		},
		{
			name: "ReplacedDuringTheLookUpIsLeftAlone",
			setup: func(t *testing.T, w *destroyWorld) *runtime.Container {
				return w.replaceAt(t, fakeruntime.VerbInspect)
			},
			want:      runtime.Gone,
			wantCalls: []string{fakeruntime.VerbRemove}, // the replacement's own
		},
		{
			name: "ReplacedBetweenLookUpAndRemoveIsLeftAlone",
			setup: func(t *testing.T, w *destroyWorld) *runtime.Container {
				return w.replaceAt(t, fakeruntime.VerbRemove)
			},
			// The listed container was there at the look-up, and is gone:
			// removed (by the replacement, here), never the newer one.
			want:      runtime.Removed,
			wantCalls: []string{fakeruntime.VerbRemove, fakeruntime.VerbRemove},
		},
		{
			name: "LookUpFailsStillRemoves",
			setup: func(t *testing.T, w *destroyWorld) *runtime.Container {
				w.fake.Fail(fakeruntime.VerbInspect, "", runtime.ErrUnavailable)
				return nil
			},
			want:      runtime.Removed,
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name: "LookUpHangsStillRemoves",
			setup: func(t *testing.T, w *destroyWorld) *runtime.Container {
				hang(w.fake, fakeruntime.VerbInspect)
				return nil
			},
			want:      runtime.Removed,
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name:      "CancelledCallerStillDestroys",
			cancelled: true,
			want:      runtime.Removed,
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name: "RemoveFails",
			setup: func(t *testing.T, w *destroyWorld) *runtime.Container {
				w.fake.Fail(fakeruntime.VerbRemove, "", errors.New("device or resource busy"))
				return &w.listed
			},
			wantErr:   []string{"destroy roboco-sandbox-pg-1", "remove", "device or resource busy"},
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name: "LookUpAndRemoveHang",
			setup: func(t *testing.T, w *destroyWorld) *runtime.Container {
				hang(w.fake, fakeruntime.VerbInspect, fakeruntime.VerbRemove)
				return &w.listed
			},
			wantErr:   []string{"destroy roboco-sandbox-pg-1", "remove", "after the look-up"},
			wantIs:    context.DeadlineExceeded,
			wantCalls: []string{fakeruntime.VerbRemove},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newDestroyWorld(t)
			var survivor *runtime.Container
			if tt.setup != nil {
				survivor = tt.setup(t, w)
			}
			var unbounded []string
			var mu sync.Mutex
			w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
				if _, ok := ctx.Deadline(); !ok || errors.Is(ctx.Err(), context.Canceled) {
					mu.Lock()
					unbounded = append(unbounded, c.Verb)
					mu.Unlock()
				}
				return nil
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if tt.cancelled {
				cctx, cancelNow := context.WithCancel(ctx)
				cancelNow()
				ctx = cctx
			}

			start := time.Now()
			got, err := runtime.Destroy(ctx, w.fake, w.listed, timeout)
			assert.Less(t, time.Since(start), 5*time.Second, "each call is bounded by the timeout")
			assertOutcome(t, got, err, tt.want, tt.wantErr, tt.wantIs)
			verbs, refs := w.destructive()
			assert.Equal(t, orNone(tt.wantCalls), orNone(verbs), "kills and removes, in order")
			for _, ref := range refs {
				assert.Equal(t, w.listed.ID, ref, "by the listed ID, never by name")
			}
			mu.Lock()
			assert.Empty(t, unbounded, "every runtime call has its own live deadline")
			mu.Unlock()

			// Containers reads the fake's state without its hooks.
			holds := func(id string) int {
				return slices.IndexFunc(w.fake.Containers(), func(c runtime.Container) bool { return c.ID == id })
			}
			if survivor == nil || survivor.ID != w.listed.ID {
				assert.Negative(t, holds(w.listed.ID), "nothing holds the listed ID")
			}
			if survivor == nil {
				assert.Empty(t, w.fake.Containers(), "nothing is left")
				return
			}
			require.NotEmpty(t, survivor.ID, "the survivor was made")
			i := holds(survivor.ID)
			require.GreaterOrEqual(t, i, 0, "the container that should survive does")
			now := w.fake.Containers()[i]
			assert.True(t, now.Running(), "untouched: still running")
			assert.Equal(t, survivor.Labels, now.Labels)
		})
	}
}

// hang makes every call of verbs block until its context ends.
func hang(f *fakeruntime.Runtime, verbs ...string) {
	f.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if slices.Contains(verbs, c.Verb) {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
}

func orNone(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestDestroyRejectsAListingWithoutID(t *testing.T) {
	f := fakeruntime.New()
	t.Cleanup(func() { f.Close() })
	c := f.Seed(runtime.Container{Name: "roboco-sandbox-pg-1"})

	_, err := runtime.Destroy(context.Background(), f, runtime.Container{Name: c.Name}, time.Second)
	require.Error(t, err)
	assert.ErrorContains(t, err, "roboco-sandbox-pg-1")
	assert.Zero(t, f.Calls(fakeruntime.VerbKill)+f.Calls(fakeruntime.VerbRemove)+f.Calls(fakeruntime.VerbInspect), "nothing is asked of the runtime")
	assert.Len(t, f.Containers(), 1, "a name alone is never destroyed")
}

func TestOutcomeString(t *testing.T) {
	assert.Equal(t, "removed", runtime.Removed.String())
	assert.Equal(t, "gone", runtime.Gone.String())
	assert.Equal(t, "Outcome(7)", runtime.Outcome(7).String())
}

// assertOutcome checks what Destroy returned: with wantErr, an error that
// contains each string and matches wantIs (when set); else no error and
// the outcome want.
func assertOutcome(t *testing.T, got runtime.Outcome, err error, want runtime.Outcome, wantErr []string, wantIs error) {
	t.Helper()
	if wantErr != nil {
		require.Error(t, err)
		for _, s := range wantErr {
			assert.ErrorContains(t, err, s)
		}
		if wantIs != nil {
			assert.ErrorIs(t, err, wantIs)
		}
		return
	}
	require.NoError(t, err)
	assert.Equal(t, want, got, "outcome %s", got)
}
