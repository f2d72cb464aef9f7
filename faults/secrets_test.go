package faults

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/redis"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
)

// secretLike matches a token shaped like a generated password: exactly 32
// lower-case hex characters (container IDs have 64, call ids 16, image
// tags 12). A leak of a password this test does not know still shows.
var secretLike = regexp.MustCompile(`(^|[^0-9a-f])([0-9a-f]{32})([^0-9a-f]|$)`)

// assertNoSecret fails when text holds any of pws or anything shaped like
// a password.
func assertNoSecret(t *testing.T, what, text string, pws []string) {
	t.Helper()
	for _, pw := range pws {
		assert.NotContains(t, text, pw, "%s holds a password", what)
	}
	if m := secretLike.FindStringSubmatch(text); m != nil {
		assert.Failf(t, "password-shaped token", "%s holds %q:\n%s", what, m[2], text)
	}
}

// leakyRedis is redis whose probe prints the password it was handed and
// fails: the worst a probe can do. Its deadline is short.
type leakyRedis struct{ redis.Engine }

func (leakyRedis) Spec() engines.Spec {
	s := redis.Engine{}.Spec()
	s.ReadyTimeout = 2 * time.Second
	return s
}

func (leakyRedis) Probe(ep engines.Endpoint, cred engines.Credentials) []engines.ProbeStep {
	steps := redis.Engine{}.Probe(ep, cred)
	for i := range steps {
		steps[i].Cmd = []string{"sh", "-c", `echo "auth is $REDISCLI_AUTH"; echo "NOAUTH $REDISCLI_AUTH" >&2; exit 1`}
		steps[i].Check = engines.ExitZero
	}
	return steps
}

// TestNoPasswordInDebugLogs drives the provisioner with every log at debug
// level (the provisioner's, the adapter's, every lifecycle event) through
// a provision, a teardown and a failing provision whose probe prints the
// password: no password reaches any of them, nor the error.
func TestNoPasswordInDebugLogs(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := testruntimes.NewWorld(t, b)
		ctx := testkit.Context(t, 5*time.Minute)
		e.Warm()
		events := &testkit.SyncBuffer{}
		onEvent := func(ev provision.Event) { fmt.Fprintf(events, "%+v\n", ev) }

		p := e.Provisioner(func(o *provision.Options) { o.Logger, o.OnEvent = logger, onEvent })
		sb, err := p.Provision(ctx, "debug", allEngines)
		require.NoError(t, err)
		var pws []string
		for _, v := range sb.Env {
			if strings.HasSuffix(v.Name, "_PASSWORD") {
				pws = append(pws, v.Value)
			}
		}
		require.Len(t, pws, len(allEngines), "one password per service")
		assertNoSecret(t, "String() of the sandbox", sb.String(), pws)
		assertNoSecret(t, "%v of the sandbox", fmt.Sprintf("%v %+v", sb, sb), pws)
		_, err = p.Teardown(ctx, "debug")
		require.NoError(t, err)

		rec := &testruntimes.Recorder{ContainerRuntime: b.RT}
		leaky, err := provision.New(rec, provision.Options{
			Registry:    registryWith(leakyRedis{}),
			LabelPrefix: e.Prefix, Images: e.Images, Getenv: func(string) string { return "" },
			Logger: logger, OnEvent: onEvent,
			Readiness: provision.ReadinessExec, // the leak under test is the exec probe's output
		})
		require.NoError(t, err)
		_, err = leaky.Provision(ctx, "leaky", allEngines)
		require.Error(t, err)
		var pe *provision.Error
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "redis", pe.Service)
		assert.Contains(t, pe.ProbeOutput, "auth is [REDACTED]", "the probe's output held the password, redacted")
		failed := rec.Passwords()
		require.Len(t, failed, len(allEngines))
		pws = append(pws, failed...)

		assertNoSecret(t, "the error", err.Error(), pws)
		assertNoSecret(t, "the probe output", pe.ProbeOutput, pws)
		assertNoSecret(t, "the events", events.String(), pws)
		assertNoSecret(t, "the debug logs", logs.String(), pws)
		assert.Contains(t, logs.String(), "sandbox failed", "the logs cover the failure")
		t.Logf("%d lines of debug logs, %d events checked", strings.Count(logs.String(), "\n"), strings.Count(events.String(), "\n"))
	}, testruntimes.WithLogger(logger))
}

// TestCLINoPasswordAtDebugLevel runs the CLI with -v (debug logs on
// stderr) through up, ls, gc, down, run and a failing up: the passwords
// appear only in the env output that was asked for, on stdout, in
// *_PASSWORD and *_URL lines, and nowhere else.
func TestCLINoPasswordAtDebugLevel(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := testruntimes.NewWorld(t, b)
		ctx := testkit.Context(t, 5*time.Minute)
		e.Warm()
		bin := cli(t)
		require.NotEmpty(t, bin)
		var env []string
		for name, ref := range e.Images {
			env = append(env, provision.ImageEnvName(name)+"="+ref)
		}
		global := append(slices.Clone(b.CLIFlags), "--label-prefix", e.Prefix, "-v")
		run := func(args ...string) cliResult {
			t.Helper()
			res := runCLI(ctx, t, env, append(append([]string{}, global...), args...)...)
			t.Logf("sandboxer %s: exit %d in %s, %d bytes of stderr", strings.Join(args, " "), res.code, res.elapsed.Round(time.Millisecond), len(res.stderr))
			return res
		}
		dir := t.TempDir()

		up := run("up", "--owner", "cli1", "--services", strings.Join(allEngines, ","))
		require.Equal(t, 0, up.code, "stderr: %s", up.stderr)
		require.Contains(t, up.stderr, "level=DEBUG", "debug logs are on")
		var pws []string
		sc := bufio.NewScanner(strings.NewReader(up.stdout))
		var envLines []string
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), "=")
			if ok && strings.HasSuffix(k, "_PASSWORD") {
				pws = append(pws, v)
			}
			envLines = append(envLines, sc.Text())
		}
		require.Len(t, pws, len(allEngines), "the dotenv output has one password per service:\n%s", up.stdout)
		for _, l := range envLines {
			k, _, _ := strings.Cut(l, "=")
			if !strings.HasSuffix(k, "_PASSWORD") && !strings.HasSuffix(k, "_URL") {
				assertNoSecret(t, "stdout line "+k, l, pws)
			}
		}
		assertNoSecret(t, "up's stderr", up.stderr, pws)

		envFile := filepath.Join(dir, "cli2.env")
		up2 := run("up", "--owner", "cli2", "--services", "redis", "--env-file", envFile)
		require.Equal(t, 0, up2.code, "stderr: %s", up2.stderr)
		written, err := os.ReadFile(envFile)
		require.NoError(t, err)
		for _, l := range strings.Split(string(written), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok && strings.HasSuffix(k, "_PASSWORD") {
				pws = append(pws, v)
			}
		}
		require.Len(t, pws, len(allEngines)+1, "the env file holds redis's password")
		assertNoSecret(t, "up --env-file's stdout", up2.stdout, pws)
		assertNoSecret(t, "up --env-file's stderr", up2.stderr, pws)

		leaked := filepath.Join(dir, "run.pw")
		runRes := run("run", "--services", "redis", "--", "sh", "-c", "printenv ROBOCO_TEST_REDIS_PASSWORD > "+leaked)
		require.Equal(t, 0, runRes.code, "stderr: %s", runRes.stderr)
		pw, err := os.ReadFile(leaked)
		require.NoError(t, err)
		require.Len(t, strings.TrimSpace(string(pw)), 2*engines.PasswordBytes, "CMD saw the password")
		pws = append(pws, strings.TrimSpace(string(pw)))
		assertNoSecret(t, "run's stdout", runRes.stdout, pws)
		assertNoSecret(t, "run's stderr", runRes.stderr, pws)

		// Cold (--warm off): a warm postgres may be ready within 200 ms.
		failing := run("--warm", "off", "up", "--owner", "cli3", "--services", "postgres", "--ready-timeout", "200ms")
		assert.Equal(t, 4, failing.code, "provisioning failed: stderr: %s", failing.stderr)
		assertNoSecret(t, "a failed up's stdout", failing.stdout, pws)
		assertNoSecret(t, "a failed up's stderr", failing.stderr, pws)

		for _, args := range [][]string{
			{"ls"},
			{"ls", "-o", "json"},
			{"gc", "--dry-run"},
			{"down", "--owner", "cli1"},
			{"down", "--owner", "cli2"},
			{"down", "--owner", "cli3"},
		} {
			res := run(args...)
			assert.Equal(t, 0, res.code, "sandboxer %v: stderr: %s", args, res.stderr)
			assertNoSecret(t, fmt.Sprintf("%v's stdout", args), res.stdout, pws)
			assertNoSecret(t, fmt.Sprintf("%v's stderr", args), res.stderr, pws)
		}
		assert.Empty(t, e.SandboxNames(ctx), "down removed every sandbox")
	})
}

// TestPasswordOnlyInTheEnv provisions every engine and looks at each
// sandbox the way a local user or an operator would, from outside the
// adapter: the runtime's own record of the container (docker inspect,
// podman inspect, containerd's stored container with its OCI spec and
// extensions, base64 decoded) holds the sandbox's password in the
// environment only, never in the command (Cmd, Args, the spec's process
// args), the labels or anywhere else; and no process of the container
// shows it in /proc/<pid>/cmdline.
func TestPasswordOnlyInTheEnv(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, r testruntimes.Runtime) {
		e := testruntimes.NewWorld(t, r)
		ctx := testkit.Context(t, 5*time.Minute)
		sb, err := e.Provisioner(nil).Provision(ctx, e.Owner("argv"), allEngines)
		require.NoError(t, err)
		for _, c := range sb.Containers {
			t.Run(c.Engine, func(t *testing.T) {
				var pw string
				for _, v := range sb.Env {
					if strings.HasSuffix(v.Name, "_PASSWORD") && strings.Contains(v.Name, envInfix(c.Engine)) {
						pw = v.Value
					}
				}
				require.NotEmpty(t, pw, "the sandbox emits %s's password", c.Engine)

				var doc any
				require.NoError(t, json.Unmarshal(r.OwnInspect(t, ctx, c.Name), &doc))
				var inEnv int
				for _, at := range holding(doc, "", pw) {
					if envPath.MatchString(at) {
						inEnv++
						continue
					}
					assert.Fail(t, "password outside the env", "%s's own record holds the password at %s", r.Name, at)
				}
				assert.Equal(t, 1, inEnv, "the password is in the container's env, once")

				pids := r.OwnPIDs(t, ctx, c.Name)
				require.NotEmpty(t, pids, "the container has processes")
				for _, pid := range pids {
					cmdline, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
					if os.IsNotExist(err) {
						continue // it ended meanwhile
					}
					require.NoError(t, err)
					assert.NotContains(t, string(cmdline), pw, "/proc/%s/cmdline (%q) holds the password", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
				}
			})
		}
	})
}

// envPath matches where a runtime's record keeps a container's env:
// Config.Env of docker and podman inspect, Spec.process.env of a
// containerd container.
var envPath = regexp.MustCompile(`^(\[0\]\.Config\.Env|\.Spec\.process\.env)\[\d+\]$`)

// envInfix is the part of an engine's env names that tells them apart
// ("_DB_" for postgres), from the env it emits.
func envInfix(engine string) string {
	name := engines.Default.URLName(engine, provision.DefaultEnvPrefix)
	return strings.TrimSuffix(strings.TrimPrefix(name, provision.DefaultEnvPrefix), "URL")
}

// holding lists the paths in doc (decoded JSON) whose string holds s,
// looking inside base64-encoded strings too (containerd's extensions).
func holding(doc any, at, s string) []string {
	var out []string
	switch v := doc.(type) {
	case map[string]any:
		for k, x := range v {
			out = append(out, holding(x, at+"."+k, s)...)
		}
	case []any:
		for i, x := range v {
			out = append(out, holding(x, fmt.Sprintf("%s[%d]", at, i), s)...)
		}
	case string:
		if strings.Contains(v, s) {
			out = append(out, at)
		} else if b, err := base64.StdEncoding.DecodeString(v); err == nil && strings.Contains(string(b), s) {
			out = append(out, at+" (base64)")
		}
	}
	return out
}
