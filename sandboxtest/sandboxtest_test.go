package sandboxtest_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	_ "github.com/roboco/sandboxer/engines/all/alltest"
	"github.com/roboco/sandboxer/engines/redis/redistest"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
	"github.com/roboco/sandboxer/runtime/docker"
	"github.com/roboco/sandboxer/sandboxtest"
)

// The helper's own tests run with the stand-in images of
// build/images.env (testenv loads it, DOCKER_HOST included), through
// sandboxtest.Main, as a user's TestMain would: it tears down the shared
// sandboxes of the per-test databases (their run files in a directory of
// its own). Unless -test.parallel says
// otherwise, parallelTests tests may run at once: the isolation test holds
// that many databases at the same time.
func TestMain(m *testing.M) {
	testenv.Load()
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(parallelTests))
	}
	// The tests' label prefixes are random: their run files go to a
	// directory of this binary's, not to the user's cache.
	if os.Getenv(sandboxtest.EnvRunDir) == "" {
		dir, err := os.MkdirTemp("", "sandboxtest-runs-")
		if err != nil {
			panic(err)
		}
		_ = os.Setenv(sandboxtest.EnvRunDir, dir)
		code := sandboxtest.Main(m)
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(sandboxtest.Main(m))
}

// onDocker skips (or fails, under SANDBOXER_REQUIRE=docker) unless Docker
// answers and the stand-in images of services are configured, and returns
// options that pin the helper to Docker under a label prefix of the test's
// own, so that its assertions never see anybody else's sandboxes.
func onDocker(t *testing.T, services ...string) (sandboxtest.Options, runtime.ContainerRuntime) {
	t.Helper()
	if testing.Short() {
		t.Skip("provisions on a real runtime")
	}
	for _, s := range services {
		testenv.Image(t, "docker", s)
	}
	rt, err := docker.New()
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rt.Version(ctx); err != nil {
		testenv.Unavailable(t, "docker", "%v", err)
	}
	prefix := "sbt" + testkit.RandomHex(4)
	testkit.CleanupLabelled(t, rt, map[string]string{prefix + ".sandbox": "1"}) // what a failed test left
	return sandboxtest.Options{LabelPrefix: prefix, Detect: detect.Options{Runtime: "docker"}}, rt
}

func listed(t *testing.T, rt runtime.ContainerRuntime, prefix string) []runtime.Container {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := rt.List(ctx, labels.For(prefix).Sandboxes())
	require.NoError(t, err)
	return got
}

// TestEachEngineWithARealClient: a sandbox of every engine the binary
// links, on Docker in host mode, takes a login of the engine's real client
// (engines.WireChecker) at its DSN, and emits the engine's env for its
// endpoint, the default user and database and its password.
func TestEachEngineWithARealClient(t *testing.T) {
	for _, e := range engines.Default.All() {
		service := e.Spec().Name
		t.Run(service, func(t *testing.T) {
			opts, _ := onDocker(t, service)
			sb := sandboxtest.StartWith(t, opts, service)
			assert.Equal(t, "docker", sb.Runtime)
			require.Len(t, sb.Containers, 1)
			assert.Equal(t, "127.0.0.1", sb.Containers[0].Endpoint.Host, "host mode: published on loopback")
			s, err := engines.Default.Login(testkit.Context(t, time.Minute), service, sb.DSN(service))
			require.NoError(t, err, "the engine's real client logs in with the DSN")
			t.Logf("%s logged in to %s", s.Client, s.Server)
			pw := ""
			for _, v := range sb.Env {
				if _, isURL := engines.URLVar([]engines.EnvVar{v}); v.Secret && !isURL {
					pw = v.Value
				}
			}
			require.Len(t, pw, 2*engines.PasswordBytes, "a generated password is emitted")
			cred := engines.Credentials{User: engines.DefaultUser, Password: pw, Database: engines.DefaultDatabase}
			for _, v := range e.Env(provision.DefaultEnvPrefix, sb.Containers[0].Endpoint, cred) {
				assert.Equal(t, v.Value, sb.Getenv(v.Name), v.Name)
			}
		})
	}
}

func TestShorthandsUseTheDefaults(t *testing.T) {
	_, rt := onDocker(t, "redis")
	sb := redistest.Sandbox(t)
	require.Len(t, sb.Containers, 1)
	assert.Regexp(t, `^roboco-sandbox-redis-test-[0-9a-f]{10}$`, sb.Containers[0].Name)
	assert.Regexp(t, `^redis://default:[0-9a-f]{32}@127\.0\.0\.1:\d+/0$`, sb.DSN("redis"))
	t.Cleanup(func() {
		// Registered after Start's cleanup, so it runs before it.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := rt.Inspect(ctx, sb.Containers[0].ID)
		assert.NoError(t, err, "still there until the test ends")
	})
}

func TestTornDownWhenTheTestEnds(t *testing.T) {
	opts, rt := onDocker(t, "postgres", "redis")
	var names []string
	t.Run("Inner", func(t *testing.T) {
		sb := sandboxtest.StartWith(t, opts, "redis", "postgres")
		for _, c := range sb.Containers {
			names = append(names, c.Name)
		}
		assert.Equal(t, []string{"postgres", "redis"}, []string{sb.Containers[0].Engine, sb.Containers[1].Engine}, "registry order")
		assert.Len(t, listed(t, rt, opts.LabelPrefix), 2)
	})
	require.Len(t, names, 2)
	assert.Empty(t, listed(t, rt, opts.LabelPrefix), "the inner test's cleanup removed %v", names)
}

func TestOwnedByTheTestProcess(t *testing.T) {
	opts, rt := onDocker(t, "redis")
	sb := sandboxtest.StartWith(t, opts, "redis")
	got := listed(t, rt, opts.LabelPrefix)
	require.Len(t, got, 1)
	assert.Equal(t, strconv.Itoa(os.Getpid()), got[0].Labels[labels.For(opts.LabelPrefix).OwnerPID])

	// A sweep with no grace still skips a sandbox created within the last
	// whole second (creation times may be truncated): sweep until it is
	// judged.
	j, err := janitor.New(rt, janitor.Options{Prefix: opts.LabelPrefix, NoGrace: true})
	require.NoError(t, err)
	var rep janitor.Report
	testkit.Poll(t, 20*time.Second, 200*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		rep, err = j.Sweep(ctx)
		require.NoError(t, err)
		if len(rep.Skipped) > 0 {
			return fmt.Errorf("skipped: %s", rep)
		}
		return nil
	})
	require.Len(t, rep.Kept, 1, "a sweep with no grace keeps what a live test process owns: %s", rep)
	assert.Equal(t, sb.Containers[0].Name, rep.Kept[0].Name)
	assert.Empty(t, rep.Removed)
}

func TestSetenvExportsTheEnv(t *testing.T) {
	opts, _ := onDocker(t, "redis")
	opts.EnvPrefix = "MYAPP"
	sb := sandboxtest.StartWith(t, opts, "redis")
	sb.Setenv()
	assert.Equal(t, sb.DSN("redis"), os.Getenv("MYAPP_REDIS_URL"))
	assert.NotEmpty(t, os.Getenv("MYAPP_REDIS_PASSWORD"))
}

// envNoRuntime, set, makes TestNoRuntimeSkipsUnlessRequired its own child
// (in a child test binary): it starts a sandbox where no runtime can
// answer, on this runtime ("auto": detected), and ends as StartWith ends it.
const envNoRuntime = "SANDBOXTEST_NO_RUNTIME"

// noRuntimeChild is the child's body.
func noRuntimeChild(t *testing.T, asked string) {
	if asked == testenv.AnyRuntime {
		asked = ""
	}
	nothing := detect.Options{
		Runtime:      asked,
		Getenv:       func(string) string { return "" },
		SocketExists: func(string) bool { return false },
	}
	sandboxtest.StartWith(t, sandboxtest.Options{Detect: nothing}, "redis")
	t.Fatal("StartWith returned with no runtime")
}

// TestNoRuntimeSkipsUnlessRequired: with no runtime, StartWith skips the
// test, or fails it when SANDBOXER_REQUIRE lists the runtime it asked for
// (any runtime, for auto-detection); either way with testenv's marker. It
// runs itself in a child test binary, as the child, for each case.
func TestNoRuntimeSkipsUnlessRequired(t *testing.T) {
	if asked, ok := os.LookupEnv(envNoRuntime); ok {
		noRuntimeChild(t, asked)
		return
	}
	const self = "TestNoRuntimeSkipsUnlessRequired"
	tests := []struct {
		name     string
		asked    string
		require  string
		wantFail bool
	}{
		{name: "AutoNotRequired", asked: testenv.AnyRuntime, require: ""},
		{name: "AutoRequiredByAnyRuntime", asked: testenv.AnyRuntime, require: "podman", wantFail: true},
		{name: "DockerNotRequired", asked: "docker", require: "podman,containerd"},
		{name: "DockerRequired", asked: "docker", require: "podman,docker", wantFail: true},
		{name: "DockerRequiredByAll", asked: "docker", require: "all", wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^"+self+"$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), envNoRuntime+"="+tt.asked, testenv.EnvRequire+"="+tt.require)
			out, err := cmd.Output()
			marker := testenv.MarkerSkipped + " runtime=" + tt.asked + " test=" + self + "\n"
			if tt.wantFail {
				var ee *exec.ExitError
				require.True(t, errors.As(err, &ee), "the child test failed: %v", err)
				assert.Contains(t, string(out), "--- FAIL: "+self)
				marker = testenv.MarkerRequiredSkipped + " runtime=" + tt.asked + " test=" + self + "\n"
			} else {
				require.NoError(t, err)
				assert.Contains(t, string(out), "--- SKIP: "+self)
			}
			assert.Contains(t, string(out), marker)
		})
	}
}
