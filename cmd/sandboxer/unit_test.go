package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
)

// hermetic is an environment in which any runtime contact fails fast.
func hermetic(extra map[string]string) func(string) string {
	env := map[string]string{
		"DOCKER_HOST":        "unix:///nonexistent/docker.sock",
		"CONTAINER_HOST":     "unix:///nonexistent/podman.sock",
		"CONTAINERD_ADDRESS": "/nonexistent/containerd.sock",
		"XDG_RUNTIME_DIR":    "/nonexistent",
	}
	for k, v := range extra {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

// mainInProcess runs Main with a hermetic environment.
func mainInProcess(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, Stdio{In: strings.NewReader(""), Out: &out, Err: &errb}, hermetic(env), nil)
	return code, out.String(), errb.String()
}

func TestUsageErrorsComeBeforeAnyRuntimeContact(t *testing.T) {
	// Every runtime endpoint is unreachable: a usage error must win over
	// "runtime unavailable" (exit 3), because input is checked first.
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"UnknownCommand", nil, []string{"frob"}, `unknown command "frob"`},
		{"UnknownFlag", nil, []string{"up", "--bogus"}, "unknown flag: --bogus"},
		{"MissingOwner", nil, []string{"up", "-s", "redis"}, "--owner is required"},
		{"NoServices", nil, []string{"up", "--owner", "1"}, "no service asked for"},
		{"UnknownService", nil, []string{"up", "--owner", "1", "-s", "postgres,mysql"}, `invalid service "mysql": unknown service; valid services: ` + strings.Join(engines.Default.Names(), ", ")},
		{"DuplicateService", nil, []string{"up", "--owner", "1", "-s", "redis,redis"}, "listed twice"},
		{"BadOwnerID", nil, []string{"up", "--owner", "a b", "-s", "redis"}, `invalid owner id "a b"`},
		{"BadOwnerIDForDown", nil, []string{"down", "--owner", "../x"}, `invalid owner id "../x"`},
		{"OwnerTemplateWithoutID", nil, []string{"up", "--owner", "1", "-s", "redis", "--owner-template", "agent"}, "must contain {id}"},
		{"BadFormat", nil, []string{"up", "--owner", "1", "-s", "redis", "-o", "yaml"}, `--format "yaml"`},
		{"NetworkAndPublish", nil, []string{"up", "--owner", "1", "-s", "redis", "--network", "n", "--publish"}, "none of the others can be"},
		{"PrivateAndNetwork", nil, []string{"up", "--owner", "1", "-s", "redis", "--network", "n", "--private"}, "none of the others can be"},
		{"PrivateAndPublish", nil, []string{"up", "--owner", "1", "-s", "redis", "--publish", "--private"}, "none of the others can be"},
		{"SpawnPrivateAndNetwork", nil, []string{"spawn", "--owner", "1", "--services-json", `["redis"]`, "--network", "n", "--private"}, "none of the others can be"},
		{"BadLsFormat", nil, []string{"ls", "-o", "yaml"}, `--format "yaml"`},
		{"BadMemory", nil, []string{"--memory", "lots", "up", "--owner", "1", "-s", "redis"}, `--memory "lots"`},
		{"TinyMemory", nil, []string{"--memory", "12k", "up", "--owner", "1", "-s", "redis"}, "at least 1m"},
		{"NegativeCPUs", nil, []string{"--cpus", "-1", "up", "--owner", "1", "-s", "redis"}, "--cpus -1"},
		{"BadImageOverride", nil, []string{"--image", "mysql=x", "up", "--owner", "1", "-s", "redis"}, `unknown engine "mysql"`},
		{"ImageOverrideWithoutRef", nil, []string{"--image", "redis", "up", "--owner", "1", "-s", "redis"}, "want ENGINE=REF"},
		{"BadRuntimeFlag", nil, []string{"--runtime", "lxc", "up", "--owner", "1", "-s", "redis"}, `--runtime "lxc"`},
		{"BadRuntimeEnv", map[string]string{"SANDBOXER_RUNTIME": "rkt"}, []string{"ls"}, `SANDBOXER_RUNTIME="rkt"`},
		{"BadLabelPrefix", nil, []string{"--label-prefix", "Bad_Prefix", "ls"}, `invalid label prefix "Bad_Prefix"`},
		{"BadEnvPrefix", nil, []string{"--env-prefix", "lower", "up", "--owner", "1", "-s", "redis"}, `invalid env prefix "lower"`},
		{"BadLogFormat", nil, []string{"--log-format", "xml", "ls"}, `--log-format "xml"`},
		{"BadReadiness", nil, []string{"--readiness", "tcp", "up", "--owner", "1", "-s", "redis"}, `--readiness "tcp": want auto, wire or exec`},
		{"BadReadinessEnv", map[string]string{"SANDBOXER_READINESS": "ping"}, []string{"doctor"}, `SANDBOXER_READINESS "ping"`},
		{"BadUnenforcedLimitsEnv", map[string]string{"SANDBOXER_UNENFORCED_LIMITS": "maybe"}, []string{"doctor"}, `SANDBOXER_UNENFORCED_LIMITS="maybe": want 1 or 0`},
		{"QuietAndVerbose", nil, []string{"-q", "-v", "ls"}, "none of the others can be"},
		{"RunWithoutCMD", nil, []string{"run", "-s", "redis"}, "requires at least 1 arg"},
		{"NegativeGrace", nil, []string{"gc", "--grace", "-1s"}, "--grace -1s"},
		{"NegativeJanitorGrace", nil, []string{"janitor", "--grace", "-1s"}, "--grace -1s"},
		{"BadLabelPrefixForGC", nil, []string{"--label-prefix", "Bad", "gc"}, `invalid label prefix "Bad"`},
		{"ZeroInterval", nil, []string{"janitor", "--interval", "0s"}, "--interval 0s"},
		{"EnvFileIsADirectory", nil, []string{"up", "--owner", "1", "-s", "redis", "--env-file", os.TempDir()}, "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := mainInProcess(t, tt.env, tt.args...)
			assert.Equal(t, ExitUsage, code, "stderr: %s", stderr)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tt.want)
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			assert.True(t, strings.HasPrefix(stderr, "sandboxer: "), stderr)
		})
	}
}

// TestGraceFlag: --grace 0s is no grace window at all (janitor.NoGrace),
// not the default and not a nanosecond.
func TestGraceFlag(t *testing.T) {
	a := &app{labelPrefix: "sbx"}
	opts, err := a.janitorOptions(0)
	require.NoError(t, err)
	assert.True(t, opts.NoGrace)
	assert.Zero(t, opts.Grace)
	assert.Equal(t, "sbx", opts.Prefix)

	opts, err = a.janitorOptions(30 * time.Second)
	require.NoError(t, err)
	assert.False(t, opts.NoGrace)
	assert.Equal(t, 30*time.Second, opts.Grace)

	_, err = a.janitorOptions(-time.Second)
	assert.Equal(t, ExitUsage, exitCode(err, nil))
}

func TestUnreachableRuntimeIsExit3(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"ExplicitDocker", []string{"--runtime", "docker", "up", "--owner", "1", "-s", "redis"}, []string{"docker (asked for by --runtime) did not answer", "DOCKER_HOST unix:///nonexistent/docker.sock failed"}},
		{"ExplicitDockerHostFlag", []string{"--runtime", "docker", "--docker-host", "unix:///nonexistent/flag.sock", "ls"}, []string{"--docker-host unix:///nonexistent/flag.sock failed"}},
		{"AutoNothingAnswers", []string{"down", "--owner", "1"}, []string{"no container runtime answered", "DOCKER_HOST", "CONTAINER_HOST", "CONTAINERD_ADDRESS"}},
		{"DoctorReportsThenFails", []string{"doctor"}, []string{"no container runtime answered"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := mainInProcess(t, nil, tt.args...)
			assert.Equal(t, ExitUnavailable, code, stderr)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			last := lines[len(lines)-1]
			for _, w := range tt.want {
				assert.Contains(t, last, w)
			}
		})
	}
}

func TestHelpDocumentsExitCodes(t *testing.T) {
	code, stdout, _ := mainInProcess(t, nil, "--help")
	require.Equal(t, ExitOK, code)
	for _, s := range []string{"Exit codes:", "2    usage error", "3    container runtime unavailable", "4    provisioning failed", "128+n"} {
		assert.Contains(t, stdout, s)
	}
	for _, cmd := range []string{"up", "down", "ls", "gc", "janitor", "run", "engines", "doctor"} {
		assert.Contains(t, stdout, "  "+cmd+" ", "the root help lists %s", cmd)
	}
}

func TestEnginesNeedNoRuntime(t *testing.T) {
	code, stdout, stderr := mainInProcess(t, map[string]string{"SANDBOXER_IMAGE_REDIS": "mirror/redis:1"},
		"--image", "postgres=mirror/pg:1", "--env-prefix", "APP", "engines")
	require.Equal(t, ExitOK, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 1+len(engines.Default.Names()))
	assert.Contains(t, lines[0], "NAME")
	assert.Contains(t, stdout, "mirror/pg:1 (--image)")
	assert.Contains(t, stdout, "mirror/redis:1 (SANDBOXER_IMAGE_REDIS)")
	assert.Contains(t, stdout, "mongo:8")
	assert.Contains(t, stdout, "APP_DB_URL")
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"512m", 512 << 20, ""},
		{"512M", 512 << 20, ""},
		{"512MiB", 512 << 20, ""},
		{"512mb", 512 << 20, ""},
		{"1g", 1 << 30, ""},
		{"1.5g", 3 << 29, ""},
		{"268435456", 268435456, ""},
		{"2048k", 2 << 20, ""},
		{" 512m ", 512 << 20, ""},
		{"1GiB", 1 << 30, ""},
		{"", 0, "want a size"},
		{"lots", 0, "want a size"},
		{"12x", 0, "want a size"},
		{"1 g", 0, "want a size"},
		{"-1g", 0, "must be positive"},
		{"0", 0, "must be positive"},
		{"100", 0, "at least 1m"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.in), func(t *testing.T) {
			got, err := parseSize(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseImages(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    map[string]string
		wantErr string
	}{
		{"None", nil, map[string]string{}, ""},
		{"Several", []string{"postgres=reg:5000/pg:16", "Redis = reg/redis@sha256:ab"}, map[string]string{"postgres": "reg:5000/pg:16", "redis": "reg/redis@sha256:ab"}, ""},
		{"RefWithEquals", []string{"mongo=reg/m:1=x"}, map[string]string{"mongo": "reg/m:1=x"}, ""},
		{"UnknownEngine", []string{"mysql=x"}, nil, `unknown engine "mysql"; valid engines: ` + strings.Join(engines.Default.Names(), ", ")},
		{"NoRef", []string{"redis="}, nil, "want ENGINE=REF"},
		{"NoEquals", []string{"redis"}, nil, "want ENGINE=REF"},
		{"Twice", []string{"redis=a", "redis=b"}, nil, "given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseImages(engines.Default, tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestExitCode(t *testing.T) {
	pe := &provision.Error{Owner: "o", Service: "redis", Stage: "probe", Err: provision.ErrNotReady}
	unavailable := runtime.NewError("docker", "version", "unix:///x", runtime.ErrUnavailable, errors.New("refused"))
	tests := []struct {
		name string
		err  error
		sig  os.Signal
		want int
	}{
		{"Nil", nil, nil, ExitOK},
		{"Usage", usagef("bad"), nil, ExitUsage},
		{"InvalidInput", fmt.Errorf("wrapped: %w", &provision.ValidationError{Field: "owner id"}), nil, ExitUsage},
		{"UnknownRuntime", fmt.Errorf("x: %w", detect.ErrUnknownRuntime), nil, ExitUsage},
		{"Unavailable", unavailable, nil, ExitUnavailable},
		{"DetectUnavailable", &detect.UnavailableError{Reason: "none"}, nil, ExitUnavailable},
		{"ProvisionFailed", pe, nil, ExitProvision},
		{"ImageNotFound", runtime.NewError("docker", "pull", "x", runtime.ErrImageNotFound, nil), nil, ExitProvision},
		{"ImageLayoutRefused", fmt.Errorf("warm: %w", engines.ErrImageLayout), nil, ExitProvision},
		{"Other", errors.New("disk full"), nil, ExitFailure},
		{"InterruptedBySIGINT", context.Canceled, syscall.SIGINT, 130},
		{"InterruptedBySIGHUP", context.Canceled, syscall.SIGHUP, 129},
		{"InterruptedBySIGQUIT", context.Canceled, syscall.SIGQUIT, 131},
		{"ProvisionFailedAfterSIGTERM", pe, syscall.SIGTERM, 143},
		{"RunStatusWins", &exitError{code: 7}, syscall.SIGINT, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, exitCode(tt.err, tt.sig))
		})
	}
}

// TestLimitsHint: the CLI names its limits opt-out after an error that
// refused unenforceable limits, and only then: a runtime without an image
// store is unsupported too, and --unenforced-limits would not change it.
func TestLimitsHint(t *testing.T) {
	refused := &provision.Error{Owner: "o", Service: "redis", Stage: "run",
		Err: runtime.NewError("podman", runtime.OpRun, "sbx", runtime.ErrUnenforceableLimits, errors.New("rootless Podman on cgroup v1"))}
	noStore := fmt.Errorf("kubernetes has no image store of its own: %w", runtime.ErrUnsupported)
	tests := []struct {
		name     string
		err      error
		optedOut bool
		want     bool
	}{
		{"LimitsRefused", refused, false, true},
		{"LimitsRefusedButOptedOut", refused, true, false},
		{"NoImageStore", noStore, false, false},
		{"Other", errors.New("disk full"), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hint := limitsHint(tt.err, tt.optedOut)
			if tt.want {
				assert.Contains(t, hint, "--unenforced-limits")
				assert.Contains(t, hint, envUnenforcedLimits)
			} else {
				assert.Empty(t, hint)
			}
		})
	}
	assert.ErrorIs(t, refused, runtime.ErrUnsupported, "a limits refusal is still unsupported")
}

func TestShellFormatSurvivesSh(t *testing.T) {
	sh, err := exec.LookPath("sh")
	require.NoError(t, err, "the shell format is proven against a real sh")
	tricky := []string{
		"plain",
		"it's",
		`"double" $HOME $(id) ` + "`id`",
		`back\slash \' '\''`,
		"",
		"--flag",
		"*?[glob]",
	}
	sb := provision.Sandbox{}
	for i, v := range tricky {
		sb.Env = append(sb.Env, engines.EnvVar{Name: fmt.Sprintf("V%d", i), Value: v})
	}
	var buf bytes.Buffer
	require.NoError(t, sb.Render(&buf, provision.FormatShell))
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		assert.True(t, strings.HasPrefix(line, "export V"), line)
	}
	for i, want := range tricky {
		t.Run(fmt.Sprintf("V%d", i), func(t *testing.T) {
			out, err := exec.Command(sh, "-c", buf.String()+fmt.Sprintf(`printf '%%s' "$V%d"`, i)).Output()
			require.NoError(t, err)
			assert.Equal(t, want, string(out))
		})
	}
}

func TestEnvFileWriter(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sandbox.env")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))

	w, err := newEnvFile(path)
	require.NoError(t, err)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "old", string(data), "nothing replaced before Commit")
	require.NoError(t, w.Commit([]byte("K=v\n")))
	w.Abort()

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "an existing file's mode is not inherited")
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "K=v\n", string(data))

	w, err = newEnvFile(filepath.Join(dir, "other.env"))
	require.NoError(t, err)
	w.Abort()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "an aborted file leaves no temporary behind")

	_, err = newEnvFile(filepath.Join(dir, "missing", "x.env"))
	assert.Error(t, err, "an unwritable path fails before anything is provisioned")
}

func TestPullProgress(t *testing.T) {
	events := func(p *pulls, clock *time.Time) {
		p.now = func() time.Time { return *clock }
		p.event(provision.Event{Kind: provision.EventPullStart, Service: "postgres", Image: "reg/pg:16"})
		for i, cur := range []int64{0, 10 << 20, 20 << 20} {
			*clock = clock.Add(3 * time.Second)
			for _, layer := range []string{"l1", "l2"} {
				p.event(provision.Event{Kind: provision.EventPullProgress, Image: "reg/pg:16", Progress: &runtime.PullProgress{
					Ref: "reg/pg:16", Status: "Downloading", Layer: layer, Current: cur, Total: 20 << 20,
				}})
			}
			_ = i
		}
		p.event(provision.Event{Kind: provision.EventPullProgress, Image: "reg/pg:16", Progress: &runtime.PullProgress{Status: "Extracting", Layer: "l1", Current: 1, Total: 99 << 20}})
		p.event(provision.Event{Kind: provision.EventPulled, Image: "reg/pg:16"})
		p.done()
	}

	t.Run("PlainLinesWhenNotATerminal", func(t *testing.T) {
		var buf bytes.Buffer
		c := &console{w: &buf, width: 100}
		clock := time.Unix(0, 0)
		events(newPulls(c, slog.New(slog.NewTextHandler(c, nil))), &clock)
		out := buf.String()
		assert.NotContains(t, out, "\x1b", "no terminal escapes")
		assert.Contains(t, out, "percent=25", "a line after 5 s of pulling")
		assert.LessOrEqual(t, strings.Count(out, "\n"), 2, "concise: %q", out)
	})
	t.Run("OneLiveLinePerImageOnATerminal", func(t *testing.T) {
		var buf bytes.Buffer
		c := &console{w: &buf, tty: true, width: 100}
		clock := time.Unix(0, 0)
		p := newPulls(c, slog.New(slog.NewTextHandler(c, nil)))
		p.now = func() time.Time { return clock }
		p.event(provision.Event{Kind: provision.EventPullStart, Service: "redis", Image: "reg/redis:8"})
		events(p, &clock)
		out := buf.String()
		assert.Contains(t, out, "pulling reg/pg:16:  25% 10.5 MB / 41.9 MB")
		assert.Contains(t, out, "pulled reg/pg:16: 41.9 MB in")
		assert.Contains(t, out, "pulling reg/redis:8")
		assert.Contains(t, out, "\x1b[1A", "redraws two lines in place")
		assert.True(t, strings.HasSuffix(out, "\n"), "the final lines stay on screen")
	})
	t.Run("FinalLinesStayOnceEveryPullEnded", func(t *testing.T) {
		var buf bytes.Buffer
		c := &console{w: &buf, tty: true, width: 100}
		p := newPulls(c, slog.New(slog.NewTextHandler(c, nil)))
		p.event(provision.Event{Kind: provision.EventPullStart, Service: "redis", Image: "reg/redis:8"})
		p.event(provision.Event{Kind: provision.EventPulled, Image: "reg/redis:8"})
		fmt.Fprintln(c, "sandbox ready")
		p.done()
		out := buf.String()
		assert.True(t, strings.HasSuffix(out, "pulled reg/redis:8: 0 B in 0s\nsandbox ready\n"), "%q", out)
	})
	t.Run("LogLinesGoAboveTheStatus", func(t *testing.T) {
		var buf bytes.Buffer
		c := &console{w: &buf, tty: true, width: 100}
		c.SetStatus([]string{"pulling x: 1%"})
		fmt.Fprintln(c, "log line")
		assert.Equal(t, "\x1b[Kpulling x: 1%\r\x1b[Jlog line\n\x1b[Kpulling x: 1%", buf.String())
	})
}

func TestSignalRouter(t *testing.T) {
	t.Run("CancelsByDefault", func(t *testing.T) {
		r := newSignalRouter()
		ctx, cancel := context.WithCancel(context.Background())
		r.attach(cancel)
		r.deliver(syscall.SIGTERM)
		assert.Error(t, ctx.Err())
		assert.Equal(t, syscall.SIGTERM, r.signal())
	})
	t.Run("ASignalBeforeAttachCancelsAtAttach", func(t *testing.T) {
		r := newSignalRouter()
		r.deliver(syscall.SIGINT)
		ctx, cancel := context.WithCancel(context.Background())
		r.attach(cancel)
		assert.Error(t, ctx.Err())
	})
	t.Run("ForwardsWhileACommandRuns", func(t *testing.T) {
		r := newSignalRouter()
		ctx, cancel := context.WithCancel(context.Background())
		r.attach(cancel)
		var got []os.Signal
		assert.Nil(t, r.setForward(func(s os.Signal) { got = append(got, s) }))
		r.deliver(syscall.SIGINT)
		r.deliver(syscall.SIGTERM)
		assert.Equal(t, []os.Signal{syscall.SIGINT, syscall.SIGTERM}, got)
		assert.NoError(t, ctx.Err(), "forwarded signals do not cancel")
		assert.Equal(t, syscall.SIGINT, r.setForward(nil), "reports the first signal")
	})
}

func TestCaughtSignals(t *testing.T) {
	// SIGHUP is caught unless this process inherited it ignored (go test
	// run under nohup): that case is proven on the built binary
	// (TestRunUnderNohupKeepsSIGHUPIgnored).
	want := []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT}
	if !signal.Ignored(syscall.SIGHUP) {
		want = append(want, syscall.SIGHUP)
	}
	assert.ElementsMatch(t, want, caughtSignals())
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGQUIT} {
		assert.True(t, keyboardSignal(sig), "%s comes from the terminal to the whole group", signalName(sig))
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		assert.False(t, keyboardSignal(sig), "%s is forwarded on a terminal too", signalName(sig))
	}
}

func TestRunStopsParsingFlagsAtCMD(t *testing.T) {
	a := &app{registry: engines.Default, getenv: hermetic(nil)}
	root := a.rootCmd()
	for _, args := range [][]string{
		{"run", "-s", "redis", "--", "sh", "-c", "exit 7", "--verbose"},
		{"run", "-s", "redis", "sh", "-c", "exit 7", "--verbose"},
	} {
		cmd, rest, err := root.Find(args)
		require.NoError(t, err)
		require.NoError(t, cmd.ParseFlags(rest))
		assert.Equal(t, []string{"sh", "-c", "exit 7", "--verbose"}, cmd.Flags().Args(), "%v", args)
		assert.False(t, a.verbose, "CMD's flags are CMD's")
	}
}
