package provision_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// warmOptions are the world's options with warm start on.
func (w *world) warmOptions() provision.Options {
	o := w.options()
	o.Warm = provision.WarmAuto
	return o
}

// templates are the template images present on the fake.
func (w *world) templates() []string {
	var out []string
	for _, ref := range w.fake.Images() {
		if strings.HasPrefix(ref, provision.TemplateRepo) {
			out = append(out, ref)
		}
	}
	return out
}

// countRuns counts the Runs whose name contains part.
func (w *world) countRuns(part string) *atomic.Int32 {
	var n atomic.Int32
	w.fake.OnCall(func(_ context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbRun && strings.Contains(c.Run.Name, part) {
			n.Add(1)
		}
		return nil
	})
	return &n
}

func TestWarmTemplateBuiltOnceUnderConcurrentProvisions(t *testing.T) {
	w := newWorld(t)
	builds := w.countRuns("-warm-")
	p := w.provisioner(w.warmOptions())
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = p.Provision(t.Context(), []string{"a1", "a2", "a3"}[i], []string{"postgres"})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "provision %d", i)
	}
	assert.Equal(t, int32(1), builds.Load(), "one template container for three provisions")
	assert.Len(t, w.events(provision.EventTemplateBuilt), 1, "one template built")
	tmpls := w.templates()
	require.Len(t, tmpls, 1)
	for _, ev := range w.events(provision.EventReady) {
		assert.Equal(t, tmpls[0], ev.Template, "%s started warm", ev.Container)
	}
	for _, c := range w.fake.Containers() {
		assert.NotContains(t, c.Name, "-warm-", "the template container is gone")
	}
	warm := w.named("roboco-sandbox-pg-a1")
	assert.Equal(t, tmpls[0], warm.Image, "a warm sandbox runs its template")
}

func TestWarmRedisStaysCold(t *testing.T) {
	w := newWorld(t)
	p := w.provisioner(w.warmOptions())
	_, err := p.Provision(t.Context(), "r1", []string{"redis"})
	require.NoError(t, err)
	assert.Zero(t, w.fake.Calls(fakeruntime.VerbImageID), "redis has no warm start: nothing is looked up")
	assert.Zero(t, w.fake.Calls(fakeruntime.VerbLoadImage))
	ready := w.events(provision.EventReady)
	require.Len(t, ready, 1)
	assert.Empty(t, ready[0].Template)
}

func TestWarmOffNeverLooks(t *testing.T) {
	w := newWorld(t)
	_, err := w.provisioner(w.options()).Provision(t.Context(), "o1", []string{"postgres", "redis", "mongo"})
	require.NoError(t, err)
	for _, verb := range []string{fakeruntime.VerbImageID, fakeruntime.VerbSaveImage, fakeruntime.VerbLoadImage, fakeruntime.VerbRemoveImage} {
		assert.Zero(t, w.fake.Calls(verb), verb)
	}
	assert.Empty(t, w.events(provision.EventWarmFallback))
}

func TestWarmFailingBuildFallsBackAndLeavesNothing(t *testing.T) {
	w := newWorld(t)
	// The clean stop of the template's server fails.
	w.fake.Script("sh", fakeruntime.Result{ExitCode: 1, Stderr: "pg_ctl: could not stop"})
	builds := w.countRuns("-warm-")
	p := w.provisioner(w.warmOptions())
	sb, err := p.Provision(t.Context(), "f1", []string{"postgres"})
	require.NoError(t, err, "a failed build falls back to a cold start")
	fb := w.events(provision.EventWarmFallback)
	require.Len(t, fb, 1)
	assert.ErrorContains(t, fb[0].Err, "stop the server")
	assert.Empty(t, w.templates(), "no template")
	names := make([]string, 0)
	for _, c := range w.fake.Containers() {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"roboco-sandbox-pg-f1"}, names, "the cold sandbox alone")
	assert.Equal(t, "postgres:16-alpine", w.named(sb.Containers[0].Name).Image, "started cold")

	_, err = p.Provision(t.Context(), "f2", []string{"postgres"})
	require.NoError(t, err)
	assert.Equal(t, int32(1), builds.Load(), "a failed build is not tried again by the next provision")
	fb = w.events(provision.EventWarmFallback)
	require.Len(t, fb, 2)
	assert.ErrorContains(t, fb[1].Err, "tried again after")
}

func TestWarmStartFailureBlamesTheTemplate(t *testing.T) {
	w := newWorld(t)
	p := w.provisioner(w.warmOptions())
	_, err := p.EnsureTemplate(t.Context(), "postgres")
	require.NoError(t, err)
	tmpl := w.templates()
	require.Len(t, tmpl, 1)

	// A sandbox of the template exits 1 on its own; a cold one is ready.
	w.fake.SetExec(func(_ context.Context, c runtime.Container, spec runtime.ExecSpec) (runtime.ExecResult, error) {
		if c.Image == tmpl[0] {
			w.fake.SetState(c.ID, runtime.StateExited, 1)
			return runtime.ExecResult{}, errors.New("container is exited")
		}
		if spec.Cmd[0] == "psql" {
			return runtime.ExecResult{Stdout: []byte("1\n")}, nil
		}
		return runtime.ExecResult{}, nil
	})
	sb, err := p.Provision(t.Context(), "b1", []string{"postgres"})
	require.NoError(t, err, "the failed warm start falls back to cold")
	assert.Len(t, w.events(provision.EventWarmFallback), 1)
	removed := w.events(provision.EventTemplateRemoved)
	require.Len(t, removed, 1)
	assert.Equal(t, tmpl[0], removed[0].Template)
	assert.Empty(t, w.templates(), "the blamed template is removed")
	assert.Len(t, w.owned(p.OwnerName("b1")), 1, "exactly one container: the failed one was destroyed first")
	assert.Equal(t, "postgres:16-alpine", w.named(sb.Containers[0].Name).Image)
}

func TestWarmUnavailableFailsAsBefore(t *testing.T) {
	w := newWorld(t)
	w.fake.Fail(fakeruntime.VerbImageID, "", runtime.ErrUnavailable)
	w.fake.Fail(fakeruntime.VerbRun, "", runtime.ErrUnavailable)
	_, err := w.provisioner(w.warmOptions()).Provision(t.Context(), "u1", []string{"postgres"})
	require.Error(t, err)
	assert.ErrorIs(t, err, runtime.ErrUnavailable)
}

func TestParseWarm(t *testing.T) {
	for in, want := range map[string]provision.Warm{"": provision.WarmAuto, "auto": provision.WarmAuto, "OFF": provision.WarmOff} {
		got, err := provision.ParseWarm(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := provision.ParseWarm("on")
	assert.ErrorIs(t, err, provision.ErrInvalid)
	assert.ErrorIs(t, provision.Options{Warm: "sometimes"}.Validate(), provision.ErrInvalid)
}

// TestWhichWarmFailuresFallBackCold: a warm start is retried cold unless
// the failure is not the template's to blame: the caller gave up, the
// runtime is not there, the name is taken, or the runtime published the
// port beyond loopback (a cold start would be published the same way).
func TestWhichWarmFailuresFallBackCold(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{name: "the warm sandbox exited", ctx: live, err: errors.New("sandbox is exited (exit code 1)"), want: true},
		{name: "the caller gave up", ctx: gone, err: context.Canceled},
		{name: "runtime unavailable", ctx: live, err: fmt.Errorf("run: %w", runtime.ErrUnavailable)},
		{name: "name taken", ctx: live, err: fmt.Errorf("run: %w", provision.ErrConflict)},
		{name: "published beyond loopback", ctx: live, err: fmt.Errorf("publish: %w", runtime.ErrExposed)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, provision.CanFallBack(tt.ctx, tt.err))
		})
	}
}

// noImageStore makes the world's provisioners see a runtime without an
// image store (no runtime.ImageStore, as a cluster's, whose kubelet pulls
// at Run): the fake behind a view of the port alone. Run still needs the
// image to be there, as a kubelet needs it pullable.
func (w *world) noImageStore() { w.storeless = true }

// storeless is a runtime with the port's verbs only: no runtime.ImageStore
// (and no Unwrap, which would lead runtime.As to the fake's store).
type storeless struct{ runtime.ContainerRuntime }

func TestNoImageStorePullsAtRunAndStartsCold(t *testing.T) {
	w := newWorld(t)
	w.noImageStore()
	p := w.provisioner(w.warmOptions())
	for _, owner := range []string{"k1", "k2"} {
		_, err := p.Provision(t.Context(), owner, []string{"postgres", "redis"})
		require.NoError(t, err, "provision %s: the runtime pulls at Run", owner)
	}
	assert.Empty(t, w.events(provision.EventPullStart), "nothing to pull before Run")
	assert.Empty(t, w.events(provision.EventWarmFallback), "warm start is off, not failing each time")
	assert.Empty(t, w.events(provision.EventTemplateBuilt))
	for _, ev := range w.events(provision.EventReady) {
		assert.Empty(t, ev.Template, "%s started cold", ev.Container)
	}
	assert.Zero(t, w.fake.Calls(fakeruntime.VerbImageExists), "asked by type, never by failing")
	assert.Zero(t, w.fake.Calls(fakeruntime.VerbImageID), "warm start is off from then on")
	assert.Zero(t, w.fake.Calls(fakeruntime.VerbLoadImage))
}

// TestNoImageStoreRunIncludesThePull: where Run pulls, its deadline
// includes the pull timeout (not only the time a start takes), and a Run
// that runs out of time says it was the pull.
func TestNoImageStoreRunIncludesThePull(t *testing.T) {
	const pullTimeout = 20 * time.Minute
	t.Run("deadline", func(t *testing.T) {
		w := newWorld(t)
		w.noImageStore()
		var left record[time.Duration]
		w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
			if c.Verb == fakeruntime.VerbRun {
				d, ok := ctx.Deadline()
				require.True(t, ok, "Run has a deadline")
				left.add(time.Until(d))
			}
			return nil
		})
		o := w.options()
		o.PullTimeout = pullTimeout
		_, err := w.provisioner(o).Provision(ctxT(t), "kp", []string{"redis"})
		require.NoError(t, err)
		require.Len(t, left.get(), 1)
		assert.Greater(t, left.get()[0], pullTimeout, "Run's deadline holds the pull timeout")
	})
	t.Run("error", func(t *testing.T) {
		w := newWorld(t)
		w.noImageStore()
		w.fake.Fail(fakeruntime.VerbRun, "", fmt.Errorf("not running within 5m0s (last: ContainerCreating): %w", context.DeadlineExceeded))
		o := w.options()
		o.PullTimeout = pullTimeout
		_, err := w.provisioner(o).Provision(ctxT(t), "kq", []string{"redis"})
		var pe *provision.Error
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "pull", pe.Stage)
		assert.ErrorContains(t, err, "pull timed out")
		assert.ErrorContains(t, err, "pull timeout 20m0s")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestNoImageStoreRunOfAMissingImageIsImageNotFound(t *testing.T) {
	w := newWorld(t)
	w.noImageStore()
	o := w.options()
	o.Images = map[string]string{"redis": "registry.invalid/absent:1"}
	_, err := w.provisioner(o).Provision(t.Context(), "k3", []string{"redis"})
	require.Error(t, err)
	assert.ErrorIs(t, err, runtime.ErrImageNotFound, "Run, which pulls, says the image cannot be had")
	assert.Empty(t, w.fake.Containers(), "nothing is left")
}

// holdBuild holds every template build at its save of the base image (its
// template container running) until the returned release is called; the
// channel is closed once a build container exists and is held.
func (w *world) holdBuild() (held <-chan struct{}, release func()) {
	h, r := make(chan struct{}), make(chan struct{})
	var once, done sync.Once
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb != fakeruntime.VerbSaveImage {
			return nil
		}
		once.Do(func() { close(h) })
		select {
		case <-r:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	return h, func() { done.Do(func() { close(r) }) }
}

// buildContainer is the template build's container, in flight.
func (w *world) buildContainer() runtime.Container {
	w.t.Helper()
	for _, c := range w.fake.Containers() {
		if strings.Contains(c.Name, "-warm-") {
			return c
		}
	}
	require.FailNow(w.t, "no template build container")
	return runtime.Container{}
}

// TestWarmBuildBelongsToNoCallAndNoOwner: a template build in flight is
// nobody's to remove but its own: the rollback of the provision that
// triggered it (a sibling failed), a teardown of that provision's owner,
// and a janitor sweep past the grace window all leave it alone, and it
// completes. Its labels say why: no owner container, no call, and the
// building process as its owner.
func TestWarmBuildBelongsToNoCallAndNoOwner(t *testing.T) {
	self, err := lifetime.CurrentProcess()
	require.NoError(t, err)
	tests := []struct {
		name string
		// trigger starts what makes the build: a provision, or what
		// `sandboxer warm` does (EnsureTemplate).
		trigger func(ctx context.Context, p *provision.Provisioner) error
		// meddle is what must leave the build alone.
		meddle func(t *testing.T, w *world, p *provision.Provisioner)
		// triggerFails: the trigger itself fails (its sibling did).
		triggerFails bool
	}{
		{
			name: "RollbackOfAFailingSibling",
			trigger: func(ctx context.Context, p *provision.Provisioner) error {
				_, err := p.Provision(ctx, "b1", []string{"postgres", "redis"})
				return err
			},
			triggerFails: true,
		},
		{
			name: "TeardownOfTheTriggeringOwner",
			trigger: func(ctx context.Context, p *provision.Provisioner) error {
				_, err := p.Provision(ctx, "b2", []string{"postgres"})
				return err
			},
			meddle: func(t *testing.T, w *world, p *provision.Provisioner) {
				removed, err := p.Teardown(ctxT(t), "b2")
				require.NoError(t, err)
				assert.Empty(t, removed, "the owner has nothing yet: the build is not its")
			},
		},
		{
			name: "SweepPastGraceDuringWarmCommand",
			trigger: func(ctx context.Context, p *provision.Provisioner) error {
				_, err := p.EnsureTemplate(ctx, "postgres")
				return err
			},
			meddle: func(t *testing.T, w *world, _ *provision.Provisioner) {
				j, err := janitor.New(w.fake, janitor.Options{NoGrace: true})
				require.NoError(t, err)
				rep, err := j.Sweep(ctxT(t))
				require.NoError(t, err)
				assert.Empty(t, rep.Removed)
				require.Len(t, rep.Kept, 1, "the build is kept: its owner, this process, lives")
				assert.Equal(t, self, rep.Kept[0].Owner.Process)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			held, release := w.holdBuild()
			defer release()
			if tt.triggerFails {
				// The sibling fails while the build is in flight.
				w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
					if c.Verb != fakeruntime.VerbRun || c.Run.Name != "roboco-sandbox-redis-b1" {
						return nil
					}
					select {
					case <-held:
						return errors.New("daemon refused the create")
					case <-ctx.Done():
						return ctx.Err()
					}
				})
			}
			p := w.provisioner(w.warmOptions())
			done := make(chan error, 1)
			go func() { done <- tt.trigger(ctxT(t), p) }()
			select {
			case <-held:
			case <-time.After(10 * time.Second):
				t.Fatal("no template build was held")
			}
			build := w.buildContainer()
			assert.NotContains(t, build.Labels, keys.Owner, "a build has no owner container")
			assert.NotContains(t, build.Labels, keys.Call, "a build belongs to no call")
			assert.Equal(t, strconv.Itoa(self.PID), build.Labels[keys.OwnerPID], "its owner is the building process")

			if tt.triggerFails {
				select {
				case err := <-done:
					require.Error(t, err, "the sibling failed: the provision rolled back")
				case <-time.After(10 * time.Second):
					t.Fatal("the provision waited for the build it had given up on")
				}
			} else {
				tt.meddle(t, w, p)
			}
			assert.Equal(t, build.ID, w.buildContainer().ID, "the build in flight is left alone")

			release()
			if !tt.triggerFails {
				require.NoError(t, <-done)
			}
			require.Eventually(t, func() bool { return len(w.templates()) == 1 }, 10*time.Second, 10*time.Millisecond, "the build completes")
			_, err := p.Provision(ctxT(t), "after", []string{"postgres"})
			require.NoError(t, err)
			ready := w.events(provision.EventReady)
			assert.Equal(t, w.templates()[0], ready[len(ready)-1].Template, "and later sandboxes start warm")
		})
	}
}
