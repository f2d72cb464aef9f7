package standins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
)

// Helpers shared by every stand-in's tests (mongo_test.go included):
//
//	requireDocker(t)                      docker CLI + daemon, or testenv.Unavailable
//	standinImage(t, name) string          ref from build/images.env, present locally (pulled)
//	runContainer(t, ref, runOpts) *container   docker run -d, labelled, removed in t.Cleanup
//	(*container).hostAddr(t, "5432/tcp")  "127.0.0.1:PORT" the port is published on
//	(*container).ip(t)                    the container's address on its network
//	(*container).exec(ctx, env, argv...)  docker exec: stdout, stderr, exit code
//	(*container).waitExec(t, d, argv...)  poll an exec until it exits 0 (readiness)
//	(*container).uid(t)                   real uid of the container's PID 1
//	(*container).logs(ctx)                its log, stdout and stderr in order
//	(*container).waitExited(t, d) int     wait until it stops; its exit code
//	inspectImage(t, ref) imageInspect     the image's config as Docker reports it
//
// and internal/testkit's vocabulary: testkit.Poll (no sleeps),
// testkit.RandomHex (passwords), testkit.Context.

// testLabel marks every container these tests create; cleanup removes
// exactly those it created, by id.
const testLabel = "sandboxer.test=standins"

// pollInterval is how often a wait re-checks the container.
const pollInterval = 200 * time.Millisecond

// requireDocker ends the test (skip, or fail under SANDBOXER_REQUIRE=docker)
// when the docker CLI or daemon is not there.
func requireDocker(t testing.TB) {
	t.Helper()
	testkit.RequireRuntime(t)
	testenv.Load() // DOCKER_HOST from build/images.env reaches the CLI through the environment
	if _, err := exec.LookPath("docker"); err != nil {
		testenv.Unavailable(t, "docker", "docker CLI not on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		testenv.Unavailable(t, "docker", "daemon not answering: %v: %s", err, bytes.TrimSpace(out))
	}
}

// docker runs the docker CLI and returns its trimmed stdout; the error
// carries stderr.
func docker(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(redactArgs(args), " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// redactArgs masks the value of every VAR=value argument whose name says it
// is a secret, so that a failed `docker run --env ...PASSWORD=...` never puts
// a password into test output.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if k, _, ok := strings.Cut(a, "="); ok && (strings.Contains(strings.ToUpper(k), "PASSWORD") || strings.Contains(strings.ToUpper(k), "SECRET")) {
			a = k + "=****"
		}
		out[i] = a
	}
	return out
}

// standinImage returns the ref of stand-in name (SANDBOXER_IMAGE_<NAME>)
// after making sure Docker has it, pulling it from the loopback registry
// when absent.
func standinImage(t testing.TB, name string) string {
	t.Helper()
	requireDocker(t)
	ref := testenv.Image(t, "docker", name)
	ctx := testkit.Context(t, 5*time.Minute)
	if _, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", ref); err == nil {
		return ref
	}
	if _, err := docker(ctx, "pull", "--quiet", ref); err != nil {
		testenv.Unavailable(t, "docker", "image %s cannot be pulled (run `make images`): %v", ref, err)
	}
	return ref
}

// runOpts is what a stand-in test needs from `docker run`.
type runOpts struct {
	Env     []string // KEY=VALUE
	Publish []string // container ports ("5432/tcp"), published on 127.0.0.1, ephemeral host port
	Tmpfs   []string // container paths mounted as tmpfs
	Cmd     []string // the container command (after the image), empty for the image's default
	CapDrop []string // capabilities dropped (--cap-drop)
}

// container is a running stand-in started by runContainer.
type container struct {
	ID  string
	ref string
}

// runContainer starts ref detached with opts, labelled sandboxer.test=standins
// and with the test's name, and removes it (with its anonymous volumes) when
// the test ends; a failed test first gets the container's last log lines.
func runContainer(t testing.TB, ref string, opts runOpts) *container {
	t.Helper()
	args := []string{"run", "--detach", "--label", testLabel, "--label", "sandboxer.test.name=" + t.Name()}
	for _, e := range opts.Env {
		args = append(args, "--env", e)
	}
	for _, p := range opts.Publish {
		args = append(args, "--publish", "127.0.0.1::"+p)
	}
	for _, m := range opts.Tmpfs {
		args = append(args, "--tmpfs", m)
	}
	for _, c := range opts.CapDrop {
		args = append(args, "--cap-drop", c)
	}
	args = append(args, ref)
	args = append(args, opts.Cmd...)
	id, err := docker(testkit.Context(t, 2*time.Minute), args...)
	require.NoError(t, err, "start %s", ref)
	c := &container{ID: id, ref: ref}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if t.Failed() {
			if logs, err := docker(ctx, "logs", "--tail", "40", id); err == nil {
				t.Logf("last log lines of %s (%s):\n%s", id[:12], ref, logs)
			}
		}
		if _, err := docker(ctx, "rm", "--force", "--volumes", id); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return c
}

// hostAddr returns the 127.0.0.1:PORT that the container port (e.g.
// "5432/tcp") is published on.
func (c *container) hostAddr(t testing.TB, port string) string {
	t.Helper()
	out, err := docker(testkit.Context(t, 30*time.Second), "port", c.ID, port)
	require.NoError(t, err)
	for _, line := range strings.Split(out, "\n") {
		host, p, err := net.SplitHostPort(strings.TrimSpace(line))
		if err == nil && host == "127.0.0.1" {
			return net.JoinHostPort(host, p)
		}
	}
	require.FailNow(t, "port not published on 127.0.0.1", "docker port %s %s: %q", c.ID[:12], port, out)
	return ""
}

// ip returns the container's address on its (first) network.
func (c *container) ip(t testing.TB) string {
	t.Helper()
	out, err := docker(testkit.Context(t, 30*time.Second), "inspect", "--format",
		"{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", c.ID)
	require.NoError(t, err)
	fields := strings.Fields(out)
	require.NotEmpty(t, fields, "container %s has no network address", c.ID[:12])
	return fields[0]
}

// execResult is the outcome of one exec.
type execResult struct {
	Stdout, Stderr string
	ExitCode       int
}

// exec runs argv in the container with extra env (KEY=VALUE); a non-zero
// exit is reported in ExitCode, not as an error.
func (c *container) exec(ctx context.Context, env []string, argv ...string) (execResult, error) {
	args := []string{"exec"}
	for _, e := range env {
		args = append(args, "--env", e)
	}
	args = append(append(args, c.ID), argv...)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := execResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	default:
		return res, fmt.Errorf("docker exec %s %v: %w", c.ID[:12], argv, err)
	}
	return res, nil
}

// waitExec polls argv in the container until it exits 0, for at most d.
// This is how a readiness probe runs: inside the container, so no network
// path from the test is needed.
func (c *container) waitExec(t testing.TB, d time.Duration, env []string, argv ...string) execResult {
	t.Helper()
	ctx := testkit.Context(t, d+10*time.Second)
	var last execResult
	what := fmt.Sprintf("%v exits 0 in %s", argv, c.ref)
	testkit.Poll(t, d, pollInterval, func() error {
		require.NoError(t, c.exited(ctx), "gave up waiting: %s", what)
		res, err := c.exec(ctx, env, argv...)
		if err != nil {
			return err
		}
		last = res
		if res.ExitCode != 0 {
			return fmt.Errorf("exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
		}
		return nil
	}, what)
	return last
}

// exited returns an error when the container is no longer running.
func (c *container) exited(ctx context.Context) error {
	out, err := docker(ctx, "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", c.ID)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(out, "running") {
		return fmt.Errorf("container %s is not running: %s", c.ID[:12], out)
	}
	return nil
}

// logs returns the container's log, stdout and stderr interleaved as the
// daemon recorded them.
func (c *container) logs(ctx context.Context) (string, error) {
	var b bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", "logs", c.ID)
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker logs %s: %w", c.ID[:12], err)
	}
	return b.String(), nil
}

// waitExited waits up to d for the container to stop and returns its exit
// code.
func (c *container) waitExited(t testing.TB, d time.Duration) int {
	t.Helper()
	ctx := testkit.Context(t, d+10*time.Second)
	var code int
	testkit.Poll(t, d, pollInterval, func() error {
		out, err := docker(ctx, "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", c.ID)
		if err != nil {
			return err
		}
		status, exit, _ := strings.Cut(out, " ")
		if status != "exited" && status != "dead" {
			return fmt.Errorf("status %s", status)
		}
		_, err = fmt.Sscan(exit, &code)
		return err
	}, "container %s exits", c.ID[:12])
	return code
}

// uid returns the real uid of the container's PID 1 (from /proc/1/status).
func (c *container) uid(t testing.TB) string {
	t.Helper()
	res, err := c.exec(testkit.Context(t, 30*time.Second), nil, "cat", "/proc/1/status")
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, res.Stderr)
	for _, line := range strings.Split(res.Stdout, "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	require.FailNow(t, "no Uid line in /proc/1/status", res.Stdout)
	return ""
}

// imageInspect is the part of `docker image inspect` the tests check.
type imageInspect struct {
	Os           string
	Architecture string
	Config       struct {
		Env          []string
		Entrypoint   []string
		Cmd          []string
		ExposedPorts map[string]struct{}
		Volumes      map[string]struct{}
		StopSignal   string
		User         string
		WorkingDir   string
	}
}

// inspectImage returns ref's config as the daemon reports it.
func inspectImage(t testing.TB, ref string) imageInspect {
	t.Helper()
	out, err := docker(testkit.Context(t, 30*time.Second), "image", "inspect", "--format", "{{json .}}", ref)
	require.NoError(t, err)
	var img imageInspect
	require.NoError(t, json.Unmarshal([]byte(out), &img))
	return img
}
