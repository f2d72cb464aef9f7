// Package redis is sandboxer's Redis engine: its container, budget,
// readiness probe, emitted env and its login with go-redis, which only a
// program that imports it links. Importing it registers the engine
// (engines.Register), as importing a database/sql driver does:
//
//	import _ "github.com/roboco/sandboxer/engines/redis"
//
// Its test kit (fill-to-full, per-test databases, the tests' helpers) is
// redistest.
package redis

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/roboco/sandboxer/engines"
)

func init() { engines.Register(Engine{}) }

// Compile-time proof that redis logs in.
var _ engines.WireChecker = Engine{}

// Engine is Redis with a password and persistence off.
type Engine struct{}

// Order is redis's place in the report order: after postgres.
const Order = 20

// Spec describes the redis engine. The image declares /data a VOLUME; it is
// a tmpfs so that no anonymous volume is created (with persistence off
// nothing is written there anyway).
func (Engine) Spec() engines.Spec {
	return engines.Spec{
		Name:         "redis",
		Short:        "redis",
		Order:        Order,
		Image:        "redis:8-alpine",
		Port:         6379,
		Tmpfs:        []string{"/data"},
		Capabilities: engines.DropToServerUser(),
		ReadyTimeout: 15 * time.Second,
	}
}

// redisPasswordEnv carries the password into the container: the
// container's command reads it from there into redis-server's config on
// stdin, so that it is in no argv (inspect's Cmd/Args, the OCI spec's
// process args, /proc/<pid>/cmdline).
const redisPasswordEnv = "REDIS_PASSWORD"

// redisStart is the container's command, run by the image's entrypoint as
// `sh -c`: it takes the password out of the environment and execs the
// entrypoint again as `redis-server -` (config from stdin, a here-document
// the shell writes itself) followed by the options in "$@". exec keeps
// redis-server the container's main process, so the stop signal and the
// exit status are its own.
const redisStart = `pw="$` + redisPasswordEnv + `"; unset ` + redisPasswordEnv + `
exec docker-entrypoint.sh redis-server - "$@" <<EOF
requirepass $pw
EOF
`

// Container runs redis-server with a password (through the environment,
// see redisStart), no RDB snapshots and no append-only file. Within a
// memory limit, maxmemory is half of it with the noeviction policy: a full
// sandbox refuses writes with "OOM command not allowed when used memory >
// 'maxmemory'" and keeps serving reads; the rest is headroom for the
// allocator's fragmentation and the clients' buffers. /data holds nothing
// with persistence off, and gets 1/32 of the limit; any other VOLUME of
// img 1/128.
func (r Engine) Container(cred engines.Credentials, lim engines.Limits, img engines.Image) engines.Container {
	c := engines.Container{
		Env:     map[string]string{redisPasswordEnv: cred.Password},
		Command: []string{"sh", "-c", redisStart, "redis-server", "--save", "", "--appendonly", "no"},
		Tmpfs:   map[string]string{"/data": ""},
	}
	if lim.MemoryBytes > 0 {
		c.Command = append(c.Command,
			"--maxmemory", engines.Megabytes(lim.Share(1, 2, engines.MiB), "mb"),
			"--maxmemory-policy", "noeviction")
		c.Tmpfs["/data"] = engines.TmpfsSize(lim.Share(1, 32, engines.MiB))
	}
	c.CoverVolumes(img.Volumes(r.Spec().Tmpfs), lim.Share(1, 128, engines.MiB))
	return c
}

// Probe pings with the password in REDISCLI_AUTH (not argv) and expects
// PONG; redis-cli exits 0 on error replies such as NOAUTH or LOADING, so the
// answer is what counts.
func (Engine) Probe(ep engines.Endpoint, cred engines.Credentials) []engines.ProbeStep {
	return []engines.ProbeStep{{
		Cmd:   []string{"redis-cli", "-h", ep.Host, "-p", strconv.Itoa(ep.Port), "--no-auth-warning", "ping"},
		Env:   map[string]string{"REDISCLI_AUTH": cred.Password},
		Check: engines.StdoutIs("PONG"),
	}}
}

// User is the user of the URL Env emits: Redis's default user, whose
// password the sandbox sets. Naming it (redis://default:PASSWORD@...)
// rather than leaving it empty (redis://:PASSWORD@...) is what every
// client reads alike: redis-cli -u sends AUTH "" PASSWORD for an empty
// user, and fails.
const User = "default"

// Env emits <P>_REDIS_HOST, PORT, PASSWORD and URL (database 0, user
// User).
func (Engine) Env(prefix string, ep engines.Endpoint, cred engines.Credentials) []engines.EnvVar {
	u := engines.ConnURL("redis", User, cred.Password, ep, "0", "")
	return engines.ConnEnv(prefix+"_REDIS_", ep, u, engines.EnvVar{Name: "PASSWORD", Value: cred.Password, Secret: true})
}

// Login connects with go-redis (AUTH with the URL's password), pings, and
// reads the server's version from INFO server. Retries are off, the
// dial's included (go-redis dials up to five times by default).
func (Engine) Login(ctx context.Context, rawURL string) (engines.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, engines.AttemptTimeout)
	defer cancel()
	s := engines.Session{Client: "go-redis"}
	opts, err := goredis.ParseURL(rawURL)
	if err != nil {
		return s, engines.LoginError("redis", rawURL, err)
	}
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	// Dial here, once: a refused dial is then this function's error alone.
	// go-redis reports each failed dial of its pool through its global
	// logger, which a caller polling for readiness would fill with noise.
	d := net.Dialer{Timeout: engines.AttemptTimeout}
	conn, err := d.DialContext(ctx, "tcp", opts.Addr)
	if err != nil {
		return s, engines.LoginError("redis", rawURL, err)
	}
	var handed atomic.Bool
	defer func() {
		if !handed.Load() {
			_ = conn.Close()
		}
	}()
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if handed.CompareAndSwap(false, true) {
			return conn, nil
		}
		return d.DialContext(ctx, network, addr)
	}
	opts.DialTimeout = engines.AttemptTimeout
	opts.ReadTimeout = engines.AttemptTimeout
	opts.WriteTimeout = engines.AttemptTimeout
	opts.ContextTimeoutEnabled = true // ctx's deadline bounds reads and writes
	c := goredis.NewClient(opts)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return s, engines.LoginError("redis", rawURL, err)
	}
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return s, engines.LoginError("redis", rawURL, err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			s.Server = v
		}
	}
	return s, nil
}
