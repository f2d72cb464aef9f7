package sandboxtest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
	"github.com/roboco/sandboxer/runtime/docker"
	"github.com/roboco/sandboxer/sandboxtest"
)

// The helper's own tests run on Docker with the stand-in images of
// build/images.env (testenv loads it, DOCKER_HOST included).
func TestMain(m *testing.M) {
	testenv.Load()
	os.Exit(m.Run())
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
	prefix := "sbt" + randomHex(4)
	t.Cleanup(func() { removeAll(t, rt, prefix) })
	return sandboxtest.Options{LabelPrefix: prefix, Detect: detect.Options{Runtime: "docker"}}, rt
}

// removeAll removes whatever a failed test left under prefix.
func removeAll(t *testing.T, rt runtime.ContainerRuntime, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	left, err := rt.List(ctx, labels.For(prefix).Sandboxes())
	if err != nil {
		t.Logf("cleanup: list: %v", err)
		return
	}
	for _, c := range left {
		if err := rt.Remove(ctx, c.ID); err != nil {
			t.Logf("cleanup: remove %s: %v", c.Name, err)
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func listed(t *testing.T, rt runtime.ContainerRuntime, prefix string) []runtime.Container {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := rt.List(ctx, labels.For(prefix).Sandboxes())
	require.NoError(t, err)
	return got
}

func TestEachEngineWithARealClient(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		service string
		check   func(t *testing.T, sb *sandboxtest.Sandbox)
	}{
		{
			name:    "PostgresWithPgx",
			service: "postgres",
			check: func(t *testing.T, sb *sandboxtest.Sandbox) {
				conn, err := pgx.Connect(ctx, sb.DSN("postgres"))
				require.NoError(t, err)
				defer conn.Close(ctx)
				_, err = conn.Exec(ctx, "create table t (v text); insert into t values ('x')")
				require.NoError(t, err)
				var v string
				require.NoError(t, conn.QueryRow(ctx, "select v from t").Scan(&v))
				assert.Equal(t, "x", v)
				assert.Equal(t, "sandbox", sb.Getenv("ROBOCO_TEST_DB_NAME"))
			},
		},
		{
			name:    "RedisWithGoRedis",
			service: "redis",
			check: func(t *testing.T, sb *sandboxtest.Sandbox) {
				o, err := redis.ParseURL(sb.DSN("redis"))
				require.NoError(t, err)
				c := redis.NewClient(o)
				defer c.Close()
				require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
				got, err := c.Get(ctx, "k").Result()
				require.NoError(t, err)
				assert.Equal(t, "v", got)
			},
		},
		{
			name:    "MongoWithMongoDriver",
			service: "mongo",
			check: func(t *testing.T, sb *sandboxtest.Sandbox) {
				c, err := mongo.Connect(options.Client().ApplyURI(sb.DSN("mongo")).SetServerSelectionTimeout(20 * time.Second))
				require.NoError(t, err)
				defer c.Disconnect(ctx)
				coll := c.Database(sb.Getenv("ROBOCO_TEST_MONGO_DB")).Collection("t")
				_, err = coll.InsertOne(ctx, bson.D{{Key: "v", Value: "x"}})
				require.NoError(t, err)
				n, err := coll.CountDocuments(ctx, bson.D{})
				require.NoError(t, err)
				assert.EqualValues(t, 1, n)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, _ := onDocker(t, tt.service)
			sb := sandboxtest.StartWith(t, opts, tt.service)
			assert.Equal(t, "docker", sb.Runtime)
			require.Len(t, sb.Containers, 1)
			assert.Equal(t, "127.0.0.1", sb.Containers[0].Endpoint.Host, "host mode: published on loopback")
			tt.check(t, sb)
		})
	}
}

func TestShorthandsUseTheDefaults(t *testing.T) {
	_, rt := onDocker(t, "redis")
	sb := sandboxtest.Redis(t)
	require.Len(t, sb.Containers, 1)
	assert.Regexp(t, `^roboco-sandbox-redis-test-[0-9a-f]{10}$`, sb.Containers[0].Name)
	assert.Regexp(t, `^redis://:[0-9a-f]{32}@127\.0\.0\.1:\d+/0$`, sb.DSN("redis"))
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
	j := janitor.New(rt, janitor.Options{Prefix: opts.LabelPrefix, NoGrace: true})
	var rep janitor.Report
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		rep, err = j.Sweep(ctx)
		require.NoError(t, err)
		return len(rep.Skipped) == 0
	}, 20*time.Second, 200*time.Millisecond)
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

// envNoRuntime asks TestNoRuntimeChild, in a child test binary, to start a
// sandbox where no runtime can answer, on this runtime ("auto": detected).
const envNoRuntime = "SANDBOXTEST_NO_RUNTIME"

// TestNoRuntimeChild is TestNoRuntimeSkipsUnlessRequired's child: it ends
// as StartWith ends it.
func TestNoRuntimeChild(t *testing.T) {
	asked, ok := os.LookupEnv(envNoRuntime)
	if !ok {
		t.Skip("run as a child of TestNoRuntimeSkipsUnlessRequired")
	}
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
// (any runtime, for auto-detection); either way with testenv's marker.
func TestNoRuntimeSkipsUnlessRequired(t *testing.T) {
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
			cmd := exec.Command(os.Args[0], "-test.run=^TestNoRuntimeChild$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), envNoRuntime+"="+tt.asked, testenv.EnvRequire+"="+tt.require)
			out, err := cmd.Output()
			marker := testenv.MarkerSkipped + " runtime=" + tt.asked + " test=TestNoRuntimeChild\n"
			if tt.wantFail {
				var ee *exec.ExitError
				require.True(t, errors.As(err, &ee), "the child test failed: %v", err)
				assert.Contains(t, string(out), "--- FAIL: TestNoRuntimeChild")
				marker = testenv.MarkerRequiredSkipped + " runtime=" + tt.asked + " test=TestNoRuntimeChild\n"
			} else {
				require.NoError(t, err)
				assert.Contains(t, string(out), "--- SKIP: TestNoRuntimeChild")
			}
			assert.Contains(t, string(out), marker)
		})
	}
}
