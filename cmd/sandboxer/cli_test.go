package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
	"github.com/roboco/sandboxer/runtime/docker"
	"github.com/roboco/sandboxer/runtime/podman"
)

// binary is the sandboxer built once by TestMain for the subprocess tests
// ("" under -short, which runs the in-process unit tests only), and
// demoClient the quick-start demo's client next to it.
var binary, demoClient string

func TestMain(m *testing.M) {
	flag.Parse()
	testenv.Load()
	// The binaries these tests run are pinged by runtimes that share two
	// cores with the rest of the suite: a slow first answer is load, not
	// a runtime that is gone (the tests of hung runtimes use listeners
	// that never answer, which any ping timeout gives up on).
	if os.Getenv(envPingTimeout) == "" {
		os.Setenv(envPingTimeout, "15s")
	}
	if !testing.Short() {
		dir, err := os.MkdirTemp("", "sandboxer-cli-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		binary = filepath.Join(dir, "sandboxer")
		demoClient = filepath.Join(dir, "democlient")
		for out, pkg := range map[string]string{binary: ".", demoClient: "./democlient"} {
			build := exec.Command(goTool(), "build", "-o", out, pkg)
			build.Stdout, build.Stderr = os.Stderr, os.Stderr
			if err := build.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "build", pkg+":", err)
				os.RemoveAll(dir)
				os.Exit(1)
			}
		}
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func goTool() string {
	if p := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" {
		return p
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

// cli runs the built binary against one runtime (Docker unless the test
// says otherwise) under a label prefix of its own, and removes whatever
// that prefix left on that runtime when the test ends.
type cli struct {
	t      *testing.T
	own    testruntimes.Runtime // the runtime, for its own CLI
	rt     runtime.ContainerRuntime
	flags  []string // the global flags that reach the runtime (testruntimes.Runtime.CLIFlags)
	prefix string
	env    []string // added to the process environment
	// user, when set, runs the binary as that unprivileged user, in its
	// own environment instead of the test's (rootless_test.go).
	user *rootlessUser
}

type result struct {
	code           int
	stdout, stderr string
}

// newCLI is newCLIOn Docker.
func newCLI(t *testing.T, services ...string) *cli {
	t.Helper()
	return newCLIOn(t, docker.Name, services...)
}

// newCLIOn skips (or fails, under SANDBOXER_REQUIRE) unless the runtime
// called name answers and the stand-in images of services are
// configured; it pulls those images into the runtime when absent (tests
// run some of them directly, and Run never pulls).
func newCLIOn(t *testing.T, name string, services ...string) *cli {
	t.Helper()
	testkit.RequireRuntime(t)
	require.NotEmpty(t, binary, "TestMain builds the binary outside -short")
	r := testruntimes.Connect(t, name)
	for _, s := range services {
		testkit.Image(t, r.RT, s)
	}
	c := &cli{t: t, own: r, rt: r.RT, flags: r.CLIFlags, prefix: "h9t" + testkit.RandomHex(4)}
	t.Cleanup(c.removeAll)
	return c
}

// args prepends the global flags that pin the runtime and the prefix.
func (c *cli) args(args ...string) []string {
	return append(append(slices.Clone(c.flags), "--label-prefix", c.prefix), args...)
}

// auto runs sandboxer under the test's prefix, with env added, and the
// runtime left to auto-detection (SANDBOXER_RUNTIME empty).
func (c *cli) auto(env []string, args ...string) result {
	c.t.Helper()
	env = append([]string{detect.EnvRuntime + "="}, env...)
	return c.runWith(env, append([]string{"--label-prefix", c.prefix}, args...)...)
}

func (c *cli) command(ctx context.Context, args ...string) *exec.Cmd {
	if c.user != nil {
		return c.user.command(ctx, c.env, append([]string{c.user.binary}, args...)...)
	}
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// run runs sandboxer with args as given (no global flags added).
func (c *cli) run(args ...string) result {
	c.t.Helper()
	return c.runWith(nil, args...)
}

// runWith is run with env added to the test's.
func (c *cli) runWith(env []string, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := c.command(ctx, args...)
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		var xe *exec.ExitError
		require.ErrorAs(c.t, err, &xe, "sandboxer did not run: %s", errb.String())
		r.code = xe.ExitCode()
	}
	return r
}

// enforcing is c without the limits opt-out (--unenforced-limits) that
// the rootless row's flags carry.
func (c *cli) enforcing() *cli {
	d := *c
	d.flags = slices.DeleteFunc(slices.Clone(c.flags), func(f string) bool { return f == "--unenforced-limits" })
	return &d
}

// sbx runs sandboxer with the test's global flags.
func (c *cli) sbx(args ...string) result {
	c.t.Helper()
	return c.run(c.args(args...)...)
}

// mustSbx runs sandboxer and requires exit 0.
func (c *cli) mustSbx(args ...string) result {
	c.t.Helper()
	r := c.sbx(args...)
	require.Equal(c.t, 0, r.code, "sandboxer %v\nstderr: %s", args, r.stderr)
	return r
}

// containers lists the sandboxes under the test's prefix.
func (c *cli) containers() []runtime.Container {
	c.t.Helper()
	return c.list(labels.For(c.prefix).Sandboxes())
}

// ownedBy lists the sandboxes of owner id under the test's prefix.
func (c *cli) ownedBy(id string) []runtime.Container {
	c.t.Helper()
	return c.list(labels.For(c.prefix).OwnedBy(provision.Options{LabelPrefix: c.prefix}.OwnerName(id)))
}

func (c *cli) list(selector map[string]string) []runtime.Container {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := c.rt.List(ctx, selector)
	require.NoError(c.t, err)
	return got
}

func (c *cli) removeAll() {
	testkit.RemoveLabelled(c.t, c.rt, labels.For(c.prefix).Sandboxes(), map[string]string{c.prefix + ".test": "1"})
}

// names returns the containers' names.
func names(cs []runtime.Container) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// parseDotenv reads KEY=value lines.
func parseDotenv(t *testing.T, s string) map[string]string {
	t.Helper()
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		require.True(t, ok, "dotenv line %q", sc.Text())
		env[k] = v
	}
	return env
}

// passwords returns every *_PASSWORD value of env.
func passwords(env map[string]string) []string {
	var out []string
	for k, v := range env {
		if strings.HasSuffix(k, "_PASSWORD") {
			out = append(out, v)
		}
	}
	return out
}

// upJSON is `up -o json`'s output.
type upJSON struct {
	OwnerID    string `json:"owner_id"`
	Owner      string `json:"owner"`
	Containers []struct {
		Name     string           `json:"name"`
		ID       string           `json:"id"`
		Engine   string           `json:"engine"`
		Image    string           `json:"image"`
		Endpoint engines.Endpoint `json:"endpoint"`
	} `json:"containers"`
	Env []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
}

func TestUpLsDownRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		services []string
		args     []string
		// env reads the env the way a consumer of this format would.
		env func(t *testing.T, c *cli, r result, dir string) map[string]string
	}{
		{
			name:     "Dotenv",
			services: []string{"postgres", "redis"},
			env: func(t *testing.T, _ *cli, r result, _ string) map[string]string {
				return parseDotenv(t, r.stdout)
			},
		},
		{
			name:     "ShellEvaluatedBySh",
			services: []string{"redis"},
			args:     []string{"--format", "shell"},
			env: func(t *testing.T, _ *cli, r result, _ string) map[string]string {
				for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
					require.Regexp(t, `^export [A-Z_]+='[^']*'$`, l)
				}
				out, err := exec.Command("sh", "-c", r.stdout+"env").Output()
				require.NoError(t, err)
				env := parseDotenv(t, string(out))
				for k := range env {
					if !strings.HasPrefix(k, "ROBOCO_TEST_") {
						delete(env, k)
					}
				}
				return env
			},
		},
		{
			name:     "JSONWithContainersAndVerboseLogs",
			services: engines.Default.Names(),
			args:     []string{"--format", "json", "--verbose"},
			env: func(t *testing.T, c *cli, r result, _ string) map[string]string {
				var out upJSON
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
				assert.Equal(t, c.prefix+"-agent-"+out.OwnerID, out.Owner)
				require.Len(t, out.Containers, len(engines.Default.Names()))
				for i, engine := range engines.Default.Names() {
					ct := out.Containers[i]
					assert.Equal(t, engine, ct.Engine, "registry order")
					assert.NotEmpty(t, ct.ID)
					assert.Equal(t, "127.0.0.1", ct.Endpoint.Host)
					assert.NotZero(t, ct.Endpoint.Port)
				}
				assert.Contains(t, r.stderr, "level=DEBUG", "--verbose logs at debug level")
				env := map[string]string{}
				for _, v := range out.Env {
					env[v.Name] = v.Value
				}
				return env
			},
		},
		{
			name:     "EnvFile0600",
			services: []string{"redis"},
			args:     []string{"--env-file", "ENVFILE"},
			env: func(t *testing.T, _ *cli, r result, dir string) map[string]string {
				assert.Empty(t, r.stdout, "the env goes to the file only")
				path := filepath.Join(dir, "sandbox.env")
				fi, err := os.Stat(path)
				require.NoError(t, err)
				assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				return parseDotenv(t, string(data))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCLI(t, tt.services...)
			dir := t.TempDir()
			owner := "u" + testkit.RandomHex(3)
			args := []string{"up", "--owner", owner, "--services", strings.Join(tt.services, ",")}
			for _, a := range tt.args {
				args = append(args, strings.ReplaceAll(a, "ENVFILE", filepath.Join(dir, "sandbox.env")))
			}
			r := c.mustSbx(args...)
			env := tt.env(t, c, r, dir)

			for _, s := range tt.services {
				_, err := engines.Default.Login(testkit.Context(t, time.Minute), s, env[engines.Default.URLName(s, "ROBOCO_TEST")])
				require.NoError(t, err, "a real client logs in to %s with the emitted URL", s)
			}
			pws := passwords(env)
			require.Len(t, pws, len(tt.services), "one password per service")
			for _, pw := range pws {
				assert.Regexp(t, `^[0-9a-f]{32}$`, pw)
				assert.NotContains(t, r.stderr, pw, "no password in logs")
			}

			// ls: table and json.
			want := make([]string, 0, len(tt.services))
			for _, s := range tt.services {
				e, _ := engines.Default.Lookup(s)
				want = append(want, c.prefix+"-sandbox-"+e.Spec().Short+"-"+owner)
			}
			table := c.mustSbx("ls").stdout
			lines := strings.Split(strings.TrimSpace(table), "\n")
			require.Len(t, lines, 1+len(tt.services), table)
			assert.Regexp(t, `^NAME\s+ENGINE\s+OWNER\s+STATE\s+AGE\s+ENDPOINT\s+NETWORK\s+RUNTIME$`, lines[0])
			for _, n := range want {
				assert.Regexp(t, regexp.MustCompile(regexp.QuoteMeta(n)+`\s+\w+\s+`+regexp.QuoteMeta(c.prefix+"-agent-"+owner)+`\s+running\s+\d+[smhd]\s+127\.0\.0\.1:\d+\s+`+regexp.QuoteMeta(provision.OwnerNetworkName(c.prefix+"-agent-"+owner))+`\s+docker`), table)
			}
			var rows []listed
			require.NoError(t, json.Unmarshal([]byte(c.mustSbx("ls", "--owner", owner, "-o", "json").stdout), &rows))
			require.Len(t, rows, len(tt.services))
			for _, row := range rows {
				assert.Contains(t, want, row.Name)
				require.NotNil(t, row.Endpoint)
				assert.Equal(t, "127.0.0.1", row.Endpoint.Host)
				assert.Equal(t, runtime.StateRunning, row.State)
				assert.Equal(t, "docker", row.Runtime)
				assert.Equal(t, []string{provision.OwnerNetworkName(c.prefix + "-agent-" + owner)}, row.Networks, "ls names the owner's network, as docker inspect has it")
			}
			assert.Equal(t, "[]\n", c.mustSbx("ls", "--owner", "someone-else", "-o", "json").stdout)

			// adopt: Docker cannot remove a container with its owner; it
			// says so, changes nothing, and the janitor stays in charge.
			adopt := c.sbx("adopt", "--owner", owner)
			assert.Equal(t, 1, adopt.code, adopt.stderr)
			assert.Contains(t, adopt.stderr, "janitor")
			assert.Empty(t, adopt.stdout)
			assert.Len(t, c.containers(), len(tt.services))

			// down, twice.
			down := c.mustSbx("down", "--owner", owner)
			sandboxLines, networkLines := splitNetworkLines(down.stdout)
			assert.ElementsMatch(t, want, strings.Fields(strings.ReplaceAll(sandboxLines, "removed ", "")))
			assert.Equal(t, "removed network "+provision.OwnerNetworkName(c.prefix+"-agent-"+owner)+"\n", networkLines, "the owner's network goes with its last sandbox")
			assert.Empty(t, c.containers())
			again := c.mustSbx("down", "--owner", owner)
			assert.Empty(t, again.stdout, "down is idempotent")
		})
	}
}

func TestUpFailureRollsBackWithExit4(t *testing.T) {
	c := newCLI(t, "postgres", "redis", "busybox")
	busybox := testenv.Image(t, "docker", "busybox")
	// busybox has no redis-server: redis fails, postgres is rolled back.
	r := c.sbx("--image", "redis="+busybox, "up", "--owner", "f1", "-s", "postgres,redis")
	assert.Equal(t, ExitProvision, r.code, r.stderr)
	assert.Empty(t, r.stdout)
	last := lastLine(r.stderr)
	assert.Contains(t, last, "sandboxer: provision "+c.prefix+"-agent-f1: redis")
	assert.Empty(t, c.containers(), "nothing of the call is left")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// sweepUntilJudged runs `gc -o json` until no sandbox is skipped: a sweep
// without grace still skips sandboxes created within the last whole second.
func (c *cli) sweepUntilJudged(args ...string) reportJSON {
	c.t.Helper()
	var rep reportJSON
	testkit.Poll(c.t, 30*time.Second, 250*time.Millisecond, func() error {
		r := c.mustSbx(append([]string{"gc", "--grace", "0s", "-o", "json"}, args...)...)
		require.NoError(c.t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
		if len(rep.Skipped) > 0 {
			return fmt.Errorf("skipped: %v", sweptNames(rep.Skipped))
		}
		return nil
	})
	return rep
}

func sweptNames(s []sweptJSON) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.Name
	}
	return out
}

func TestGC(t *testing.T) {
	c := newCLI(t, "redis", "busybox")
	busybox := testenv.Image(t, "docker", "busybox")
	// Owner "live" has a running agent container; owner "gone" has none.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.rt.Run(ctx, runtime.RunSpec{
		Name: c.prefix + "-agent-live", Image: busybox, Command: []string{"sleep", "600"},
		Labels: map[string]string{c.prefix + ".test": "1"},
	})
	require.NoError(t, err)
	c.mustSbx("up", "--owner", "live", "-s", "redis")
	c.mustSbx("up", "--owner", "gone", "-s", "redis")
	live, gone := c.prefix+"-sandbox-redis-live", c.prefix+"-sandbox-redis-gone"

	t.Run("GraceSkipsYoungSandboxes", func(t *testing.T) {
		r := c.mustSbx("gc", "--dry-run")
		assert.Contains(t, r.stdout, "would remove 0, vanished 0, kept 0, skipped 2 (in grace), errors 0 on docker")
		assert.Regexp(t, `skipped\s+`+live, r.stdout)
	})
	t.Run("DryRunRemovesNothing", func(t *testing.T) {
		rep := c.sweepUntilJudged("--dry-run")
		assert.True(t, rep.DryRun)
		assert.Equal(t, []string{gone}, sweptNames(rep.Removed))
		assert.Equal(t, []string{live}, sweptNames(rep.Kept))
		assert.ElementsMatch(t, []string{live, gone}, names(c.containers()))
		text := c.mustSbx("gc", "--grace", "0s", "--dry-run").stdout
		assert.Regexp(t, `would remove\s+`+gone+`\s+redis\s+owner `+c.prefix+`-agent-gone`, text)
		assert.Regexp(t, `kept\s+`+live, text)
	})
	t.Run("SweepRemovesOrphansOnly", func(t *testing.T) {
		r := c.mustSbx("gc", "--grace", "0s")
		assert.Regexp(t, `removed\s+`+gone, r.stdout)
		assert.Contains(t, r.stdout, "removed 1, vanished 0, kept 1, skipped 0 (in grace), errors 0 on docker")
		assert.Equal(t, []string{live}, names(c.containers()))
	})
}

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   int
		check  func(t *testing.T, out string)
	}{
		{name: "ExitStatusPropagates", script: "exit 7", want: 7},
		{name: "Success", script: "true", want: 0},
		{name: "KilledBySignalIs128PlusN", script: "kill -TERM $$", want: 128 + int(syscall.SIGTERM)},
		{
			name:   "CMDSeesTheEnvAndKeepsItsOwn",
			script: `printf '%s|%s|%s' "$ROBOCO_TEST_REDIS_URL" "$ROBOCO_TEST_DB_HOST" "$H9_OWN"`,
			want:   0,
			check: func(t *testing.T, out string) {
				assert.Regexp(t, `^redis://default:[0-9a-f]{32}@127\.0\.0\.1:\d+/0\|127\.0\.0\.1\|mine$`, out)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCLI(t, "postgres", "redis")
			c.env = append(c.env, "H9_OWN=mine")
			r := c.sbx("-q", "run", "-s", "postgres,redis", "--", "sh", "-c", tt.script)
			assert.Equal(t, tt.want, r.code, "stderr: %s", r.stderr)
			if tt.check != nil {
				tt.check(t, r.stdout)
			}
			assert.Empty(t, c.containers(), "torn down before exit")
		})
	}
}

// startRun starts `sandboxer run` in the background with a CMD that writes
// its redis URL to <dir>/started, then waits until <dir>/go exists. It
// returns once CMD has started.
func (c *cli) startRun(dir string) (*exec.Cmd, *bytes.Buffer) {
	c.t.Helper()
	script := `printf '%s' "$ROBOCO_TEST_REDIS_URL" > "$D/started.tmp" && mv "$D/started.tmp" "$D/started"
while [ ! -e "$D/go" ]; do sleep 0.1; done`
	c.env = append(c.env, "D="+dir)
	cmd := c.command(context.Background(), c.args("run", "-s", "redis", "--", "sh", "-c", script)...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	require.NoError(c.t, cmd.Start())
	c.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	require.Eventually(c.t, func() bool {
		_, err := os.Stat(filepath.Join(dir, "started"))
		return err == nil
	}, 2*time.Minute, 100*time.Millisecond, "CMD never started: %s", &errb)
	return cmd, &errb
}

// waitExit waits for cmd with a deadline and returns its exit code.
func waitExit(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			return 0
		}
		var xe *exec.ExitError
		require.ErrorAs(t, err, &xe)
		return xe.ExitCode()
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("sandboxer run did not exit: %s", stderr)
		return -1
	}
}

func TestRunSIGINTTearsDownAndExitsNonZero(t *testing.T) {
	c := newCLI(t, "redis")
	cmd, stderr := c.startRun(t.TempDir())
	require.Len(t, c.containers(), 1)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	code := waitExit(t, cmd, stderr)
	assert.Equal(t, 128+int(syscall.SIGINT), code, "CMD died of the forwarded SIGINT: %s", stderr)
	assert.Contains(t, stderr.String(), "forwarding signal to CMD")
	assert.Empty(t, c.containers(), "torn down after Ctrl-C")
}

func TestRunSurvivesAConcurrentGC(t *testing.T) {
	c := newCLI(t, "redis")
	dir := t.TempDir()
	cmd, stderr := c.startRun(dir)
	running := names(c.containers())
	require.Len(t, running, 1)

	rep := c.sweepUntilJudged()
	assert.Empty(t, rep.Removed, "a live run's sandbox is never removed")
	require.Equal(t, running, sweptNames(rep.Kept))
	assert.Contains(t, rep.Kept[0].Owner, fmt.Sprintf("pid %d", cmd.Process.Pid))
	assert.Equal(t, running, names(c.containers()))

	url, err := os.ReadFile(filepath.Join(dir, "started"))
	require.NoError(t, err)
	_, err = engines.Default.Login(testkit.Context(t, time.Minute), "redis", string(url))
	require.NoError(t, err, "the run's redis takes a login")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "go"), nil, 0o600))
	assert.Equal(t, 0, waitExit(t, cmd, stderr), stderr.String())
	assert.Empty(t, c.containers())
}

func TestEnginesListsTheRegistry(t *testing.T) {
	c := newCLI(t)
	var got []engineInfo
	require.NoError(t, json.Unmarshal([]byte(c.mustSbx("engines", "-o", "json").stdout), &got))
	require.Len(t, got, len(engines.Default.All()))
	for i, e := range engines.Default.All() {
		s := e.Spec()
		assert.Equal(t, s.Name, got[i].Name)
		assert.Equal(t, s.Image, got[i].DefaultImage)
		assert.Equal(t, s.Port, got[i].Port)
		assert.Equal(t, s.Tmpfs, got[i].Tmpfs)
		assert.NotEmpty(t, got[i].Probe)
		assert.Equal(t, s.ReadyTimeout.Seconds(), got[i].ReadySeconds)
		var names []string
		for _, v := range e.Env("ROBOCO_TEST", engines.Endpoint{}, engines.Credentials{}) {
			names = append(names, v.Name)
		}
		assert.Equal(t, names, got[i].Env)
	}
	table := c.mustSbx("engines").stdout
	assert.Regexp(t, `(?m)^NAME\s+IMAGE\s+PORT\s+TMPFS\s+PROBE\s+DEADLINE\s+ENV$`, table)
	assert.Regexp(t, `(?m)^postgres\s+.*5432\s+/var/lib/postgresql/data,/var/lib/sandboxer/wal,/var/lib/sandboxer/tablespace\s+pg_isready`, table)
}

func TestDoctorNamesTheChosenRuntime(t *testing.T) {
	c := newCLI(t, engines.Default.Names()...)
	// Auto-detection, as a user would run it: DOCKER_HOST comes first.
	text := c.run("doctor")
	require.Equal(t, 0, text.code, text.stderr)
	assert.Contains(t, text.stdout, "chosen: docker at ")
	assert.Contains(t, text.stdout, "why: first to answer in the auto-detection order: docker")
	assert.Regexp(t, `(?m)^\s+docker\s+\S+\s+DOCKER_HOST\s+answered: docker \S+, API 1\.\d+.*<- chosen`, text.stdout)
	assert.Regexp(t, `(?m)^\s+postgres\s+\S+\s+\(SANDBOXER_IMAGE_POSTGRES\)\s+present$`, text.stdout)

	var rep doctorReport
	r := c.run("doctor", "--runtime", "docker", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.NotNil(t, rep.Chosen)
	assert.Equal(t, "docker", rep.Chosen.Runtime)
	assert.Equal(t, "docker", rep.Asked)
	assert.NotEmpty(t, rep.Chosen.Version)
	for _, c := range rep.Candidates {
		assert.Equal(t, "docker", c.Runtime, "an explicit runtime keeps only its own candidates")
	}
	require.Len(t, rep.Images, len(engines.Default.Names()), "one line per engine")
	for _, i := range rep.Images {
		assert.True(t, i.Present, "%s: %s", i.Engine, i.Image)
	}
}

func TestBadInputLeavesNothing(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"UnknownService", nil, []string{"up", "--owner", "b1", "-s", "postgres,mysql"}, ExitUsage, `invalid service "mysql"`},
		{"BadOwnerID", nil, []string{"up", "--owner", "-x", "-s", "redis"}, ExitUsage, `invalid owner id "-x"`},
		{"BadFlag", nil, []string{"up", "--owner", "b1", "-s", "redis", "--ttl", "5m"}, ExitUsage, "unknown flag: --ttl"},
		{"UnreachableRuntime", []string{"DOCKER_HOST=unix:///nonexistent.sock"}, []string{"up", "--owner", "b1", "-s", "redis"}, ExitUnavailable, "unix:///nonexistent.sock"},
		{"RunUnknownService", nil, []string{"run", "-s", "mysql", "--", "true"}, ExitUsage, `invalid service "mysql"`},
		{"RunCMDNotFound", nil, []string{"run", "-s", "redis", "--", "h9-no-such-command"}, ExitNotFound, "executable file not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCLI(t)
			c.env = tt.env
			r := c.sbx(tt.args...)
			assert.Equal(t, tt.code, r.code, r.stderr)
			assert.Empty(t, r.stdout)
			assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
			assert.Contains(t, r.stderr, tt.want)
			assert.Empty(t, c.containers())
		})
	}
}

func TestSignalDuringProvisioningRollsBack(t *testing.T) {
	tests := []struct {
		name string
		args []string
		sig  syscall.Signal
	}{
		{"UpSIGINT", []string{"up", "--owner", "i1", "-s", "postgres"}, syscall.SIGINT},
		{"RunSIGTERMNeverStartsCMD", []string{"run", "-s", "postgres", "--", "sh", "-c", "echo CMD-RAN"}, syscall.SIGTERM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCLI(t, "postgres")
			cmd := c.command(context.Background(), c.args(tt.args...)...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			require.NoError(t, cmd.Start())
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					cmd.Process.Kill()
					cmd.Wait()
				}
			})
			// Postgres takes seconds to pass its probe: interrupt once its
			// container exists.
			require.Eventually(t, func() bool { return len(c.containers()) > 0 }, time.Minute, 50*time.Millisecond, "%s", &errb)
			require.NoError(t, cmd.Process.Signal(tt.sig))
			code := waitExit(t, cmd, &errb)
			assert.Equal(t, 128+int(tt.sig), code, errb.String())
			assert.Contains(t, lastLine(errb.String()), "interrupted by "+signalName(tt.sig))
			assert.NotContains(t, out.String(), "CMD-RAN")
			assert.Empty(t, c.containers(), "rolled back")
		})
	}
}

func TestJanitorLoopSweepsUntilSIGTERM(t *testing.T) {
	c := newCLI(t, "redis")
	c.mustSbx("up", "--owner", "orphan", "-s", "redis")
	require.Len(t, c.containers(), 1)
	cmd := c.command(context.Background(), c.args("janitor", "--interval", "200ms", "--grace", "0s")...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	require.Eventually(t, func() bool { return len(c.containers()) == 0 }, time.Minute, 100*time.Millisecond, "%s", &errb)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, waitExit(t, cmd, &errb), errb.String())
	assert.Contains(t, errb.String(), "janitor started")
	assert.Contains(t, errb.String(), "janitor stopped")
}

func TestQuickStartDemo(t *testing.T) {
	// What `make demo` runs: every engine, each proven with its real
	// client, the env printed with passwords masked, everything torn down.
	c := newCLI(t, engines.Default.Names()...)
	r := c.sbx("run", "--services", strings.Join(engines.Default.Names(), ","), "--", demoClient)
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	for _, s := range []string{"postgres ok", "redis    ok", "mongo    ok", "ROBOCO_TEST_DB_PASSWORD=****", "postgres://sandbox:****@127.0.0.1:"} {
		assert.Contains(t, r.stdout, s)
	}
	assert.NotRegexp(t, `(^|[^0-9a-f])[0-9a-f]{32}([^0-9a-f]|$)`, r.stdout+r.stderr, "no password (32 hex digits) anywhere")
	assert.Empty(t, c.containers())
}

func TestUpSiblingModeOnANetwork(t *testing.T) {
	c := newCLI(t, "redis", "busybox")
	busybox := testenv.Image(t, "docker", "busybox")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	network := c.prefix + "-net"
	_, err := c.rt.CreateNetwork(ctx, runtime.NetworkSpec{Name: network, Labels: map[string]string{c.prefix + ".test": "1"}})
	require.NoError(t, err)
	t.Cleanup(func() {
		c.removeAll()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, c.rt.RemoveNetwork(ctx, network))
	})

	r := c.mustSbx("up", "--owner", "s1", "-s", "redis", "--network", network, "-o", "json")
	var out upJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Len(t, out.Containers, 1)
	ep := out.Containers[0].Endpoint
	assert.Equal(t, 6379, ep.Port, "sibling mode hands out the container port")
	assert.NotEqual(t, "127.0.0.1", ep.Host)
	env := map[string]string{}
	for _, v := range out.Env {
		env[v.Name] = v.Value
	}
	assert.Equal(t, ep.Host, env["ROBOCO_TEST_REDIS_HOST"])

	// An agent on the same network reaches it with the env's password.
	agent, err := c.rt.Run(ctx, runtime.RunSpec{
		Name: c.prefix + "-agent-s1", Image: busybox, Command: []string{"sleep", "600"}, Network: network,
		Labels: map[string]string{c.prefix + ".test": "1"},
	})
	require.NoError(t, err)
	res, err := c.rt.Exec(ctx, agent.ID, runtime.ExecSpec{
		Cmd: []string{"sh", "-c", `printf 'AUTH %s\r\nPING\r\nQUIT\r\n' "$PW" | nc -w 5 "$HOST" "$PORT"`},
		Env: map[string]string{"PW": env["ROBOCO_TEST_REDIS_PASSWORD"], "HOST": ep.Host, "PORT": fmt.Sprint(ep.Port)},
	})
	require.NoError(t, err)
	assert.Contains(t, string(res.Stdout), "+PONG", "stderr: %s", res.Stderr)

	table := c.mustSbx("ls", "--owner", "s1").stdout
	assert.Contains(t, table, fmt.Sprintf("%s:%d", ep.Host, ep.Port), "ls shows the network endpoint")
	c.mustSbx("down", "--owner", "s1")
	assert.Empty(t, c.containers())
}

// teardownSignals are the signals that tear `run` down and roll `up` back:
// SIGTERM as before, and SIGHUP (a closed terminal) and SIGQUIT (Ctrl-\),
// which would otherwise kill sandboxer on the spot.
var teardownSignals = []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTERM}

// startSbx starts sandboxer with the test's global flags in dir, its
// stdout to stdout, and kills it when the test ends if it is still
// running.
func (c *cli) startSbx(dir string, stdout *bytes.Buffer, args ...string) (*exec.Cmd, *bytes.Buffer) {
	c.t.Helper()
	cmd := c.command(context.Background(), c.args(args...)...)
	cmd.Dir = dir // a CMD killed by SIGQUIT may dump core here
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &errb
	require.NoError(c.t, cmd.Start())
	c.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, &errb
}

// runningWithCMD says why `run` for owner (started as cmd) is not yet
// running its one sandbox and CMD ("sleep"); nil once it is.
func runningWithCMD(t *testing.T, c *cli, owner string, cmd *exec.Cmd) error {
	cs := c.ownedBy(owner)
	switch {
	case len(cs) != 1:
		return fmt.Errorf("%d sandboxes", len(cs))
	case cs[0].State != runtime.StateRunning:
		return fmt.Errorf("%s is %s", cs[0].Name, cs[0].State)
	case !hasChild(t, cmd.Process.Pid, "sleep"):
		return errors.New("CMD has not started")
	}
	return nil
}

// hasChild reports whether process pid has a child whose command name
// (/proc/PID/stat's comm) is comm.
func hasChild(t *testing.T, pid int, comm string) bool {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	require.NoError(t, err)
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // exited since the glob
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) > 1 && s[open+1:end] == comm && fields[1] == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}

func TestRunTearsDownOnSignal(t *testing.T) {
	for _, name := range testruntimes.Names {
		t.Run(name, func(t *testing.T) {
			for _, sig := range teardownSignals {
				t.Run(signalName(sig), func(t *testing.T) {
					c := newCLIOn(t, name, "redis")
					owner := "sig" + testkit.RandomHex(3)
					cmd, stderr := c.startSbx(t.TempDir(), new(bytes.Buffer), "run", "--owner", owner, "-s", "redis", "--", "sleep", "60")

					// CMD runs once its sandbox is ready: wait for both.
					testkit.Poll(t, 2*time.Minute, 100*time.Millisecond, func() error {
						return runningWithCMD(t, c, owner, cmd)
					}, "the sandbox never ran, or CMD never started: %s", stderr)

					require.NoError(t, cmd.Process.Signal(sig))
					testkit.Poll(t, 10*time.Second, 100*time.Millisecond, func() error {
						if left := c.ownedBy(owner); len(left) > 0 {
							return fmt.Errorf("left: %v", names(left))
						}
						return nil
					}, "a sandbox of the owner is left 10 s after %s: %s", signalName(sig), stderr)
					code := waitExit(t, cmd, stderr)
					assert.Equal(t, 128+int(sig), code, "CMD died of the forwarded %s: %s", signalName(sig), stderr)
					assert.Contains(t, stderr.String(), "forwarding signal to CMD")
					assert.NotContains(t, stderr.String(), "goroutine ", "no goroutine dump")
				})
			}
		})
	}
}

func TestUpRollsBackOnSignal(t *testing.T) {
	for _, name := range testruntimes.Names {
		t.Run(name, func(t *testing.T) {
			for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT} {
				t.Run(signalName(sig), func(t *testing.T) {
					c := newCLIOn(t, name, "postgres")
					owner := "sig" + testkit.RandomHex(3)
					var stdout bytes.Buffer
					cmd, stderr := c.startSbx(t.TempDir(), &stdout, "up", "--owner", owner, "-s", "postgres")
					// Postgres takes seconds to pass its probe: interrupt
					// once its container exists.
					testkit.Poll(t, 2*time.Minute, 50*time.Millisecond, func() error {
						if len(c.ownedBy(owner)) == 0 {
							return errors.New("no sandbox yet")
						}
						return nil
					}, "%s", stderr)
					require.NoError(t, cmd.Process.Signal(sig))
					code := waitExit(t, cmd, stderr)
					require.Equal(t, 128+int(sig), code, "up was still provisioning when %s came: %s", signalName(sig), stderr)
					assert.Contains(t, lastLine(stderr.String()), "interrupted by "+signalName(sig))
					assert.NotContains(t, stderr.String(), "goroutine ", "no goroutine dump")
					assert.Empty(t, stdout.String(), "no env for a rolled-back sandbox")
					assert.Empty(t, c.ownedBy(owner), "rolled back")
				})
			}
		})
	}
}

// deadSocket makes a unix socket at a fresh path where nothing answers: a
// stale socket file (nobody listens: connections are refused), or a
// listener that accepts and never replies (a hung daemon).
func deadSocket(t *testing.T, listening bool) string {
	t.Helper()
	// A short directory: a unix socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "h9dead")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	if !listening {
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		require.NoError(t, l.Close())
		return path
	}
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, conn) // read nothing, answer nothing
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	})
	return path
}

func TestDownWithoutRuntimeLooksAtEveryRuntime(t *testing.T) {
	// up lands on Podman; down and ls, with the runtime left to
	// auto-detection on a host where Docker answers too (and first in the
	// detection order), must still find the sandboxes on Podman.
	testruntimes.Connect(t, docker.Name)
	c := newCLIOn(t, podman.Name, "redis")
	sandbox := c.prefix + "-sandbox-redis-"

	t.Run("EveryRuntimeAnswers", func(t *testing.T) {
		c.mustSbx("up", "--owner", "m1", "-s", "redis")
		require.Len(t, c.ownedBy("m1"), 1)

		ls := c.auto(nil, "ls", "-o", "json")
		require.Equal(t, 0, ls.code, ls.stderr)
		var rows []listed
		require.NoError(t, json.Unmarshal([]byte(ls.stdout), &rows))
		require.Len(t, rows, 1)
		assert.Equal(t, sandbox+"m1", rows[0].Name)
		assert.Equal(t, "podman", rows[0].Runtime)

		down := c.auto(nil, "down", "--owner", "m1")
		require.Equal(t, 0, down.code, down.stderr)
		sandboxLines, _ := splitNetworkLines(down.stdout)
		assert.Equal(t, "removed "+sandbox+"m1\n", sandboxLines)
		assert.Empty(t, c.ownedBy("m1"), "removed from Podman")
	})

	for _, listening := range []bool{false, true} {
		name := "StaleDockerSocket"
		if listening {
			name = "DockerSocketThatNeverReplies"
		}
		t.Run(name, func(t *testing.T) {
			owner := "m" + testkit.RandomHex(3)
			c.mustSbx("up", "--owner", owner, "-s", "redis")
			env := []string{"DOCKER_HOST=unix://" + deadSocket(t, listening)}
			named := "docker at unix://"

			ls := c.auto(env, "ls", "-o", "json")
			assert.Equal(t, ExitUnavailable, ls.code, ls.stderr)
			assert.Contains(t, lastLine(ls.stderr), named)
			assert.Contains(t, lastLine(ls.stderr), "(DOCKER_HOST) did not answer")
			var rows []listed
			require.NoError(t, json.Unmarshal([]byte(ls.stdout), &rows))
			require.Len(t, rows, 1, "what Podman holds is listed all the same")
			assert.Equal(t, "podman", rows[0].Runtime)

			down := c.auto(env, "down", "--owner", owner)
			assert.Equal(t, ExitUnavailable, down.code, down.stderr)
			assert.Contains(t, lastLine(down.stderr), "(DOCKER_HOST) did not answer")
			assert.Contains(t, lastLine(down.stderr), "was not looked at")
			sandboxLines, _ := splitNetworkLines(down.stdout)
			assert.Equal(t, "removed "+sandbox+owner+"\n", sandboxLines, "Podman's sandboxes are torn down all the same")
			assert.Empty(t, c.ownedBy(owner))
		})
	}
}

func TestRunUnderNohupKeepsSIGHUPIgnored(t *testing.T) {
	c := newCLI(t, "redis")
	owner := "nh" + testkit.RandomHex(3)
	// What nohup does: SIGHUP ignored across exec.
	args := append([]string{"-c", `trap '' HUP; exec "$0" "$@"`, binary}, c.args("run", "--owner", owner, "-s", "redis", "--", "sleep", "60")...)
	cmd := exec.Command("sh", args...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Dir = t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	testkit.Poll(t, 2*time.Minute, 100*time.Millisecond, func() error {
		return runningWithCMD(t, c, owner, cmd)
	}, "the sandbox never ran, or CMD never started: %s", &stderr)

	// An ignored signal is discarded when it is sent, so the SIGTERM that
	// follows is the first one sandboxer and CMD see.
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 128+int(syscall.SIGTERM), waitExit(t, cmd, &stderr), stderr.String())
	assert.NotContains(t, stderr.String(), "SIGHUP")
	assert.Empty(t, c.ownedBy(owner))
}

// TestLsSaysASandboxWasOOMKilled: a redis sandbox with a tiny memory limit
// (32 MiB) is sent, by go-redis, one value twice that size: redis reads
// the whole value into its query buffer before maxmemory can refuse it,
// and the kernel kills it for memory. `ls --format json` then reports the
// sandbox exited and OOM-killed ("exited (OOM killed)"), as the runtime's
// own tools see it (docker/podman inspect's State.OOMKilled, containerd's
// task cgroup counter), on every runtime that reports OOM kills; on one
// that does not (Info.ReportsOOMKill false: Podman < 5) it reports
// "exited (code 137)" and never claims an OOM kill. A runtime that cannot
// enforce the limit refuses the sandbox (exit 4), and that is asserted.
func TestLsSaysASandboxWasOOMKilled(t *testing.T) {
	for _, name := range testruntimes.Names {
		t.Run(name, func(t *testing.T) {
			c := newCLIOn(t, name, "redis")
			ctx := testkit.Context(t, 3*time.Minute)
			info, err := c.rt.Version(ctx)
			require.NoError(t, err)
			owner := "oom" + testkit.RandomHex(2)
			// Without the rootless row's opt-out: a limit the runtime cannot
			// enforce is refused, never dropped.
			up := c.enforcing().sbx("up", "--owner", owner, "--services", "redis", "--memory", "32m")
			if up.code != 0 {
				require.Equal(t, 4, up.code, "up: %s", up.stderr)
				assert.True(t, info.Rootless, "only a rootless runtime may refuse a memory limit: %s", up.stderr)
				assert.Contains(t, up.stderr, runtime.ErrUnsupported.Error())
				return
			}
			env := parseDotenv(t, up.stdout)
			opts, err := redis.ParseURL(env[provision.DefaultEnvPrefix+"_REDIS_URL"])
			require.NoError(t, err)
			opts.MaxRetries = -1
			rc := redis.NewClient(opts)
			defer rc.Close()
			require.NoError(t, rc.Ping(ctx).Err(), "the sandbox answers before")
			err = rc.Set(ctx, "big", strings.Repeat("x", 64<<20), 0).Err()
			require.Error(t, err, "a 64 MiB value in a 32 MiB sandbox")

			var row listed
			testkit.Poll(t, time.Minute, 200*time.Millisecond, func() error {
				var rows []listed
				if err := json.Unmarshal([]byte(c.mustSbx("ls", "--owner", owner, "-o", "json").stdout), &rows); err != nil {
					return err
				}
				if len(rows) != 1 {
					return fmt.Errorf("%d rows", len(rows))
				}
				if row = rows[0]; row.State != runtime.StateExited {
					return fmt.Errorf("state %s", row.State)
				}
				return nil
			}, "ls shows the sandbox exited")
			require.NotNil(t, row.ExitCode)
			assert.Equal(t, 137, *row.ExitCode, "killed by SIGKILL")
			r := testruntimes.Connect(t, name)
			own := r.OwnStateOf(t, ctx, row.Name)
			assert.False(t, own.Running)
			if !info.ReportsOOMKill {
				t.Logf("%s %s does not report OOM kills: ls says %q", name, info.Version, row.Status)
				assert.False(t, row.OOMKilled, "ls never claims an OOM kill the runtime does not report")
				assert.Equal(t, "exited (code 137)", row.Status)
				return
			}
			assert.True(t, own.OOMKilled, "%s's own tools see the OOM kill", name)
			assert.True(t, row.OOMKilled, "ls --format json: oom_killed")
			assert.Equal(t, "exited (OOM killed)", row.Status)
			assert.Regexp(t, regexp.MustCompile(regexp.QuoteMeta(row.Name)+`\s+redis\s+\S+\s+exited \(OOM killed\)\s`), c.mustSbx("ls", "--owner", owner).stdout, "the table says it too")
		})
	}
}

// splitNetworkLines splits down's stdout into its sandbox lines and its
// owner network lines ("removed network ...", "kept network ...").
func splitNetworkLines(stdout string) (sandboxes, networks string) {
	for _, l := range strings.SplitAfter(stdout, "\n") {
		if strings.HasPrefix(l, "removed network ") || strings.HasPrefix(l, "kept network ") {
			networks += l
		} else {
			sandboxes += l
		}
	}
	return sandboxes, networks
}
