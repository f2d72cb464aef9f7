package janitor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/roboco/sandboxer/engines/all"
	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/runtime"
)

const prefix = labels.DefaultPrefix

// keys are the label keys of prefix.
var keys = labels.For(prefix)

// clock is a settable clock shared by the fake (creation times) and the
// janitor (ages).
type clock struct {
	mu  sync.Mutex
	now time.Time
}

// newClock starts off a whole second: a creation time on a whole second
// is taken as possibly truncated (see TestSweepTruncatedCreationTime).
func newClock() *clock { return &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 250_000_000, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// callSpy records the selector of every List and Snapshot call that
// reaches the runtime, so tests can assert how a sweep looks at it.
type callSpy struct {
	runtime.ContainerRuntime
	mu        sync.Mutex
	lists     []map[string]string
	snapshots []map[string]string
}

func (s *callSpy) List(ctx context.Context, selector map[string]string) ([]runtime.Container, error) {
	s.mu.Lock()
	s.lists = append(s.lists, orEmptyMap(selector))
	s.mu.Unlock()
	return s.ContainerRuntime.List(ctx, selector)
}

func (s *callSpy) Snapshot(ctx context.Context, selector map[string]string) (runtime.Snapshot, error) {
	s.mu.Lock()
	s.snapshots = append(s.snapshots, orEmptyMap(selector))
	s.mu.Unlock()
	return s.ContainerRuntime.Snapshot(ctx, selector)
}

// take returns and forgets the selectors recorded so far.
func (s *callSpy) take() (lists, snapshots []map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lists, snapshots = s.lists, s.snapshots
	s.lists, s.snapshots = nil, nil
	return lists, snapshots
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}

// world is a fake runtime with a clock, and helpers to seed it.
type world struct {
	t     testing.TB
	fake  *fakeruntime.Runtime
	clock *clock
}

func newWorld(t testing.TB) *world {
	w := &world{t: t, fake: fakeruntime.New(), clock: newClock()}
	w.fake.SetClock(w.clock.Now)
	return w
}

// sandbox seeds a sandbox container created age ago. extra labels are
// merged over the defaults; an extra label with value "-" is deleted.
func (w *world) sandbox(name, owner string, age time.Duration, extra map[string]string) runtime.Container {
	lbls := map[string]string{
		keys.Sandbox: "1",
		keys.Owner:   owner,
		keys.Engine:  "postgres",
	}
	for k, v := range extra {
		if v == "-" {
			delete(lbls, k)
		} else {
			lbls[k] = v
		}
	}
	return w.fake.Seed(runtime.Container{Name: name, Image: "postgres:16-alpine", Labels: lbls, Created: w.clock.Now().Add(-age)})
}

// agent seeds an owner container.
func (w *world) agent(name string, state runtime.State) runtime.Container {
	return w.fake.Seed(runtime.Container{Name: name, Image: "agent", State: state, Created: w.clock.Now().Add(-time.Hour)})
}

func (w *world) names() []string {
	var out []string
	for _, c := range w.fake.Containers() {
		out = append(out, c.Name)
	}
	return out
}

func (w *world) janitor(opts janitor.Options) *janitor.Janitor {
	opts.Now = w.clock.Now
	j, err := janitor.New(w.fake, opts)
	require.NoError(w.t, err)
	return j
}

func sandboxNames(sbs []janitor.Sandbox) []string {
	out := []string{}
	for _, s := range sbs {
		out = append(out, s.Name)
	}
	return out
}

func failureNames(fs []janitor.Failure) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.Sandbox.Name)
	}
	return out
}

// hang makes every call of verbs on the container ref (as Destroy names
// it: by ID) block until the call's context ends, while on reports true:
// a runtime stuck on one container (a dead shim, a daemon that stopped
// answering for it). It returns the number of calls held so far.
func (w *world) hang(ref string, on *atomic.Bool, verbs ...string) *atomic.Int32 {
	var held atomic.Int32
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Object != ref || !slices.Contains(verbs, c.Verb) || !on.Load() {
			return nil
		}
		held.Add(1)
		<-ctx.Done()
		return ctx.Err()
	})
	return &held
}

// with returns m with k set to v.
func with(m map[string]string, k, v string) map[string]string {
	m[k] = v
	return m
}

// deadChild returns the identity of a process that has exited and been
// reaped.
func deadChild(t *testing.T) lifetime.Process {
	t.Helper()
	self, err := lifetime.CurrentProcess()
	require.NoError(t, err, "the process owner is read from /proc")
	cmd := exec.Command("true")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	require.NoError(t, cmd.Wait())
	// Its start time is unknowable now; any value is "not that process".
	return lifetime.Process{BootID: self.BootID, PIDNS: self.PIDNS, PID: pid, Start: 1}
}

func TestSweep(t *testing.T) {
	grace := janitor.DefaultGrace
	old := grace + time.Second
	self, selfErr := lifetime.CurrentProcess()
	// ownerIn seeds an owner in state with one sandbox out of grace: an
	// owner that exists, in any state, keeps its sandboxes.
	ownerIn := func(state runtime.State) func(t *testing.T, w *world) {
		return func(t *testing.T, w *world) {
			w.agent("roboco-agent-1", state)
			w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", old, nil)
		}
	}

	tests := []struct {
		name        string
		needsProc   bool
		seed        func(t *testing.T, w *world)
		wantRemoved []string
		wantKept    []string
		wantSkipped []string
		// wantReported are kept because nothing proves their owner gone;
		// each error matches wantReason.
		wantReported []string
		wantReason   error
		wantLeft     []string // every container left afterwards
	}{
		{
			name:        "InGraceSkipped",
			seed:        func(t *testing.T, w *world) { w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", 10*time.Second, nil) },
			wantSkipped: []string{"roboco-sandbox-pg-1"},
			wantLeft:    []string{"roboco-sandbox-pg-1"},
		},
		{
			name: "JustUnderGraceSkipped",
			seed: func(t *testing.T, w *world) {
				w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", grace-time.Millisecond, nil)
			},
			wantSkipped: []string{"roboco-sandbox-pg-1"},
			wantLeft:    []string{"roboco-sandbox-pg-1"},
		},
		{
			name:        "OutOfGraceRemoved",
			seed:        func(t *testing.T, w *world) { w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", old, nil) },
			wantRemoved: []string{"roboco-sandbox-pg-1"},
		},
		{
			name:        "AtGraceRemoved",
			seed:        func(t *testing.T, w *world) { w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", grace, nil) },
			wantRemoved: []string{"roboco-sandbox-pg-1"},
		},
		{
			name: "LiveOwnerKept",
			seed: func(t *testing.T, w *world) {
				w.agent("roboco-agent-1", runtime.StateRunning)
				w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", old, nil)
				w.sandbox("roboco-sandbox-redis-1", "roboco-agent-1", old, nil)
			},
			wantKept: []string{"roboco-sandbox-pg-1", "roboco-sandbox-redis-1"},
			wantLeft: []string{"roboco-agent-1", "roboco-sandbox-pg-1", "roboco-sandbox-redis-1"},
		},
		{
			name:     "PausedOwnerKept",
			seed:     ownerIn(runtime.StatePaused),
			wantKept: []string{"roboco-sandbox-pg-1"},
			wantLeft: []string{"roboco-agent-1", "roboco-sandbox-pg-1"},
		},
		{
			name:     "ExitedOwnerKeepsItsSandboxes",
			seed:     ownerIn(runtime.StateExited),
			wantKept: []string{"roboco-sandbox-pg-1"},
			wantLeft: []string{"roboco-agent-1", "roboco-sandbox-pg-1"},
		},
		{
			name:     "CreatedOwnerKeepsItsSandboxes",
			seed:     ownerIn(runtime.StateCreated),
			wantKept: []string{"roboco-sandbox-pg-1"},
			wantLeft: []string{"roboco-agent-1", "roboco-sandbox-pg-1"},
		},
		{
			name: "OwnerIsMatchedByExactName",
			seed: func(t *testing.T, w *world) {
				w.agent("roboco-agent-10", runtime.StateRunning)
				w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", old, nil)
			},
			wantRemoved: []string{"roboco-sandbox-pg-1"},
			wantLeft:    []string{"roboco-agent-10"},
		},
		{
			name: "MixedOwners",
			seed: func(t *testing.T, w *world) {
				w.agent("roboco-agent-1", runtime.StateRunning)
				w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", old, nil)
				w.sandbox("roboco-sandbox-pg-2", "roboco-agent-2", old, nil)
				w.sandbox("roboco-sandbox-pg-3", "roboco-agent-3", time.Minute, nil)
			},
			wantRemoved: []string{"roboco-sandbox-pg-2"},
			wantKept:    []string{"roboco-sandbox-pg-1"},
			wantSkipped: []string{"roboco-sandbox-pg-3"},
			wantLeft:    []string{"roboco-agent-1", "roboco-sandbox-pg-1", "roboco-sandbox-pg-3"},
		},
		{
			name: "MissingOwnerLabelIsKeptAndReported",
			seed: func(t *testing.T, w *world) {
				w.sandbox("roboco-sandbox-pg-1", "", old, map[string]string{keys.Owner: "-"})
				w.sandbox("roboco-sandbox-pg-2", "", 10*time.Second, map[string]string{keys.Owner: "-"})
			},
			wantSkipped:  []string{"roboco-sandbox-pg-2"},
			wantReported: []string{"roboco-sandbox-pg-1"},
			wantReason:   lifetime.ErrNoOwner,
			wantLeft:     []string{"roboco-sandbox-pg-1", "roboco-sandbox-pg-2"},
		},
		{
			name: "EmptyOwnerLabelIsKeptAndReported",
			seed: func(t *testing.T, w *world) {
				w.agent("", runtime.StateRunning) // an unnamed container must not count as the owner ""
				w.sandbox("roboco-sandbox-pg-1", "", old, nil)
			},
			wantReported: []string{"roboco-sandbox-pg-1"},
			wantReason:   lifetime.ErrNoOwner,
			wantLeft:     []string{"", "roboco-sandbox-pg-1"},
		},
		{
			name: "StoppedAndCreatedSandboxesRemoved",
			seed: func(t *testing.T, w *world) {
				c := w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", old, nil)
				w.fake.SetState(c.ID, runtime.StateExited, 137)
				c = w.sandbox("roboco-sandbox-redis-1", "roboco-agent-1", old, nil)
				w.fake.SetState(c.ID, runtime.StateCreated, 0)
			},
			wantRemoved: []string{"roboco-sandbox-pg-1", "roboco-sandbox-redis-1"},
		},
		{
			name: "OtherPrefixUntouched",
			seed: func(t *testing.T, w *world) {
				w.fake.Seed(runtime.Container{Name: "other-sandbox-pg-1", Created: w.clock.Now().Add(-time.Hour), Labels: map[string]string{
					labels.For("other").Sandbox: "1", labels.For("other").Owner: "other-agent-1",
				}})
			},
			wantLeft: []string{"other-sandbox-pg-1"},
		},
		{
			name:      "ProcessOwnerAliveKept",
			needsProc: true,
			seed: func(t *testing.T, w *world) {
				// No container is named after the owner: the process decides.
				w.sandbox("roboco-sandbox-pg-run", "roboco-agent-run", old, self.Labels(prefix))
			},
			wantKept: []string{"roboco-sandbox-pg-run"},
			wantLeft: []string{"roboco-sandbox-pg-run"},
		},
		{
			name:      "ProcessOwnerDeadRemoved",
			needsProc: true,
			seed: func(t *testing.T, w *world) {
				w.agent("roboco-agent-run", runtime.StateRunning) // does not save it
				w.sandbox("roboco-sandbox-pg-run", "roboco-agent-run", old, deadChild(t).Labels(prefix))
			},
			wantRemoved: []string{"roboco-sandbox-pg-run"},
			wantLeft:    []string{"roboco-agent-run"},
		},
		{
			// A warm template build: no owner container, the building
			// process its owner.
			name:      "ProcessOnlyOwnerAliveKept",
			needsProc: true,
			seed: func(t *testing.T, w *world) {
				w.sandbox("roboco-warm-pg-1", "", old, with(self.Labels(prefix), keys.Owner, "-"))
			},
			wantKept: []string{"roboco-warm-pg-1"},
			wantLeft: []string{"roboco-warm-pg-1"},
		},
		{
			name:      "ProcessOnlyOwnerDeadRemoved",
			needsProc: true,
			seed: func(t *testing.T, w *world) {
				w.sandbox("roboco-warm-pg-1", "", old, with(deadChild(t).Labels(prefix), keys.Owner, "-"))
			},
			wantRemoved: []string{"roboco-warm-pg-1"},
		},
		{
			name:      "ProcessOwnerDeadInGraceSkipped",
			needsProc: true,
			seed: func(t *testing.T, w *world) {
				w.sandbox("roboco-sandbox-pg-run", "roboco-agent-run", time.Second, deadChild(t).Labels(prefix))
			},
			wantSkipped: []string{"roboco-sandbox-pg-run"},
			wantLeft:    []string{"roboco-sandbox-pg-run"},
		},
		{
			name:      "ProcessOwnerOfPreviousBootRemoved",
			needsProc: true,
			seed: func(t *testing.T, w *world) {
				p := self
				p.BootID = "00000000-0000-0000-0000-000000000000"
				w.sandbox("roboco-sandbox-pg-run", "roboco-agent-run", old, p.Labels(prefix))
			},
			wantRemoved: []string{"roboco-sandbox-pg-run"},
		},
		{
			// No container is named after the owner either: only the rule
			// "never on a guess" keeps it.
			name: "MalformedProcessOwnerIsKeptAndReported",
			seed: func(t *testing.T, w *world) {
				w.sandbox("roboco-sandbox-pg-run", "roboco-agent-run", old, map[string]string{keys.OwnerPID: "x"})
			},
			wantReported: []string{"roboco-sandbox-pg-run"},
			wantReason:   lifetime.ErrMalformedOwner,
			wantLeft:     []string{"roboco-sandbox-pg-run"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needsProc {
				require.NoError(t, selfErr, "the process owner is read from /proc")
			}
			w := newWorld(t)
			tt.seed(t, w)

			rep, err := w.janitor(janitor.Options{}).Sweep(context.Background())
			if tt.wantReported == nil {
				require.NoError(t, err)
			} else {
				require.Error(t, err, "what is kept without a verdict is reported")
				assert.ErrorIs(t, err, tt.wantReason)
			}
			assert.Equal(t, orEmpty(tt.wantRemoved), sandboxNames(rep.Removed), "removed")
			assert.Equal(t, orEmpty(tt.wantKept), sandboxNames(rep.Kept), "kept")
			assert.Equal(t, orEmpty(tt.wantSkipped), sandboxNames(rep.Skipped), "skipped")
			assert.Equal(t, orEmpty(tt.wantReported), failureNames(rep.Errors), "reported")
			for _, f := range rep.Errors {
				assert.ErrorIs(t, f.Err, tt.wantReason, f.Sandbox.Name)
				assert.ErrorContains(t, f.Err, f.Sandbox.Name, "the error names the sandbox")
			}
			assert.Empty(t, rep.Vanished)
			assert.Equal(t, tt.wantLeft, w.names(), "containers left")
			assert.Equal(t, len(tt.wantRemoved), w.fake.Calls(fakeruntime.VerbRemove), "each orphan is removed in one forced remove")
			assert.Zero(t, w.fake.Calls(fakeruntime.VerbKill), "no separate kill")
			assert.Equal(t, len(tt.wantRemoved), w.fake.Calls(fakeruntime.VerbInspect),
				"one look-up per removal (removed or gone); no other lookup")
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestSweepReportsWhatItSaw(t *testing.T) {
	w := newWorld(t)
	c := w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", 200*time.Second, nil)

	rep, err := w.janitor(janitor.Options{}).Sweep(context.Background())
	require.NoError(t, err)
	require.Len(t, rep.Removed, 1)
	assert.Equal(t, janitor.Sandbox{
		ID: c.ID, Name: "roboco-sandbox-pg-1", Engine: "postgres",
		Owner: lifetime.Owner{Name: "roboco-agent-1"}, State: runtime.StateRunning, Status: "running",
		Created: c.Created, Age: 200 * time.Second,
	}, rep.Removed[0])
	assert.Equal(t, 1, rep.Total())
	assert.Equal(t, "removed 1, vanished 0, kept 0, skipped 0 (in grace), errors 0", rep.String())
}

func TestSweepGraceFollowsTheClock(t *testing.T) {
	w := newWorld(t)
	w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", 0, nil)
	j := w.janitor(janitor.Options{Grace: 2 * time.Second})

	rep, err := j.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"roboco-sandbox-pg-1"}, sandboxNames(rep.Skipped), "fresh: in grace")

	w.clock.Advance(1999 * time.Millisecond)
	rep, err = j.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"roboco-sandbox-pg-1"}, sandboxNames(rep.Skipped), "still in grace")

	w.clock.Advance(time.Millisecond)
	rep, err = j.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"roboco-sandbox-pg-1"}, sandboxNames(rep.Removed), "grace over")
	assert.Empty(t, w.names())
}

// TestSweepTruncatedCreationTime: Docker's list reports creation times in
// whole seconds, truncated. Such a time is taken as the end of its second,
// so that the truncation never removes a sandbox before its grace is over.
func TestSweepTruncatedCreationTime(t *testing.T) {
	w := newWorld(t)
	grace := 2 * time.Second
	created := w.clock.Now() // really created at 03:04:05.250
	w.fake.Seed(runtime.Container{Name: "roboco-sandbox-pg-1", Created: created.Truncate(time.Second), Labels: map[string]string{
		keys.Sandbox: "1", keys.Owner: "roboco-agent-1",
	}})
	j := w.janitor(janitor.Options{Grace: grace})

	w.clock.Advance(grace - time.Millisecond) // 1.999 s after the real creation
	rep, err := j.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"roboco-sandbox-pg-1"}, sandboxNames(rep.Skipped), "never early")

	w.clock.Advance(751 * time.Millisecond) // the end of the reported second + grace
	rep, err = j.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"roboco-sandbox-pg-1"}, sandboxNames(rep.Removed))
	assert.GreaterOrEqual(t, w.clock.Now().Sub(created), grace)
}

func TestSweepOneFailingContainerDoesNotStopTheSweep(t *testing.T) {
	w := newWorld(t)
	for i := 1; i <= 5; i++ {
		w.sandbox(fmt.Sprintf("roboco-sandbox-pg-%d", i), fmt.Sprintf("roboco-agent-%d", i), time.Hour, nil)
	}
	stuck := w.fake.Containers()[2] // roboco-sandbox-pg-3
	var broken sync.Map
	broken.Store(stuck.ID, true)
	w.fake.OnCall(func(_ context.Context, c fakeruntime.Call) error {
		if _, ok := broken.Load(c.Object); ok && c.Verb == fakeruntime.VerbRemove {
			return errors.New("device or resource busy")
		}
		return nil
	})
	j := w.janitor(janitor.Options{})

	rep, err := j.Sweep(context.Background())
	require.Error(t, err)
	assert.ErrorContains(t, err, "roboco-sandbox-pg-3")
	assert.ErrorContains(t, err, "device or resource busy")
	assert.Equal(t, []string{"roboco-sandbox-pg-1", "roboco-sandbox-pg-2", "roboco-sandbox-pg-4", "roboco-sandbox-pg-5"}, sandboxNames(rep.Removed))
	assert.Equal(t, []string{"roboco-sandbox-pg-3"}, failureNames(rep.Errors))
	assert.Equal(t, []string{"roboco-sandbox-pg-3"}, w.names(), "the failed one is left for the next sweep")

	broken.Delete(stuck.ID)
	rep, err = j.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"roboco-sandbox-pg-3"}, sandboxNames(rep.Removed), "the next sweep retries it")
	assert.Empty(t, w.names())
}

func TestSweepFailedLookUpStillRemoves(t *testing.T) {
	w := newWorld(t)
	w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", time.Hour, nil)
	w.fake.Fail(fakeruntime.VerbInspect, "", errors.New("inspect timed out"))

	rep, err := w.janitor(janitor.Options{}).Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"roboco-sandbox-pg-1"}, sandboxNames(rep.Removed))
	assert.Empty(t, w.names(), "remove is forced")
}

func TestSweepSnapshotFailureRemovesNothing(t *testing.T) {
	tests := []struct {
		name  string
		fault func(w *world)
		want  error
	}{
		{
			name:  "SnapshotFails",
			fault: func(w *world) { w.fake.Fail(fakeruntime.VerbSnapshot, "", runtime.ErrUnavailable) },
			want:  runtime.ErrUnavailable,
		},
		{
			name: "SnapshotHangs",
			fault: func(w *world) {
				w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
					if c.Verb == fakeruntime.VerbSnapshot {
						<-ctx.Done()
						return ctx.Err()
					}
					return nil
				})
			},
			want: context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", time.Hour, nil)
			tt.fault(w)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			start := time.Now()
			rep, err := w.janitor(janitor.Options{CallTimeout: 100 * time.Millisecond}).Sweep(ctx)
			assert.Less(t, time.Since(start), 5*time.Second, "bounded by CallTimeout, not by the caller's context")
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.want)
			assert.Zero(t, rep.Total())
			assert.Equal(t, []string{"roboco-sandbox-pg-1"}, w.names())
			assert.Zero(t, w.fake.Calls(fakeruntime.VerbKill)+w.fake.Calls(fakeruntime.VerbRemove))
		})
	}
}

func TestSweepUndecidedOwnersAreNotRemoved(t *testing.T) {
	tests := []struct {
		name     string
		liveness lifetime.Liveness
		setup    func(w *world)
		wantErr  string
	}{
		{
			name: "LivenessFailsPartway",
			liveness: lifetime.LivenessFunc(func(_ context.Context, owners []lifetime.Owner) (map[lifetime.Owner]bool, error) {
				return map[lifetime.Owner]bool{{Name: "roboco-agent-1"}: false}, errors.New("owner registry down")
			}),
			wantErr: "owner registry down",
		},
		{
			name: "LivenessForgetsAnOwner",
			liveness: lifetime.LivenessFunc(func(_ context.Context, owners []lifetime.Owner) (map[lifetime.Owner]bool, error) {
				return map[lifetime.Owner]bool{{Name: "roboco-agent-1"}: false}, nil
			}),
			wantErr: "no verdict",
		},
		{
			// ContainerLiveness takes its own snapshot: the second of the sweep.
			name:    "OwnerSnapshotFails",
			setup:   func(w *world) { w.fake.FailNth(fakeruntime.VerbSnapshot, 2, runtime.ErrUnavailable) },
			wantErr: "list owner containers",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", time.Hour, nil)
			w.sandbox("roboco-sandbox-pg-2", "roboco-agent-2", time.Hour, nil)
			liveness := tt.liveness
			if liveness == nil {
				liveness = lifetime.ContainerLiveness(w.fake)
			}
			if tt.setup != nil {
				tt.setup(w)
			}
			rep, err := w.janitor(janitor.Options{Liveness: liveness}).Sweep(context.Background())
			require.Error(t, err)
			assert.ErrorContains(t, err, tt.wantErr)
			assert.ErrorIs(t, err, janitor.ErrUndecided)
			assert.Contains(t, failureNames(rep.Errors), "roboco-sandbox-pg-2")
			for _, f := range rep.Errors {
				if f.Sandbox.Name == "roboco-sandbox-pg-2" {
					assert.ErrorIs(t, f.Err, janitor.ErrUndecided)
				}
			}
			assert.Contains(t, w.names(), "roboco-sandbox-pg-2", "never removed on a guess")
		})
	}
}

func TestSweepDryRunRemovesNothing(t *testing.T) {
	w := newWorld(t)
	w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", time.Hour, nil)
	w.sandbox("roboco-sandbox-pg-2", "roboco-agent-2", time.Second, nil)

	rep, err := w.janitor(janitor.Options{DryRun: true}).Sweep(context.Background())
	require.NoError(t, err)
	assert.True(t, rep.DryRun)
	assert.Equal(t, []string{"roboco-sandbox-pg-1"}, sandboxNames(rep.Removed))
	assert.Equal(t, []string{"roboco-sandbox-pg-2"}, sandboxNames(rep.Skipped))
	assert.Equal(t, "would remove 1, vanished 0, kept 0, skipped 1 (in grace), errors 0", rep.String())
	assert.Len(t, w.names(), 2)
	assert.Zero(t, w.fake.Calls(fakeruntime.VerbKill)+w.fake.Calls(fakeruntime.VerbRemove))
	assert.Zero(t, w.fake.Calls(fakeruntime.VerbInspect), "not even a look-up")
}

// TestSweepRoundTrips proves the snapshot rule: one Snapshot with the
// sandbox selector per sweep, whatever the number of sandboxes or owners,
// no List, and no per-sandbox or per-owner lookup. Inspect is made only by
// removals: one look-up each, which tells removed from gone.
func TestSweepRoundTrips(t *testing.T) {
	sandboxSel := map[string]string{keys.Sandbox: "1"}
	self, selfErr := lifetime.CurrentProcess()
	tests := []struct {
		name string
		seed func(w *world)
		// wantRemoved is how many the first sweep removes (the later
		// sweeps remove nothing).
		wantRemoved int
		// wantReported: the sweeps keep and report sandboxes (an error).
		wantReported bool
	}{
		{name: "Empty", seed: func(w *world) {}},
		{
			name: "AllInGrace",
			seed: func(w *world) {
				for i := range 50 {
					w.sandbox(fmt.Sprintf("roboco-sandbox-pg-%d", i), fmt.Sprintf("roboco-agent-%d", i), time.Second, nil)
				}
			},
		},
		{
			name: "OnlyOwnerless",
			seed: func(w *world) {
				for i := range 50 {
					w.sandbox(fmt.Sprintf("roboco-sandbox-pg-%d", i), "", time.Hour, nil)
				}
			},
			wantReported: true,
		},
		{
			name: "OnlyProcessOwned",
			seed: func(w *world) {
				require.NoError(w.t, selfErr, "the process owner is read from /proc")
				for i := range 50 {
					w.sandbox(fmt.Sprintf("roboco-sandbox-pg-%d", i), "roboco-agent-run", time.Hour, self.Labels(prefix))
				}
			},
		},
		{
			name: "ManyContainerOwnersInEveryState",
			seed: func(w *world) {
				states := []runtime.State{runtime.StateCreated, runtime.StateRunning, runtime.StatePaused, runtime.StateExited}
				for i := range 200 {
					if i%2 == 0 {
						w.agent(fmt.Sprintf("roboco-agent-%d", i), states[(i/2)%len(states)])
					}
					w.sandbox(fmt.Sprintf("roboco-sandbox-pg-%d", i), fmt.Sprintf("roboco-agent-%d", i), time.Hour, nil)
					w.sandbox(fmt.Sprintf("roboco-sandbox-redis-%d", i), fmt.Sprintf("roboco-agent-%d", i), time.Hour, nil)
				}
			},
			wantRemoved: 200,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			tt.seed(w)
			spy := &callSpy{ContainerRuntime: w.fake}
			j, err := janitor.New(spy, janitor.Options{Now: w.clock.Now})
			require.NoError(t, err)
			for sweep := range 3 {
				inspects := w.fake.Calls(fakeruntime.VerbInspect)
				rep, err := j.Sweep(context.Background())
				if tt.wantReported {
					require.Error(t, err)
				} else {
					require.NoError(t, err)
				}
				lists, snapshots := spy.take()
				assert.Equal(t, []map[string]string{sandboxSel}, snapshots, "sweep %d: one snapshot", sweep)
				assert.Empty(t, lists, "sweep %d: no List", sweep)
				want := 0
				if sweep == 0 {
					want = tt.wantRemoved
				}
				assert.Len(t, rep.Removed, want, "sweep %d", sweep)
				assert.Equal(t, want, w.fake.Calls(fakeruntime.VerbInspect)-inspects,
					"sweep %d: one look-up per removal, no per-owner lookup", sweep)
			}
		})
	}
}

// TestSweepRemovesByID: a provisioner may replace a stale sandbox with a
// fresh one of the same name between a sweep's snapshot and its removals.
// The sweep must remove only the container it judged, never the newcomer,
// and reports the one it judged as vanished.
func TestSweepRemovesByID(t *testing.T) {
	w := newWorld(t)
	w.fake.AddImage("postgres:16-alpine")
	stale := w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", time.Hour, nil)
	var fresh runtime.Container
	liveness := lifetime.LivenessFunc(func(ctx context.Context, owners []lifetime.Owner) (map[lifetime.Owner]bool, error) {
		// What a provisioner's pre-clear + run does meanwhile.
		require.NoError(t, w.fake.Remove(ctx, stale.ID))
		var err error
		fresh, err = w.fake.Run(ctx, runtime.RunSpec{Name: stale.Name, Image: "postgres:16-alpine", Labels: stale.Labels})
		require.NoError(t, err)
		return map[lifetime.Owner]bool{{Name: "roboco-agent-1"}: false}, nil
	})

	rep, err := w.janitor(janitor.Options{Liveness: liveness}).Sweep(context.Background())
	require.NoError(t, err)
	left := w.fake.Containers()
	require.Len(t, left, 1)
	assert.Equal(t, fresh.ID, left[0].ID, "the fresh sandbox survives")
	assert.True(t, left[0].Running())
	assert.Empty(t, rep.Removed)
	require.Len(t, rep.Vanished, 1)
	assert.Equal(t, stale.ID, rep.Vanished[0].ID, "the judged one is reported as vanished")
}

func TestSweepRemovesInParallel(t *testing.T) {
	w := newWorld(t)
	for i := range 20 {
		w.sandbox(fmt.Sprintf("roboco-sandbox-pg-%d", i), fmt.Sprintf("roboco-agent-%d", i), time.Hour, nil)
	}
	var (
		mu      sync.Mutex
		waiting int
		release = make(chan struct{})
	)
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb != fakeruntime.VerbRemove {
			return nil
		}
		mu.Lock()
		waiting++
		if waiting == 4 {
			close(release)
		}
		mu.Unlock()
		select { // hold the first removals until 4 are in flight
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := w.janitor(janitor.Options{Concurrency: 4}).Sweep(ctx)
	require.NoError(t, err)
	assert.Len(t, rep.Removed, 20)
	assert.Equal(t, 4, w.fake.MaxInFlight(fakeruntime.VerbRemove), "bounded by Concurrency")
}

// TestSweepOwnerLifetime: a sandbox lives exactly as long as its owner
// container exists, in any state (an agent created while its image pulls,
// or stopped to be restarted, still owns its databases); the first sweep
// after the owner is removed removes its sandboxes. The grace window is
// 1ns, so that only the owner decides.
func TestSweepOwnerLifetime(t *testing.T) {
	tests := []struct {
		name  string
		state runtime.State
		// byID: the owner label holds the owner's ID, as the runtime's own
		// tools also know it (a container ctr made: ctr's ID is the name).
		byID bool
	}{
		{name: "CreatedOwnerKeepsItsSandboxes", state: runtime.StateCreated},
		{name: "RunningOwnerKeepsItsSandboxes", state: runtime.StateRunning},
		{name: "PausedOwnerKeepsItsSandboxes", state: runtime.StatePaused},
		{name: "ExitedOwnerKeepsItsSandboxes", state: runtime.StateExited},
		{name: "OwnerKnownByIDKeepsItsSandboxes", state: runtime.StateExited, byID: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t)
			agent := w.agent("roboco-agent-1", tt.state)
			ref := agent.Name
			if tt.byID {
				ref = agent.ID
			}
			w.sandbox("roboco-sandbox-pg-1", ref, time.Second, nil)
			w.sandbox("roboco-sandbox-redis-1", ref, time.Second, nil)
			// A bystander whose owner never existed: proves the sweep
			// does remove at this grace.
			w.sandbox("roboco-sandbox-pg-2", "roboco-agent-2", time.Second, nil)
			j := w.janitor(janitor.Options{NoGrace: true})
			owned := []string{"roboco-sandbox-pg-1", "roboco-sandbox-redis-1"}

			rep, err := j.Sweep(ctx)
			require.NoError(t, err)
			assert.Equal(t, owned, sandboxNames(rep.Kept))
			assert.Equal(t, []string{"roboco-sandbox-pg-2"}, sandboxNames(rep.Removed))

			rep, err = j.Sweep(ctx)
			require.NoError(t, err)
			assert.Equal(t, owned, sandboxNames(rep.Kept), "and kept by every later sweep")
			assert.Empty(t, rep.Removed)
			now, err := w.fake.Inspect(ctx, agent.ID)
			require.NoError(t, err)
			assert.Equal(t, tt.state, now.State, "the janitor never touches an owner")

			require.NoError(t, w.fake.Remove(ctx, agent.ID))
			rep, err = j.Sweep(ctx)
			require.NoError(t, err)
			assert.Equal(t, owned, sandboxNames(rep.Removed), "the owner is gone once removed")
			assert.Empty(t, rep.Kept)
			assert.Empty(t, w.names())
		})
	}
}

// TestSweepHungContainer: a runtime that hangs on one container (its look-up
// and its remove block until their deadline) costs that container's
// removal a bounded time and an error naming it; the other orphans are
// removed, and a later sweep removes it once the runtime answers again.
func TestSweepHungContainer(t *testing.T) {
	const callTimeout = 200 * time.Millisecond
	w := newWorld(t)
	for i := 1; i <= 5; i++ {
		w.sandbox(fmt.Sprintf("roboco-sandbox-pg-%d", i), fmt.Sprintf("roboco-agent-%d", i), time.Hour, nil)
	}
	stuck := w.fake.Containers()[2]
	require.Equal(t, "roboco-sandbox-pg-3", stuck.Name)
	var hanging atomic.Bool
	hanging.Store(true)
	held := w.hang(stuck.ID, &hanging, fakeruntime.VerbInspect, fakeruntime.VerbRemove)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j := w.janitor(janitor.Options{CallTimeout: callTimeout})

	start := time.Now()
	rep, err := j.Sweep(ctx)
	assert.Less(t, time.Since(start), 5*time.Second, "bounded by CallTimeout, not by the hang")
	require.Error(t, err)
	assert.ErrorContains(t, err, stuck.Name, "the error names the container")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.EqualValues(t, 2, held.Load(), "the look-up hung, and the remove was still tried")
	assert.Equal(t, []string{"roboco-sandbox-pg-1", "roboco-sandbox-pg-2", "roboco-sandbox-pg-4", "roboco-sandbox-pg-5"}, sandboxNames(rep.Removed))
	assert.Equal(t, []string{stuck.Name}, failureNames(rep.Errors))
	assert.Equal(t, []string{stuck.Name}, w.names(), "left for the next sweep")

	hanging.Store(false)
	rep, err = j.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{stuck.Name}, sandboxNames(rep.Removed), "the next sweep retries it")
	assert.Empty(t, w.names())
}

// TestRunKeepsSweepingPastAHungContainer: a container the runtime never
// answers for does not stall the loop: sweeps keep coming, each failing
// on it alone, and orphans that appear meanwhile are removed.
func TestRunKeepsSweepingPastAHungContainer(t *testing.T) {
	w := newWorld(t)
	stuck := w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", time.Hour, nil)
	var hanging atomic.Bool
	hanging.Store(true) // for ever
	held := w.hang(stuck.ID, &hanging, fakeruntime.VerbInspect, fakeruntime.VerbRemove)
	var logs syncBuffer
	j := w.janitor(janitor.Options{CallTimeout: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx, 10*time.Millisecond) }()

	require.Eventually(t, func() bool { return w.fake.Calls(fakeruntime.VerbSnapshot) >= 3 }, 5*time.Second, 5*time.Millisecond,
		"the loop keeps sweeping")
	w.sandbox("roboco-sandbox-pg-2", "roboco-agent-2", time.Hour, nil)
	require.Eventually(t, func() bool { return slices.Equal(w.names(), []string{stuck.Name}) }, 5*time.Second, 5*time.Millisecond,
		"an orphan that appears meanwhile is removed")
	assert.GreaterOrEqual(t, held.Load(), int32(4), "every sweep tries the hung one again")

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), stuck.Name, "the warning names the container")
}

// syncBuffer is safe for a logger writing from Run's goroutine while the
// test reads.
type syncBuffer = testkit.SyncBuffer

func TestRun(t *testing.T) {
	w := newWorld(t)
	w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", time.Hour, nil)
	w.sandbox("roboco-sandbox-redis-1", "roboco-agent-1", time.Hour, nil)
	var logs syncBuffer
	j := w.janitor(janitor.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx, 20*time.Millisecond) }()

	require.Eventually(t, func() bool { return len(w.names()) == 0 }, 5*time.Second, 5*time.Millisecond, "the first sweep runs at start")
	w.sandbox("roboco-sandbox-pg-2", "roboco-agent-2", time.Hour, nil)
	require.Eventually(t, func() bool { return len(w.names()) == 0 }, 5*time.Second, 5*time.Millisecond, "and then on every tick")
	require.Eventually(t, func() bool { return w.fake.Calls(fakeruntime.VerbSnapshot) >= 6 }, 5*time.Second, 5*time.Millisecond)

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err, "a cancelled Run is a clean stop")
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 2, "one line per sweep that removed something, none for idle sweeps:\n%s", logs.String())
	assert.Contains(t, lines[0], "removed 2")
	assert.Contains(t, lines[0], "roboco-sandbox-pg-1")
	assert.Contains(t, lines[1], "removed 1")
}

func TestRunLogsFailures(t *testing.T) {
	w := newWorld(t)
	w.fake.Fail(fakeruntime.VerbSnapshot, "", runtime.ErrUnavailable)
	var logs syncBuffer
	j := w.janitor(janitor.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx, 10*time.Millisecond) }()
	require.Eventually(t, func() bool { return w.fake.Calls(fakeruntime.VerbSnapshot) >= 3 }, 5*time.Second, 5*time.Millisecond, "a failing sweep does not stop the loop")
	cancel()
	require.NoError(t, <-done)
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "runtime unavailable")
}

func TestRunRejectsBadInterval(t *testing.T) {
	w := newWorld(t)
	err := w.janitor(janitor.Options{}).Run(context.Background(), 0)
	assert.ErrorIs(t, err, janitor.ErrInvalid)
	assert.ErrorContains(t, err, "interval")
}

// TestNewRefusesBadOptions: New refuses an invalid option with an
// ErrInvalid error naming it, as Options.Validate says, without asking the
// runtime anything; valid options make a janitor that sweeps.
func TestNewRefusesBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts janitor.Options
		want string // "" when valid
	}{
		{name: "ZeroValue"},
		{name: "NoGrace", opts: janitor.Options{NoGrace: true}},
		{name: "Explicit", opts: janitor.Options{Prefix: "sbx", Grace: time.Minute, Concurrency: 2, CallTimeout: time.Second}},
		{name: "NegativeGrace", opts: janitor.Options{Grace: -time.Second}, want: "grace -1s: must not be negative"},
		{name: "NoGraceWithAGrace", opts: janitor.Options{NoGrace: true, Grace: time.Minute}, want: "grace 1m0s with NoGrace"},
		{name: "NegativeConcurrency", opts: janitor.Options{Concurrency: -1}, want: "concurrency -1"},
		{name: "NegativeCallTimeout", opts: janitor.Options{CallTimeout: -time.Second}, want: "call timeout -1s"},
		{name: "BadPrefix", opts: janitor.Options{Prefix: "Bad Prefix"}, want: `label prefix "Bad Prefix": ` + labels.PrefixRule},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", time.Hour, nil)
			opts := tt.opts
			opts.Now = w.clock.Now
			j, err := janitor.New(w.fake, opts)
			if tt.want == "" {
				require.NoError(t, err)
				require.NoError(t, tt.opts.Validate())
				_, err = j.Sweep(context.Background())
				assert.NoError(t, err)
				return
			}
			assert.Nil(t, j)
			assert.ErrorIs(t, err, janitor.ErrInvalid)
			assert.ErrorContains(t, err, tt.want)
			assert.Equal(t, tt.opts.Validate(), err, "New says what Validate says")
			assert.Zero(t, w.fake.Calls(fakeruntime.VerbSnapshot), "the runtime was not asked")
			assert.Equal(t, []string{"roboco-sandbox-pg-1"}, w.names())
		})
	}
	_, err := janitor.New(nil, janitor.Options{Prefix: "Bad"})
	assert.ErrorIs(t, err, labels.ErrInvalidPrefix)
}

// TestSweepNoGrace: without a grace window an orphan is removed however
// young, while a zero Grace is the default window; a whole-second creation
// time still stands for the end of its second.
func TestSweepNoGrace(t *testing.T) {
	tests := []struct {
		name        string
		opts        janitor.Options
		created     func(now time.Time) time.Time
		wantRemoved bool
	}{
		{name: "ZeroGraceIsTheDefault", opts: janitor.Options{}, created: func(now time.Time) time.Time { return now.Add(-time.Minute) }},
		{name: "NoGraceRemovesAFreshOrphan", opts: janitor.Options{NoGrace: true}, created: func(now time.Time) time.Time { return now }, wantRemoved: true},
		{name: "NoGraceKeepsTheLastWholeSecond", opts: janitor.Options{NoGrace: true}, created: func(now time.Time) time.Time { return now.Truncate(time.Second) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.fake.Seed(runtime.Container{Name: "roboco-sandbox-pg-1", Created: tt.created(w.clock.Now()), Labels: map[string]string{
				keys.Sandbox: "1", keys.Owner: "roboco-agent-1",
			}})
			rep, err := w.janitor(tt.opts).Sweep(context.Background())
			require.NoError(t, err)
			if tt.wantRemoved {
				assert.Equal(t, []string{"roboco-sandbox-pg-1"}, sandboxNames(rep.Removed))
				assert.Empty(t, w.names())
				return
			}
			assert.Equal(t, []string{"roboco-sandbox-pg-1"}, sandboxNames(rep.Skipped))
		})
	}
}

// BenchmarkSweep1000 times one sweep over 1000 sandboxes on the fake
// runtime: "kept" (500 owners alive, each with two sandboxes) is the
// steady state of a busy host; "removed" kills and removes all 1000. It
// reports the runtime round trips of a sweep: snapshots/op (one), lists/op
// (none) and calls/op (every verb: 1 when nothing is removed, plus an
// inspect, a kill, an inspect and a remove per removal).
func BenchmarkSweep1000(b *testing.B) {
	seed := func(w *world, live bool) {
		for i := range 500 {
			owner := fmt.Sprintf("roboco-agent-%d", i)
			if live {
				w.agent(owner, runtime.StateRunning)
			}
			w.sandbox(fmt.Sprintf("roboco-sandbox-pg-%d", i), owner, time.Hour, nil)
			w.sandbox(fmt.Sprintf("roboco-sandbox-redis-%d", i), owner, time.Hour, nil)
		}
	}
	b.Run("kept", func(b *testing.B) {
		w := newWorld(b)
		seed(w, true)
		j := w.janitor(janitor.Options{})
		before := roundTrips(w.fake)
		for b.Loop() {
			rep, err := j.Sweep(context.Background())
			if err != nil || len(rep.Kept) != 1000 {
				b.Fatalf("sweep: %v, %s", err, rep)
			}
		}
		reportRoundTrips(b, roundTrips(w.fake).minus(before))
	})
	b.Run("removed", func(b *testing.B) {
		var total trips
		for b.Loop() {
			b.StopTimer()
			w := newWorld(b)
			seed(w, false)
			j := w.janitor(janitor.Options{})
			b.StartTimer()
			rep, err := j.Sweep(context.Background())
			if err != nil || len(rep.Removed) != 1000 {
				b.Fatalf("sweep: %v, %s", err, rep)
			}
			total = total.plus(roundTrips(w.fake))
		}
		reportRoundTrips(b, total)
	})
}

// trips counts runtime calls, by kind.
type trips struct{ snapshots, lists, all int }

func roundTrips(f *fakeruntime.Runtime) trips {
	t := trips{snapshots: f.Calls(fakeruntime.VerbSnapshot), lists: f.Calls(fakeruntime.VerbList)}
	for _, v := range []string{fakeruntime.VerbSnapshot, fakeruntime.VerbList, fakeruntime.VerbInspect, fakeruntime.VerbKill,
		fakeruntime.VerbRemove, fakeruntime.VerbStop, fakeruntime.VerbExec} {
		t.all += f.Calls(v)
	}
	return t
}

func (t trips) minus(o trips) trips {
	return trips{t.snapshots - o.snapshots, t.lists - o.lists, t.all - o.all}
}

func (t trips) plus(o trips) trips {
	return trips{t.snapshots + o.snapshots, t.lists + o.lists, t.all + o.all}
}

func reportRoundTrips(b *testing.B, t trips) {
	b.ReportMetric(float64(t.snapshots)/float64(b.N), "snapshots/op")
	b.ReportMetric(float64(t.lists)/float64(b.N), "lists/op")
	b.ReportMetric(float64(t.all)/float64(b.N), "calls/op")
}

// reconcileSpy is a runtime that keeps host state of its own
// (runtime.Reconciler) and counts its reconciliations.
type reconcileSpy struct {
	runtime.ContainerRuntime
	calls int
	err   error
}

func (r *reconcileSpy) Reconcile(context.Context) error {
	r.calls++
	return r.err
}

// TestSweepReconcilesTheRuntime: a sweep that may remove things lets a
// runtime.Reconciler remove its leftovers (so that gc does); a dry run
// does not, and a failed reconciliation fails no sandbox of the report.
func TestSweepReconcilesTheRuntime(t *testing.T) {
	tests := []struct {
		name      string
		dryRun    bool
		err       error
		wantCalls int
	}{
		{name: "sweep", wantCalls: 1},
		{name: "dry run", dryRun: true, wantCalls: 0},
		{name: "reconcile fails", err: errors.New("iptables: locked"), wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.sandbox("roboco-sandbox-pg-1", "roboco-agent-1", time.Hour, nil)
			spy := &reconcileSpy{ContainerRuntime: w.fake, err: tt.err}
			j, err := janitor.New(spy, janitor.Options{Now: w.clock.Now, DryRun: tt.dryRun})
			require.NoError(t, err)
			rep, err := j.Sweep(context.Background())
			require.NoError(t, err)
			assert.Equal(t, []string{"roboco-sandbox-pg-1"}, sandboxNames(rep.Removed))
			assert.Equal(t, tt.wantCalls, spy.calls, "reconciliations")
		})
	}

}

// TestSweepSaysWhyASandboxEnded: the report of a sandbox that exited says
// how, an OOM kill included, so that the owner of a dead sandbox learns it
// from the sweep that removes it.
func TestSweepSaysWhyASandboxEnded(t *testing.T) {
	w := newWorld(t)
	lbls := map[string]string{keys.Sandbox: "1", keys.Owner: "roboco-agent-1", keys.Engine: "redis"}
	created := w.clock.Now().Add(-time.Hour)
	w.fake.Seed(runtime.Container{Name: "roboco-sandbox-redis-1", Image: "redis", Labels: lbls, Created: created,
		State: runtime.StateExited, ExitCode: 137, OOMKilled: true})
	lbls2 := maps.Clone(lbls)
	lbls2[keys.Owner] = "roboco-agent-2"
	w.fake.Seed(runtime.Container{Name: "roboco-sandbox-redis-2", Image: "redis", Labels: lbls2, Created: created,
		State: runtime.StateExited, ExitCode: 1})
	rep, err := w.janitor(janitor.Options{}).Sweep(context.Background())
	require.NoError(t, err)
	require.Len(t, rep.Removed, 2)
	assert.Equal(t, "exited (OOM killed)", rep.Removed[0].Status)
	assert.Equal(t, "exited (code 1)", rep.Removed[1].Status)
}

// TestSweepRunOwner: a sandbox owned by a run (lifetime.Run: the test
// binaries of a `go test ./...` sharing it) is kept while a process takes
// part in the run, whatever its owner container label says, and removed
// once the last one has left; never adopted by a container of its name.
func TestSweepRunOwner(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	path := filepath.Join(t.TempDir(), "x.run")
	var run lifetime.Run
	p, err := lifetime.Join(ctx, path, func(_ context.Context, r lifetime.Run, _ []byte) ([]byte, error) {
		run = r
		return []byte(`{}`), nil
	}, func(context.Context, lifetime.Run, []byte) error { return errors.New("nobody else takes part") })
	require.NoError(t, err)
	w.agent("roboco-shared", runtime.StateRunning) // a container named as the owner label proves nothing
	w.sandbox("roboco-sandbox-pg-shared", "roboco-shared", time.Second, run.Labels(keys.Prefix))
	// A sandbox of an earlier generation of the same run file is over.
	stale := run
	stale.ID = "0123456789abcdef"
	w.sandbox("roboco-sandbox-pg-stale", "roboco-shared", time.Second, stale.Labels(keys.Prefix))
	j := w.janitor(janitor.Options{NoGrace: true})

	rep, err := j.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"roboco-sandbox-pg-shared"}, sandboxNames(rep.Kept), "a participant lives: %s", rep)
	assert.Equal(t, []string{"roboco-sandbox-pg-stale"}, sandboxNames(rep.Removed))
	assert.Empty(t, rep.Adopted, "a run owner is no container to adopt by")

	require.NoError(t, p.Leave(ctx, nil))
	rep, err = j.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"roboco-sandbox-pg-shared"}, sandboxNames(rep.Removed), "the last participant left: %s", rep)
	assert.Equal(t, []string{"roboco-shared"}, w.names())
}
