package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

const (
	// runLabel carries the run id on everything the suite creates.
	runLabel = "sandboxer.conformance"
	// testLabel carries the subtest's name, to tell leftovers apart.
	testLabel = "sandboxer.conformance.test"
	// namePrefix starts every container and network name.
	namePrefix = "sbx-conf-"

	// subtestTimeout bounds one semantic.
	subtestTimeout = 3 * time.Minute
	// cleanupTimeout bounds one cleanup.
	cleanupTimeout = time.Minute
	// pollInterval is how often poll re-checks its condition.
	pollInterval = 100 * time.Millisecond
	// outputLimit caps how much of an exec's output a failure prints.
	outputLimit = 4096
)

// suite is the state the semantics share: the runtime under test and this
// run's id.
type suite struct {
	cfg   Config
	rt    runtime.ContainerRuntime
	runID string
	// info is what the runtime said of itself (rootless, cgroup version).
	info runtime.Info
	// forms are the guarantees the runtime gives in another form
	// (runtime.FormsOf): where one is set, the semantic asserts that form.
	forms runtime.Forms
	// images is the runtime's image store (runtime.As); nil where it has
	// none (its nodes pull at Run), and the image semantics assert that.
	images runtime.ImageStore
}

// assertUnsupported asserts that err is runtime.ErrUnsupported naming the
// runtime: the form of a guarantee the backend's Forms say it cannot give.
func (s *suite) assertUnsupported(t testing.TB, err error, what string, objects ...string) {
	t.Helper()
	require.Error(t, err, "%s on %s, whose Forms say it is unsupported", what, s.rt.Name())
	assert.ErrorIs(t, err, runtime.ErrUnsupported, what)
	assertErrorNames(t, err, s.rt.Name(), objects...)
}

// assertRefused asserts that Run of spec is runtime.ErrUnsupported and
// leaves no container under its name.
func (s *suite) assertRefused(t testing.TB, ctx context.Context, spec runtime.RunSpec, what string) {
	t.Helper()
	s.track(t, spec.Name)
	_, err := s.rt.Run(ctx, spec)
	s.assertUnsupported(t, err, what, spec.Name)
	_, err = s.rt.Inspect(ctx, spec.Name)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "a refused run leaves nothing")
}

// randomHex is testkit.RandomHex: n random bytes, hex-encoded.
func randomHex(n int) string { return testkit.RandomHex(n) }

// newName returns a container or network name that nothing else uses.
func (s *suite) newName() string {
	return namePrefix + s.runID + "-" + randomHex(4)
}

// testContext is a subtest's context: bounded by subtestTimeout and
// cancelled when the subtest ends (testkit.Context).
func testContext(t *testing.T) context.Context {
	return testkit.Context(t, subtestTimeout)
}

// labels returns the suite's labels plus extra.
func (s *suite) labels(t testing.TB, extra map[string]string) map[string]string {
	l := map[string]string{runLabel: s.runID, testLabel: t.Name()}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

// spec returns the spec of a busybox container that runs until removed.
func (s *suite) spec(t testing.TB) runtime.RunSpec {
	return runtime.RunSpec{
		Name:    s.newName(),
		Image:   s.cfg.Fixtures.Busybox,
		Command: []string{"sleep", "3600"},
		Labels:  s.labels(t, nil),
	}
}

// track removes the named container when the test ends, even when it
// fails half-way. Register it before the container is created.
func (s *suite) track(t testing.TB, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := s.rt.Remove(ctx, name); err != nil {
			t.Errorf("cleanup: remove container %s: %v", name, err)
		}
	})
}

// run tracks and runs spec, failing the test if Run fails.
func (s *suite) run(t testing.TB, ctx context.Context, spec runtime.RunSpec) runtime.Container {
	t.Helper()
	s.track(t, spec.Name)
	c, err := s.rt.Run(ctx, spec)
	require.NoError(t, err, "run %s", spec.Name)
	return c
}

// create tracks and creates (without starting) spec.
func (s *suite) create(t testing.TB, ctx context.Context, spec runtime.RunSpec) runtime.Container {
	t.Helper()
	s.track(t, spec.Name)
	c, err := s.rt.Create(ctx, spec)
	require.NoError(t, err, "create %s", spec.Name)
	return c
}

// network creates a bridge network that is removed when the test ends
// (after the containers on it, since cleanups run last-in first-out).
func (s *suite) network(t testing.TB, ctx context.Context) string {
	t.Helper()
	name := s.newName()
	s.trackNetwork(t, name)
	n, err := s.rt.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: s.labels(t, nil)})
	require.NoError(t, err, "create network %s", name)
	assert.Equal(t, name, n.Name, "created network's name")
	assert.NotEmpty(t, n.ID, "created network's id")
	return name
}

// trackNetwork removes the named network when the test ends.
func (s *suite) trackNetwork(t testing.TB, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := s.rt.RemoveNetwork(ctx, name); err != nil {
			t.Errorf("cleanup: remove network %s: %v", name, err)
		}
	})
}

// exec runs spec in container and fails the test, showing its output,
// unless it exits with wantCode.
func (s *suite) exec(t testing.TB, ctx context.Context, container string, spec runtime.ExecSpec, wantCode int) runtime.ExecResult {
	t.Helper()
	res, err := s.rt.Exec(ctx, container, spec)
	require.NoError(t, err, "exec %q in %s", spec.Cmd, container)
	if res.ExitCode != wantCode {
		t.Fatalf("exec %q in %s: exit code %d, want %d\nstdout: %s\nstderr: %s",
			spec.Cmd, container, res.ExitCode, wantCode, clip(res.Stdout), clip(res.Stderr))
	}
	return res
}

// sh runs a shell script in container, requires it to succeed and returns
// its stdout.
func (s *suite) sh(t testing.TB, ctx context.Context, container, script string) string {
	t.Helper()
	return string(s.exec(t, ctx, container, runtime.ExecSpec{Cmd: []string{"sh", "-c", script}}, 0).Stdout)
}

// readFile returns a file's content inside the container.
func (s *suite) readFile(t testing.TB, ctx context.Context, container, path string) string {
	t.Helper()
	return string(s.exec(t, ctx, container, runtime.ExecSpec{Cmd: []string{"cat", path}}, 0).Stdout)
}

// fileExists reports whether path exists inside the container.
func (s *suite) fileExists(t testing.TB, ctx context.Context, container, path string) bool {
	t.Helper()
	res, err := s.rt.Exec(ctx, container, runtime.ExecSpec{Cmd: []string{"test", "-e", path}})
	require.NoError(t, err, "exec test -e %s in %s", path, container)
	return res.ExitCode == 0
}

// waitState polls until the container reaches want.
func (s *suite) waitState(t testing.TB, ctx context.Context, name string, want runtime.State) runtime.Container {
	t.Helper()
	var c runtime.Container
	poll(t, fmt.Sprintf("container %s %s", name, want), 30*time.Second, func() error {
		var err error
		c, err = s.rt.Inspect(ctx, name)
		if err != nil {
			return err
		}
		if c.State != want {
			return fmt.Errorf("state is %s", c.State)
		}
		return nil
	})
	return c
}

// poll calls cond every pollInterval until it returns nil, failing the
// test with what and cond's last error when timeout passes first
// (testkit.Poll). It is the suite's only way to wait.
func poll(t testing.TB, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	testkit.Poll(t, timeout, pollInterval, cond, what)
}

// assertErrorNames asserts that err is a *runtime.Error whose message names
// the runtime and the object (any one of objects: a failed run may name the
// container or the image), as every adapter error must.
func assertErrorNames(t testing.TB, err error, rt string, objects ...string) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	assert.Contains(t, msg, rt, "the error must name the runtime")
	named := slices.ContainsFunc(objects, func(o string) bool { return strings.Contains(msg, o) })
	assert.True(t, named, "the error %q must name one of %q", msg, objects)
	var re *runtime.Error
	if assert.ErrorAs(t, err, &re, "adapters return *runtime.Error") {
		assert.Equal(t, rt, re.Runtime, "runtime.Error.Runtime")
		assert.NotEmpty(t, re.Op, "runtime.Error.Op names the verb")
	}
}

// assertLabels asserts that every label of want is in got with exactly the
// same value (the backend may add its own, e.g. the image's labels).
func assertLabels(t testing.TB, want, got map[string]string, what string) {
	t.Helper()
	for k, v := range want {
		g, ok := got[k]
		if assert.True(t, ok, "%s: label %q missing", what, k) {
			assert.Equal(t, v, g, "%s: label %q", what, k)
		}
	}
}

// containerNames returns the sorted names of cs (testkit.Names).
func containerNames(cs []runtime.Container) []string { return testkit.Names(cs) }

// clip shortens output for failure messages.
func clip(b []byte) string {
	s := string(b)
	if len(s) > outputLimit {
		return s[:outputLimit] + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return strings.TrimRight(s, "\n")
}
