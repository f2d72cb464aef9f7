package runtime_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/runtime"
)

func TestSameContainer(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 250_000_000, time.UTC)
	base := runtime.Container{
		ID: "c0ffee", Name: "roboco-sandbox-pg-1", State: runtime.StateRunning, Created: at,
		Labels: map[string]string{"roboco.sandbox": "1", "roboco.sandbox.call": "c1"},
	}
	with := func(change func(c *runtime.Container)) runtime.Container {
		c := base
		c.Labels = maps.Clone(base.Labels)
		change(&c)
		return c
	}
	tests := []struct {
		name     string
		was, now runtime.Container
		want     bool
	}{
		{"Identical", base, base, true},
		{"ListedInWholeSecondsInspectedInNanos", with(func(c *runtime.Container) { c.Created = at.Truncate(time.Second) }), base, true},
		{"ListedInNanosInspectedInWholeSeconds", base, with(func(c *runtime.Container) { c.Created = at.Truncate(time.Second) }), true},
		{"WholeSecondsOfAnotherSecond", with(func(c *runtime.Container) { c.Created = at.Truncate(time.Second).Add(time.Second) }), base, false},
		{"NanosDifferByOne", base, with(func(c *runtime.Container) { c.Created = at.Add(time.Nanosecond) }), false},
		{"CreatedLater", base, with(func(c *runtime.Container) { c.Created = at.Add(time.Minute) }), false},
		{"SameInstantOtherZone", base, with(func(c *runtime.Container) { c.Created = at.In(time.FixedZone("X", 3600)) }), true},
		{"ListedWithoutCreationTime", with(func(c *runtime.Container) { c.Created = time.Time{} }), base, true},
		{"InspectedWithoutCreationTime", base, with(func(c *runtime.Container) { c.Created = time.Time{} }), true},
		{"MoreLabelsNow", base, with(func(c *runtime.Container) { c.Labels["added.later"] = "x" }), true},
		{"ListedLabelGone", base, with(func(c *runtime.Container) { delete(c.Labels, "roboco.sandbox.call") }), false},
		{"ListedLabelChanged", base, with(func(c *runtime.Container) { c.Labels["roboco.sandbox.call"] = "c2" }), false},
		{"ListedWithoutLabels", with(func(c *runtime.Container) { c.Labels = nil }), base, true},
		{"OtherID", base, with(func(c *runtime.Container) { c.ID = "decaf" }), false},
		{"ListedWithoutID", with(func(c *runtime.Container) { c.ID = "" }), with(func(c *runtime.Container) { c.ID = "" }), false},
		{"StoppedSince", base, with(func(c *runtime.Container) { c.State = runtime.StateExited }), true},
		{"RenamedSince", base, with(func(c *runtime.Container) { c.Name = "renamed" }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, runtime.SameContainer(tt.was, tt.now))
		})
	}
}

// destroyWorld is a fake runtime holding one container, the one a caller
// listed, and a record of the destructive calls that reached it.
type destroyWorld struct {
	fake   *fakeruntime.Runtime
	listed runtime.Container
	mu     sync.Mutex
	verbs  []string // of the kills and removes, in order
	refs   []string // what each was called with
}

func newDestroyWorld(t *testing.T, idIsName bool) *destroyWorld {
	t.Helper()
	w := &destroyWorld{fake: fakeruntime.New()}
	t.Cleanup(func() { w.fake.Close() })
	id := ""
	if idIsName {
		id = "roboco-sandbox-pg-1"
	}
	w.listed = w.fake.Seed(runtime.Container{
		ID: id, Name: "roboco-sandbox-pg-1", Image: "postgres:16-alpine",
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

// replace removes the listed container and seeds c in its place, as a
// provisioner's pre-clear and run do. From a hook, ctx is the hooked
// call's.
func (w *destroyWorld) replace(ctx context.Context, t *testing.T, c runtime.Container) runtime.Container {
	require.NoError(t, w.fake.Remove(ctx, w.listed.ID))
	return w.fake.Seed(c)
}

func TestDestroy(t *testing.T) {
	const timeout = 100 * time.Millisecond
	tests := []struct {
		name     string
		idIsName bool
		// setup steers the fake before Destroy; it returns the container
		// that must exist afterwards (zero: none).
		setup func(t *testing.T, w *destroyWorld) runtime.Container
		// cancelled: the caller's context has already ended.
		cancelled bool
		want      runtime.Outcome
		// wantErr: Destroy fails, the error contains each string and
		// matches wantIs.
		wantErr []string
		wantIs  error
		// wantCalls are the verbs of the kills and removes that reached
		// the runtime, the setup's own included.
		wantCalls []string
	}{
		{
			name:      "RunningIsKilledThenRemoved",
			want:      runtime.Removed,
			wantCalls: []string{fakeruntime.VerbKill, fakeruntime.VerbRemove},
		},
		{
			name: "ExitedIsRemoved",
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				require.True(t, w.fake.SetState(w.listed.ID, runtime.StateExited, 0))
				return runtime.Container{}
			},
			want:      runtime.Removed,
			wantCalls: []string{fakeruntime.VerbKill, fakeruntime.VerbRemove},
		},
		{
			name: "AbsentIsGone",
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				require.NoError(t, w.fake.Remove(context.Background(), w.listed.ID))
				return runtime.Container{}
			},
			want:      runtime.Gone,
			wantCalls: []string{fakeruntime.VerbRemove}, // the setup's own
		},
		{
			name: "NewIDUnderTheNameIsGone",
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				c := w.listed
				c.ID = ""
				c.Labels = map[string]string{"roboco.sandbox": "1", "roboco.sandbox.call": "c2"}
				c.Created = c.Created.Add(time.Minute)
				return w.replace(context.Background(), t, c)
			},
			want:      runtime.Gone,
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name:     "SameIDCreatedLaterIsReplaced",
			idIsName: true,
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				c := w.listed
				c.Created = c.Created.Add(time.Minute)
				return w.replace(context.Background(), t, c)
			},
			want:      runtime.Replaced,
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name:     "SameIDOtherCallLabelIsReplaced",
			idIsName: true,
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				c := w.listed
				c.Labels = map[string]string{"roboco.sandbox": "1", "roboco.sandbox.call": "c2"}
				return w.replace(context.Background(), t, c)
			},
			want:      runtime.Replaced,
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name:     "ReplacedBetweenKillAndRemoveIsNotRemoved",
			idIsName: true,
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				newer := w.listed
				newer.Created = newer.Created.Add(time.Minute)
				var once sync.Once
				w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
					if c.Verb == fakeruntime.VerbKill {
						once.Do(func() { w.replace(ctx, t, newer) })
					}
					return nil
				})
				return newer
			},
			want:      runtime.Replaced,
			wantCalls: []string{fakeruntime.VerbKill, fakeruntime.VerbRemove}, // the kill, then the replacement's own remove
		},
		{
			name: "VanishedBetweenCheckAndKillIsGone",
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				var once sync.Once
				w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
					if c.Verb == fakeruntime.VerbKill {
						once.Do(func() { require.NoError(t, w.fake.Remove(ctx, w.listed.ID)) })
					}
					return nil
				})
				return runtime.Container{}
			},
			want:      runtime.Gone,
			wantCalls: []string{fakeruntime.VerbKill, fakeruntime.VerbRemove},
		},
		{
			name: "KillThatDeletesIsRemoved",
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				// As a pod's kill (runtime.Forms.StopRemoves): gone by the
				// identity check before the remove.
				var inspects atomic.Int32
				w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
					if c.Verb == fakeruntime.VerbInspect && inspects.Add(1) == 2 {
						require.NoError(t, w.fake.Remove(ctx, w.listed.ID))
					}
					return nil
				})
				return runtime.Container{}
			},
			want:      runtime.Removed,
			wantCalls: []string{fakeruntime.VerbKill, fakeruntime.VerbRemove}, // the kill, then the deletion it stands for
		},
		{
			name: "KillFailsStillRemoves",
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				w.fake.Fail(fakeruntime.VerbKill, "", errors.New("ttrpc: closed"))
				return runtime.Container{}
			},
			want:      runtime.Removed,
			wantCalls: []string{fakeruntime.VerbKill, fakeruntime.VerbRemove},
		},
		{
			name: "KillHangsStillRemoves",
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				hang(w.fake, fakeruntime.VerbKill)
				return runtime.Container{}
			},
			want:      runtime.Removed,
			wantCalls: []string{fakeruntime.VerbKill, fakeruntime.VerbRemove},
		},
		{
			name:      "CancelledCallerStillDestroys",
			cancelled: true,
			want:      runtime.Removed,
			wantCalls: []string{fakeruntime.VerbKill, fakeruntime.VerbRemove},
		},
		{
			name: "RemoveFails",
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				w.fake.Fail(fakeruntime.VerbRemove, "", errors.New("device or resource busy"))
				return w.listed
			},
			wantErr:   []string{"destroy roboco-sandbox-pg-1", "remove", "device or resource busy"},
			wantCalls: []string{fakeruntime.VerbKill, fakeruntime.VerbRemove},
		},
		{
			name: "KillAndRemoveHang",
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				hang(w.fake, fakeruntime.VerbKill, fakeruntime.VerbRemove)
				return w.listed
			},
			wantErr:   []string{"destroy roboco-sandbox-pg-1", "remove", "after kill"},
			wantIs:    context.DeadlineExceeded,
			wantCalls: []string{fakeruntime.VerbKill, fakeruntime.VerbRemove},
		},
		{
			name: "IdentityCheckFailsRemovesNothing",
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				w.fake.Fail(fakeruntime.VerbInspect, "", runtime.ErrUnavailable)
				return w.listed
			},
			wantErr: []string{"destroy roboco-sandbox-pg-1"},
			wantIs:  runtime.ErrUnavailable,
		},
		{
			name: "IdentityCheckHangsRemovesNothing",
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				hang(w.fake, fakeruntime.VerbInspect)
				return w.listed
			},
			wantErr: []string{"destroy roboco-sandbox-pg-1"},
			wantIs:  context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newDestroyWorld(t, tt.idIsName)
			var survivor runtime.Container
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
			assert.Less(t, time.Since(start), 5*time.Second, "each step is bounded by the timeout")
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
			if survivor.ID != w.listed.ID {
				assert.Negative(t, holds(w.listed.ID), "nothing holds the listed ID")
			}
			if survivor.ID == "" {
				return
			}
			i := holds(survivor.ID)
			require.GreaterOrEqual(t, i, 0, "the container that should survive does")
			now := w.fake.Containers()[i]
			assert.True(t, survivor.Created.Equal(now.Created), "and it is the expected one")
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
	assert.Equal(t, "replaced", runtime.Replaced.String())
	assert.Equal(t, "Outcome(7)", runtime.Outcome(7).String())
}

// killRemoves is a runtime whose Kill deletes the container
// (runtime.Forms.StopRemoves: a pod), on the fake.
type killRemoves struct{ *fakeruntime.Runtime }

func (k killRemoves) Forms() runtime.Forms { return runtime.Forms{StopRemoves: true} }

func (k killRemoves) Kill(ctx context.Context, ref string) error {
	if err := k.Runtime.Kill(ctx, ref); err != nil {
		return err
	}
	return k.Runtime.Remove(ctx, ref)
}

// TestDestroyKillThatRemovesIsRemoved: where the kill itself deletes the
// container, Destroy reports it removed (not vanished), and calls no
// remove of a container that is gone.
func TestDestroyKillThatRemovesIsRemoved(t *testing.T) {
	w := newDestroyWorld(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := runtime.Destroy(ctx, killRemoves{w.fake}, w.listed, time.Second)
	require.NoError(t, err)
	assert.Equal(t, runtime.Removed, out)
	verbs, _ := w.destructive()
	assert.Equal(t, []string{fakeruntime.VerbKill, fakeruntime.VerbRemove}, verbs, "the kill, and the remove it made")
	assert.Empty(t, w.fake.Containers())
}

// embedded wraps a runtime without forwarding runtime.IDRemover, as a
// wrapper that does not know of it would.
type embedded struct{ runtime.ContainerRuntime }

// forwarding wraps a runtime and forwards runtime.IDRemover with
// runtime.RemoveByID, saying what the wrapped runtime says.
type forwarding struct{ runtime.ContainerRuntime }

func (f forwarding) RemoveByID(ctx context.Context, id string) error {
	return runtime.RemoveByID(ctx, f.ContainerRuntime, id)
}

func TestDestroyWhereIDsAreNeverReused(t *testing.T) {
	const timeout = 100 * time.Millisecond
	checked := []string{fakeruntime.VerbInspect, fakeruntime.VerbKill, fakeruntime.VerbInspect, fakeruntime.VerbRemove}
	tests := []struct {
		name string
		// neverReused is what the fake says of its IDs.
		neverReused bool
		// wrap is what Destroy is given instead of the fake (nil: the fake).
		wrap func(runtime.ContainerRuntime) runtime.ContainerRuntime
		// setup steers the fake before Destroy; it returns the container
		// that must exist afterwards (zero: none).
		setup     func(t *testing.T, w *destroyWorld) runtime.Container
		cancelled bool
		want      runtime.Outcome
		wantErr   []string
		wantIs    error
		// wantCalls are the verbs of the inspects, kills and removes that
		// reached the runtime during Destroy.
		wantCalls []string
	}{
		{
			name:        "RunningIsRemovedInOneCall",
			neverReused: true,
			want:        runtime.Removed,
			wantCalls:   []string{fakeruntime.VerbRemove},
		},
		{
			name:        "ExitedIsRemovedInOneCall",
			neverReused: true,
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				require.True(t, w.fake.SetState(w.listed.ID, runtime.StateExited, 0))
				return runtime.Container{}
			},
			want:      runtime.Removed,
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name:        "AbsentIsGone",
			neverReused: true,
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				require.NoError(t, w.fake.Remove(context.Background(), w.listed.ID))
				return runtime.Container{}
			},
			want:      runtime.Gone,
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name:        "NewContainerUnderTheNameIsLeftAlone",
			neverReused: true,
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				c := w.listed
				c.ID = "" // a new container gets a new ID
				c.Labels = map[string]string{"roboco.sandbox": "1", "roboco.sandbox.call": "c2"}
				c.Created = c.Created.Add(time.Minute)
				return w.replace(context.Background(), t, c)
			},
			want:      runtime.Gone,
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name:        "CancelledCallerStillDestroys",
			neverReused: true,
			cancelled:   true,
			want:        runtime.Removed,
			wantCalls:   []string{fakeruntime.VerbRemove},
		},
		{
			name:        "RemoveFails",
			neverReused: true,
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				w.fake.Fail(fakeruntime.VerbRemove, "", errors.New("device or resource busy"))
				return w.listed
			},
			wantErr:   []string{"destroy roboco-sandbox-pg-1", "remove", "device or resource busy"},
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name:        "RemoveHangsIsBounded",
			neverReused: true,
			setup: func(t *testing.T, w *destroyWorld) runtime.Container {
				hang(w.fake, fakeruntime.VerbRemove)
				return w.listed
			},
			wantErr:   []string{"destroy roboco-sandbox-pg-1", "remove"},
			wantIs:    context.DeadlineExceeded,
			wantCalls: []string{fakeruntime.VerbRemove},
		},
		{
			name:      "IDsMayBeReusedTakesTheCheckedPath",
			want:      runtime.Removed,
			wantCalls: checked,
		},
		{
			name:        "WrapperThatDoesNotForwardTakesTheCheckedPath",
			neverReused: true,
			wrap:        func(rt runtime.ContainerRuntime) runtime.ContainerRuntime { return embedded{rt} },
			want:        runtime.Removed,
			wantCalls:   checked,
		},
		{
			name:        "ForwardingWrapperRemovesInOneCall",
			neverReused: true,
			wrap:        func(rt runtime.ContainerRuntime) runtime.ContainerRuntime { return forwarding{rt} },
			want:        runtime.Removed,
			wantCalls:   []string{fakeruntime.VerbRemove},
		},
		{
			name:      "ForwardingWrapperOfReusedIDsTakesTheCheckedPath",
			wrap:      func(rt runtime.ContainerRuntime) runtime.ContainerRuntime { return forwarding{rt} },
			want:      runtime.Removed,
			wantCalls: checked,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newDestroyWorld(t, false)
			w.fake.SetIDsNeverReused(tt.neverReused)
			// Registered first, so that it sees the calls that the setup's
			// hooks fail or hold; it records only Destroy's.
			var (
				mu         sync.Mutex
				destroying bool
				calls      []string
				unbounded  []string
			)
			w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
				mu.Lock()
				defer mu.Unlock()
				if !destroying {
					return nil
				}
				switch c.Verb {
				case fakeruntime.VerbInspect, fakeruntime.VerbKill, fakeruntime.VerbRemove:
					calls = append(calls, c.Verb)
					assert.Equal(t, w.listed.ID, c.Object, "by the listed ID, never by name")
				}
				if _, ok := ctx.Deadline(); !ok || errors.Is(ctx.Err(), context.Canceled) {
					unbounded = append(unbounded, c.Verb)
				}
				return nil
			})
			var survivor runtime.Container
			if tt.setup != nil {
				survivor = tt.setup(t, w)
			}
			mu.Lock()
			destroying = true
			mu.Unlock()
			var rt runtime.ContainerRuntime = w.fake
			if tt.wrap != nil {
				rt = tt.wrap(rt)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if tt.cancelled {
				cctx, cancelNow := context.WithCancel(ctx)
				cancelNow()
				ctx = cctx
			}

			got, err := runtime.Destroy(ctx, rt, w.listed, timeout)
			assertOutcome(t, got, err, tt.want, tt.wantErr, tt.wantIs)
			mu.Lock()
			assert.Equal(t, tt.wantCalls, calls, "inspects, kills and removes, in order")
			assert.Empty(t, unbounded, "every runtime call has its own live deadline")
			mu.Unlock()

			ids := make([]string, 0)
			for _, c := range w.fake.Containers() {
				ids = append(ids, c.ID)
			}
			if survivor.ID != w.listed.ID {
				assert.NotContains(t, ids, w.listed.ID, "nothing holds the listed ID")
			}
			if survivor.ID != "" {
				assert.Contains(t, ids, survivor.ID, "the container that should survive does")
			}
		})
	}
}

func TestRemoveByID(t *testing.T) {
	f := fakeruntime.New()
	t.Cleanup(func() { f.Close() })
	c := f.Seed(runtime.Container{Name: "roboco-sandbox-pg-1"})

	err := runtime.RemoveByID(context.Background(), embedded{f}, c.ID)
	assert.ErrorIs(t, err, runtime.ErrUnsupported, "a runtime that is no IDRemover")
	err = runtime.RemoveByID(context.Background(), f, c.ID)
	assert.ErrorIs(t, err, runtime.ErrUnsupported, "a fake whose IDs may be reused")
	assert.Zero(t, f.Calls(fakeruntime.VerbRemove), "nothing is asked of the runtime")

	f.SetIDsNeverReused(true)
	for _, ref := range []string{c.Name, c.ID[:12], strings.ToUpper(c.ID)} {
		err = runtime.RemoveByID(context.Background(), f, ref)
		assert.ErrorIs(t, err, runtime.ErrInvalid, "%s is not a full ID", ref)
	}
	assert.Len(t, f.Containers(), 1, "a name or a prefix removes nothing")
	require.NoError(t, runtime.RemoveByID(context.Background(), f, c.ID))
	assert.Empty(t, f.Containers())
	err = runtime.RemoveByID(context.Background(), f, c.ID)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "a second remove finds none")
	assert.ErrorContains(t, err, c.ID, "and names the ID")
}

func TestIsFullID(t *testing.T) {
	full := strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		id   string
		want bool
	}{
		{full, true},
		{full[:63], false},
		{full + "0", false},
		{strings.ToUpper(full), false},
		{full[:63] + "g", false},
		{"roboco-sandbox-pg-1", false},
		{"", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, runtime.IsFullID(tt.id), "%q", tt.id)
	}
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
