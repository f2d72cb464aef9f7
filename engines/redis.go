package engines

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is Redis with a password and persistence off.
type Redis struct{}

// Spec describes the redis engine. The image declares /data a VOLUME; it is
// a tmpfs so that no anonymous volume is created (with persistence off
// nothing is written there anyway).
func (Redis) Spec() Spec {
	return Spec{
		Name:         "redis",
		Short:        "redis",
		Image:        "redis:8-alpine",
		Port:         6379,
		Tmpfs:        []string{"/data"},
		Capabilities: dropToServerUser,
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
func (r Redis) Container(cred Credentials, lim Limits, img Image) Container {
	c := Container{
		Env:     map[string]string{redisPasswordEnv: cred.Password},
		Command: []string{"sh", "-c", redisStart, "redis-server", "--save", "", "--appendonly", "no"},
		Tmpfs:   map[string]string{"/data": ""},
	}
	if lim.MemoryBytes > 0 {
		c.Command = append(c.Command,
			"--maxmemory", mb(lim.share(1, 2, mib), "mb"),
			"--maxmemory-policy", "noeviction")
		c.Tmpfs["/data"] = tmpfsSize(lim.share(1, 32, mib))
	}
	c.coverVolumes(img.volumes(r.Spec().Tmpfs), lim.share(1, 128, mib))
	return c
}

// Probe pings with the password in REDISCLI_AUTH (not argv) and expects
// PONG; redis-cli exits 0 on error replies such as NOAUTH or LOADING, so the
// answer is what counts.
func (Redis) Probe(ep Endpoint, cred Credentials) []ProbeStep {
	return []ProbeStep{{
		Cmd:   []string{"redis-cli", "-h", ep.Host, "-p", strconv.Itoa(ep.Port), "--no-auth-warning", "ping"},
		Env:   map[string]string{"REDISCLI_AUTH": cred.Password},
		Check: StdoutIs("PONG"),
	}}
}

// RedisUser is the user of the URL Env emits: Redis's default user, whose
// password the sandbox sets. Naming it (redis://default:PASSWORD@...)
// rather than leaving it empty (redis://:PASSWORD@...) is what every
// client reads alike: redis-cli -u sends AUTH "" PASSWORD for an empty
// user, and fails.
const RedisUser = "default"

// Env emits <P>_REDIS_HOST, PORT, PASSWORD and URL (database 0, user
// RedisUser).
func (Redis) Env(prefix string, ep Endpoint, cred Credentials) []EnvVar {
	u := url.URL{
		Scheme: "redis",
		User:   url.UserPassword(RedisUser, cred.Password),
		Host:   hostPort(ep),
		Path:   "/0",
	}
	p := prefix + "_REDIS_"
	return []EnvVar{
		{Name: p + "HOST", Value: ep.Host},
		{Name: p + "PORT", Value: strconv.Itoa(ep.Port)},
		{Name: p + "PASSWORD", Value: cred.Password, Secret: true},
		{Name: p + "URL", Value: u.String(), Secret: true},
	}
}

// Login connects with go-redis (AUTH with the URL's password), pings, and
// reads the server's version from INFO server. Retries are off, the
// dial's included (go-redis dials up to five times by default).
func (Redis) Login(ctx context.Context, rawURL string) (Session, error) {
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	s := Session{Client: "go-redis"}
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return s, loginError("redis", rawURL, err)
	}
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	// Dial here, once: a refused dial is then this function's error alone.
	// go-redis reports each failed dial of its pool through its global
	// logger, which a caller polling for readiness would fill with noise.
	d := net.Dialer{Timeout: AttemptTimeout}
	conn, err := d.DialContext(ctx, "tcp", opts.Addr)
	if err != nil {
		return s, loginError("redis", rawURL, err)
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
	opts.DialTimeout = AttemptTimeout
	opts.ReadTimeout = AttemptTimeout
	opts.WriteTimeout = AttemptTimeout
	opts.ContextTimeoutEnabled = true // ctx's deadline bounds reads and writes
	c := redis.NewClient(opts)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return s, loginError("redis", rawURL, err)
	}
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return s, loginError("redis", rawURL, err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			s.Server = v
		}
	}
	return s, nil
}
