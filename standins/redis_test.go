package standins

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	redisengine "github.com/roboco/sandboxer/engines/redis"
	"github.com/roboco/sandboxer/internal/testkit"
)

// redisReadyDeadline is the engine's readiness deadline for redis.
const redisReadyDeadline = 15 * time.Second

// TestRedis runs the stand-in the two ways a redis:8-alpine container is
// started: exactly as the engine runs it (its env and command: `sh -c`
// handing the password from the environment to `redis-server -` as config
// on stdin, maxmemory with noeviction), and with the password in argv
// (`redis-server --requirepass X --save ” --appendonly no`, the official
// image's plain contract); /data on tmpfs. It checks the official image's
// contract from the host with go-redis.
func TestRedis(t *testing.T) {
	t.Parallel()
	password := testkit.RandomHex(16)
	engine := redisengine.Engine{}.Container(engines.Credentials{Password: password}, engines.Limits{MemoryBytes: 512 << 20}, engines.Image{})
	var engineEnv []string
	for k, v := range engine.Env {
		engineEnv = append(engineEnv, k+"="+v)
	}
	for _, tc := range []struct {
		name      string
		env, cmd  []string
		maxmemory string
	}{
		{name: "EnginesCommand", env: engineEnv, cmd: engine.Command, maxmemory: "268435456"},
		{name: "PasswordInArgv", cmd: []string{"redis-server", "--requirepass", password, "--save", "", "--appendonly", "no"}, maxmemory: "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testRedis(t, password, runOpts{Publish: []string{"6379/tcp"}, Tmpfs: []string{"/data"}, Env: tc.env, Cmd: tc.cmd}, tc.maxmemory)
		})
	}
}

// testRedis checks a stand-in redis started with opts and password.
func testRedis(t *testing.T, password string, opts runOpts, maxmemory string) {
	c := runContainer(t, standinImage(t, "redis"), opts)
	// The engine's probe: redis-cli inside the container, with auth, against
	// the container's own address.
	c.waitExec(t, redisReadyDeadline, []string{"REDISCLI_AUTH=" + password},
		"sh", "-c", `test "$(redis-cli -h "$1" ping)" = PONG`, "sh", c.ip(t))
	addr := c.hostAddr(t, "6379/tcp")
	ctx := testkit.Context(t, time.Minute)

	client := func(t *testing.T, password string) *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1, DialTimeout: 10 * time.Second})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}

	t.Run("RightPasswordPing", func(t *testing.T) {
		pong, err := client(t, password).Ping(ctx).Result()
		require.NoError(t, err)
		assert.Equal(t, "PONG", pong)
	})
	t.Run("SetGet", func(t *testing.T) {
		rdb := client(t, password)
		require.NoError(t, rdb.Set(ctx, "standins:key", "value", time.Minute).Err())
		got, err := rdb.Get(ctx, "standins:key").Result()
		require.NoError(t, err)
		assert.Equal(t, "value", got)
	})
	t.Run("Refused", func(t *testing.T) {
		tests := []struct {
			name     string
			password string
			want     []string // any of
		}{
			{name: "WrongPassword", password: "not-" + password, want: []string{"WRONGPASS", "invalid password"}},
			{name: "NoPassword", password: "", want: []string{"NOAUTH"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := client(t, tt.password).Ping(ctx).Err()
				require.Error(t, err)
				assert.True(t, containsAny(err.Error(), tt.want), "error %q mentions one of %q", err, tt.want)
				assert.NotContains(t, err.Error(), password, "the password never appears in an error")
			})
		}
	})
	t.Run("ProtectedModeOff", func(t *testing.T) {
		got, err := client(t, password).ConfigGet(ctx, "protected-mode").Result()
		require.NoError(t, err)
		assert.Equal(t, "no", got["protected-mode"])
	})
	t.Run("PersistenceOff", func(t *testing.T) {
		got, err := client(t, password).ConfigGet(ctx, "appendonly").Result()
		require.NoError(t, err)
		assert.Equal(t, "no", got["appendonly"])
		got, err = client(t, password).ConfigGet(ctx, "save").Result()
		require.NoError(t, err)
		assert.Empty(t, got["save"])
	})
	t.Run("WorkingDirIsData", func(t *testing.T) {
		got, err := client(t, password).ConfigGet(ctx, "dir").Result()
		require.NoError(t, err)
		assert.Equal(t, "/data", got["dir"])
	})
	t.Run("RunsAsUID999", func(t *testing.T) {
		assert.Equal(t, "999", c.uid(t))
	})
	t.Run("ServerVersion8", func(t *testing.T) {
		info, err := client(t, password).Info(ctx, "server").Result()
		require.NoError(t, err)
		assert.Contains(t, info, "redis_version:8.")
	})
	t.Run("Maxmemory", func(t *testing.T) {
		got, err := client(t, password).ConfigGet(ctx, "maxmemory").Result()
		require.NoError(t, err)
		assert.Equal(t, maxmemory, got["maxmemory"])
	})
}

// TestRedisDefaultCommand runs the image with its default command and no
// password: like the official image (protected mode compiled off), it
// accepts clients from outside the container, where Debian's default
// (protected mode on) would answer DENIED.
func TestRedisDefaultCommand(t *testing.T) {
	t.Parallel()
	c := runContainer(t, standinImage(t, "redis"), runOpts{Publish: []string{"6379/tcp"}})
	c.waitExec(t, redisReadyDeadline, nil, "sh", "-c", `test "$(redis-cli ping)" = PONG`)
	rdb := redis.NewClient(&redis.Options{Addr: c.hostAddr(t, "6379/tcp"), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	pong, err := rdb.Ping(testkit.Context(t, time.Minute)).Result()
	require.NoError(t, err)
	assert.Equal(t, "PONG", pong)
	assert.Equal(t, "999", c.uid(t))
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestRedisArgumentOrder: the stand-in's entrypoint appends its arguments
// after the user's, as the official one appends `--loadmodule` for its
// modules, and the engine's config on stdin (`redis-server -`) still
// arrives (redis reads it only while `-` is the first or the last
// argument): the password it carries is required, and both the user's and
// the appended arguments are in force.
func TestRedisArgumentOrder(t *testing.T) {
	t.Parallel()
	password := testkit.RandomHex(16)
	cc := redisengine.Engine{}.Container(engines.Credentials{Password: password}, engines.Limits{MemoryBytes: 512 << 20}, engines.Image{})
	opts := runOpts{Publish: []string{"6379/tcp"}, Cmd: cc.Command}
	for k, v := range cc.Env {
		opts.Env = append(opts.Env, k+"="+v)
	}
	ref := standinImage(t, "redis")
	ctx := testkit.Context(t, time.Minute)

	// The argv the entrypoint hands the server, as a stand-in redis-server
	// on PATH prints it.
	shim := `mkdir -p /tmp/shim && printf '#!/bin/sh\necho "$*"\n' >/tmp/shim/redis-server && chmod 755 /tmp/shim/redis-server &&
PATH=/tmp/shim:$PATH exec docker-entrypoint.sh redis-server - --save "" --requirepass-from stdin`
	out, err := docker(ctx, "run", "--rm", "--label", testLabel, "--entrypoint", "sh", ref, "-c", shim)
	require.NoError(t, err)
	assert.Equal(t, `- --save  --requirepass-from stdin --protected-mode no`, out, "the entrypoint's own arguments come after the user's")

	c := runContainer(t, ref, opts)
	c.waitExec(t, redisReadyDeadline, []string{"REDISCLI_AUTH=" + password},
		"sh", "-c", `test "$(redis-cli -h "$1" ping)" = PONG`, "sh", c.ip(t))
	rdb := redis.NewClient(&redis.Options{Addr: c.hostAddr(t, "6379/tcp"), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	assert.ErrorContains(t, rdb.Ping(ctx).Err(), "NOAUTH", "the password from stdin (`-` first) is required")
	authed := redis.NewClient(&redis.Options{Addr: c.hostAddr(t, "6379/tcp"), Password: password, MaxRetries: -1})
	t.Cleanup(func() { authed.Close() })
	got, err := authed.ConfigGet(ctx, "protected-mode").Result()
	require.NoError(t, err)
	assert.Equal(t, "no", got["protected-mode"], "the argument the entrypoint appends arrives")
	got, err = authed.ConfigGet(ctx, "maxmemory").Result()
	require.NoError(t, err)
	assert.Equal(t, "268435456", got["maxmemory"], "the user's arguments arrive")
}

// TestRedisRunsAsRootWhenItCannotSwitchUsers: without CAP_SETUID and
// CAP_SETGID the stand-in runs the server as root, as the official
// entrypoint does, instead of failing to start.
func TestRedisRunsAsRootWhenItCannotSwitchUsers(t *testing.T) {
	t.Parallel()
	c := runContainer(t, standinImage(t, "redis"), runOpts{CapDrop: []string{"SETUID", "SETGID"}, Cmd: []string{"redis-server", "--save", ""}})
	c.waitExec(t, redisReadyDeadline, nil, "sh", "-c", `test "$(redis-cli ping)" = PONG`)
	assert.Equal(t, "0", c.uid(t))
}
