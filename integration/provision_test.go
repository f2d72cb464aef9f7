package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/roboco/sandboxer/bench"
	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/mariadb"
	redisengine "github.com/roboco/sandboxer/engines/redis"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// countPulls returns an event callback that counts image pulls.
func countPulls(n *atomic.Int32) func(provision.Event) {
	return func(ev provision.Event) {
		if ev.Kind == provision.EventPullStart {
			n.Add(1)
		}
	}
}

// Host mode: a consumer on the host connects with the real Go clients,
// using nothing but the emitted env, and writes and reads; teardown then
// leaves nothing behind, not even an anonymous volume.
func TestProvisionHostMode(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx := testkit.Context(t, 5*time.Minute)
		var pulls atomic.Int32
		p := e.Provisioner(func(o *provision.Options) { o.OnEvent = countPulls(&pulls) })
		id := e.Owner("host")
		var before []string
		if b.DanglingVolumes != nil {
			var err error
			before, err = b.DanglingVolumes(ctx)
			require.NoError(t, err)
		}

		start := time.Now()
		sb, err := p.Provision(ctx, id, allEngines)
		require.NoError(t, err)
		t.Logf("every engine provisioned in %s (host mode, %d images pulled first)", time.Since(start).Round(time.Millisecond), pulls.Load())
		env := sb.Map()

		for _, c := range sb.Containers {
			ctr, err := b.RT.Inspect(ctx, c.ID)
			require.NoError(t, err)
			require.Len(t, ctr.Ports, 1)
			assert.Equal(t, "127.0.0.1", ctr.Ports[0].HostIP, "%s is published on loopback only", c.Name)
			for _, m := range ctr.Mounts {
				assert.NotEqual(t, "volume", m.Type, "%s: %s is a volume, not a tmpfs", c.Name, m.Destination)
			}
		}

		t.Run("PostgresWithPgx", func(t *testing.T) {
			require.NoError(t, pgWriteRead(ctx, env["ROBOCO_TEST_DB_URL"], "host"))
			conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s sslmode=disable",
				env["ROBOCO_TEST_DB_HOST"], env["ROBOCO_TEST_DB_PORT"], env["ROBOCO_TEST_DB_USER"],
				env["ROBOCO_TEST_DB_PASSWORD"], env["ROBOCO_TEST_DB_NAME"]))
			require.NoError(t, err, "the discrete variables work too")
			defer conn.Close(ctx)
			var n int
			require.NoError(t, conn.QueryRow(ctx, "select count(*) from sandboxer_t").Scan(&n))
			assert.Equal(t, 1, n)
			admin, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s sslmode=disable",
				env["ROBOCO_TEST_DB_HOST"], env["ROBOCO_TEST_DB_PORT"], env["ROBOCO_TEST_DB_USER"],
				env["ROBOCO_TEST_DB_PASSWORD"], env["ROBOCO_TEST_DB_ADMIN_DB"]))
			require.NoError(t, err, "the admin database accepts the same login")
			admin.Close(ctx)
		})
		t.Run("RedisWithGoRedis", func(t *testing.T) {
			require.NoError(t, redisWriteRead(ctx, env["ROBOCO_TEST_REDIS_URL"], "host"))
			c := redis.NewClient(&redis.Options{
				Addr:     net.JoinHostPort(env["ROBOCO_TEST_REDIS_HOST"], env["ROBOCO_TEST_REDIS_PORT"]),
				Password: env["ROBOCO_TEST_REDIS_PASSWORD"],
			})
			defer c.Close()
			got, err := c.Get(ctx, "sandboxer:k").Result()
			require.NoError(t, err)
			assert.Equal(t, "host", got)
		})
		t.Run("MongoWithMongoDriver", func(t *testing.T) {
			require.NoError(t, mongoWriteRead(ctx, env["ROBOCO_TEST_MONGO_URL"], env["ROBOCO_TEST_MONGO_DB"], "host"))
			c, err := mongo.Connect(options.Client().
				SetHosts([]string{net.JoinHostPort(env["ROBOCO_TEST_MONGO_HOST"], env["ROBOCO_TEST_MONGO_PORT"])}).
				SetAuth(options.Credential{
					Username:   env["ROBOCO_TEST_MONGO_USER"],
					Password:   env["ROBOCO_TEST_MONGO_PASSWORD"],
					AuthSource: env["ROBOCO_TEST_MONGO_AUTH_DB"],
				}))
			require.NoError(t, err)
			defer c.Disconnect(ctx)
			n, err := c.Database(env["ROBOCO_TEST_MONGO_DB"]).Collection("sandboxer_t").CountDocuments(ctx, bson.D{})
			require.NoError(t, err, "the discrete variables work too")
			assert.EqualValues(t, 1, n)
		})
		t.Run("MariaDBWithGoSQLDriver", func(t *testing.T) {
			require.NoError(t, mariadbWriteRead(ctx, env["ROBOCO_TEST_MYSQL_URL"], "host"))
			cfg := mysql.NewConfig()
			cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(env["ROBOCO_TEST_MYSQL_HOST"], env["ROBOCO_TEST_MYSQL_PORT"])
			cfg.User, cfg.Passwd, cfg.DBName = env["ROBOCO_TEST_MYSQL_USER"], env["ROBOCO_TEST_MYSQL_PASSWORD"], env["ROBOCO_TEST_MYSQL_NAME"]
			conn, err := mysql.NewConnector(cfg)
			require.NoError(t, err)
			db := sql.OpenDB(conn)
			defer db.Close()
			var n int
			require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sandboxer_t").Scan(&n), "the discrete variables work too")
			assert.Equal(t, 1, n)
		})

		start = time.Now()
		removed, err := p.Teardown(ctx, id)
		require.NoError(t, err)
		t.Logf("every engine torn down in %s", time.Since(start).Round(time.Millisecond))
		assert.Len(t, removed, len(allEngines))
		assert.Empty(t, e.Owned(ctx, p, id), "zero containers carry the owner label")
		if b.DanglingVolumes != nil {
			after, err := b.DanglingVolumes(ctx)
			require.NoError(t, err)
			var leaked []string
			for _, v := range after {
				if !slices.Contains(before, v) {
					leaked = append(leaked, v)
				}
			}
			assert.Empty(t, leaked, "provision + teardown leaves no volume behind (%d dangling before, %d after)", len(before), len(after))
		}
		again, err := p.Teardown(ctx, id)
		assert.NoError(t, err, "teardown is idempotent")
		assert.Empty(t, again)
	})
}

// Sibling mode: the sandboxes join a network and an "agent" on it, given
// only the emitted env, reaches each with its engine's own CLI.
func TestProvisionSiblingMode(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx := testkit.Context(t, 5*time.Minute)
		network := e.Network(ctx)
		var pulls atomic.Int32
		p := e.Provisioner(func(o *provision.Options) { o.Network = network; o.OnEvent = countPulls(&pulls) })
		id := e.Owner("sib")

		start := time.Now()
		sb, err := p.Provision(ctx, id, allEngines)
		require.NoError(t, err)
		t.Logf("every engine provisioned in %s (sibling mode, %d images pulled first)", time.Since(start).Round(time.Millisecond), pulls.Load())
		for _, c := range sb.Containers {
			ctr, err := b.RT.Inspect(ctx, c.ID)
			require.NoError(t, err)
			assert.Empty(t, ctr.Ports, "%s publishes nothing in sibling mode", c.Name)
			assert.Equal(t, ctr.Networks[network], c.Endpoint.Host, "%s: the address on the sibling network", c.Name)
		}

		tests := []struct {
			name   string
			image  string
			script string
			want   string
		}{
			{"Psql", e.Images["postgres"],
				`psql "$ROBOCO_TEST_DB_URL" -v ON_ERROR_STOP=1 -tA -c "create table t (v text)" -c "insert into t values ('sibling')" -q &&
				 PGPASSWORD="$ROBOCO_TEST_DB_PASSWORD" psql -h "$ROBOCO_TEST_DB_HOST" -p "$ROBOCO_TEST_DB_PORT" -U "$ROBOCO_TEST_DB_USER" -d "$ROBOCO_TEST_DB_NAME" -tA -c "select v from t"`,
				"sibling"},
			{"RedisCli", e.Images["redis"],
				// The URL as it is handed out (redis://default:PASSWORD@...),
				// then the separate variables.
				`redis-cli -u "$ROBOCO_TEST_REDIS_URL" --no-auth-warning set k sibling >/dev/null &&
				 REDISCLI_AUTH="$ROBOCO_TEST_REDIS_PASSWORD" redis-cli -h "$ROBOCO_TEST_REDIS_HOST" -p "$ROBOCO_TEST_REDIS_PORT" get k`,
				"sibling"},
			{"Mongosh", e.Images["mongo"],
				`mongosh "$ROBOCO_TEST_MONGO_URL" --quiet --eval 'db.t.insertOne({v: "sibling"}); print(db.t.findOne().v)'`,
				"sibling"},
			{"MariaDB", e.Images["mariadb"],
				// The client takes no URL: the separate variables, the
				// password in the client's env.
				`MYSQL_PWD="$ROBOCO_TEST_MYSQL_PASSWORD" mariadb --skip-ssl -h "$ROBOCO_TEST_MYSQL_HOST" -P "$ROBOCO_TEST_MYSQL_PORT" -u "$ROBOCO_TEST_MYSQL_USER" -D "$ROBOCO_TEST_MYSQL_NAME" --batch --skip-column-names -e "create table t (v text); insert into t values ('sibling'); select v from t"`,
				"sibling"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				agent, err := b.RT.Run(ctx, runtime.RunSpec{
					Name:    e.Prefix + "-agent-" + strings.ToLower(tt.name),
					Image:   tt.image,
					Command: []string{"sleep", "600"},
					Env:     sb.Map(),
					Labels:  map[string]string{e.TestLabel(): "1"},
					Network: network,
				})
				require.NoError(t, err)
				// The agent runs as root with no capability (the port's
				// confinement): mongosh keeps its state under $HOME, which
				// the mongo image sets to /data/db, mongodb's, so HOME is
				// somewhere root may write.
				res, err := b.RT.Exec(ctx, agent.ID, runtime.ExecSpec{Cmd: []string{"sh", "-c", tt.script}, Env: map[string]string{"HOME": "/tmp"}})
				require.NoError(t, err)
				assert.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
				assert.Equal(t, tt.want, strings.TrimSpace(string(res.Stdout)), "stderr: %s", res.Stderr)
			})
		}

		_, err = p.Teardown(ctx, id)
		require.NoError(t, err)
		assert.Empty(t, e.Owned(ctx, p, id))
	})
}

// Readiness never fires early: after each of many provisions in a row,
// the very first connection of a real client, without retries, succeeds,
// whether readiness was judged over the wire (the default in host mode) or
// by the exec probe (forced). SANDBOXER_READINESS_ROUNDS changes the
// number of rounds (default 20).
func TestReadinessNeverEarly(t *testing.T) {
	rounds := 20
	if v := os.Getenv("SANDBOXER_READINESS_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "SANDBOXER_READINESS_ROUNDS")
		rounds = n
	}
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		for _, mode := range []provision.Readiness{provision.ReadinessWire, provision.ReadinessExec} {
			t.Run(string(mode), func(t *testing.T) {
				e := newEnv(t, b)
				ctx := testkit.Context(t, time.Duration(rounds)*time.Minute+2*time.Minute)
				e.Warm()
				var mu sync.Mutex
				modes := map[provision.Readiness]int{}
				p := e.Provisioner(func(o *provision.Options) {
					o.Readiness = mode
					o.OnEvent = func(ev provision.Event) {
						if ev.Kind == provision.EventReady {
							mu.Lock()
							modes[ev.Readiness]++
							mu.Unlock()
						}
					}
				})
				ok := map[string]int{}
				var times []time.Duration
				began := time.Now()
				for i := range rounds {
					id := e.Owner(fmt.Sprintf("ready%d", i))
					start := time.Now()
					sb, err := p.Provision(ctx, id, allEngines)
					require.NoError(t, err, "round %d", i)
					times = append(times, time.Since(start))
					// One attempt each, no client-side retry.
					for _, c := range sb.Containers {
						if _, err := testruntimes.Login(ctx, sb, c); assert.NoError(t, err, "round %d: %s's first connection", i, c.Engine) {
							ok[c.Engine]++
						}
					}
					_, err = p.Teardown(ctx, id)
					require.NoError(t, err)
				}
				var firsts []string
				for _, svc := range allEngines {
					assert.Equal(t, rounds, ok[svc], "%s: first connections that succeeded", svc)
					firsts = append(firsts, fmt.Sprintf("%s %d/%d", svc, ok[svc], rounds))
				}
				assert.Equal(t, map[provision.Readiness]int{mode: rounds * len(allEngines)}, modes, "every sandbox judged ready %s", mode)
				t.Logf("readiness %s: %s first connections; every engine's provision %s; %d rounds with teardown in %s",
					mode, strings.Join(firsts, ", "), summary(times), rounds, time.Since(began).Round(time.Second))
			})
		}
	})
}

// A missing image for one of three services: fail-loud, nothing left.
func TestRollbackOnMissingImage(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx := testkit.Context(t, 3*time.Minute)
		registry := testenv.Getenv("SANDBOXER_REGISTRY")
		if registry == "" {
			registry = "127.0.0.1:1"
		}
		missing := registry + "/sandboxer/does-not-exist:" + testkit.RandomHex(4)
		images := maps.Clone(e.Images)
		images["mongo"] = missing
		p := e.Provisioner(func(o *provision.Options) { o.Images = images })
		id := e.Owner("noimg")

		_, err := p.Provision(ctx, id, allEngines)
		require.Error(t, err)
		t.Logf("error: %v", err)
		var pe *provision.Error
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "mongo", pe.Service)
		assert.Equal(t, "pull", pe.Stage)
		assert.Equal(t, missing, pe.Image)
		assert.ErrorIs(t, err, runtime.ErrImageNotFound)
		assert.NoError(t, pe.Rollback)
		assert.Empty(t, e.Owned(ctx, p, id), "zero containers carry the owner label")
	})
}

// wrongPasswordRedis is redis whose probe logs in with a wrong password: a
// probe that can never pass, against a real server, with a short deadline.
type wrongPasswordRedis struct{ redisengine.Engine }

func (wrongPasswordRedis) Spec() engines.Spec {
	s := redisengine.Engine{}.Spec()
	s.ReadyTimeout = 3 * time.Second
	return s
}

func (wrongPasswordRedis) Probe(ep engines.Endpoint, cred engines.Credentials) []engines.ProbeStep {
	cred.Password = "not-the-password"
	return redisengine.Engine{}.Probe(ep, cred)
}

// A probe that never passes: rollback of every sibling, and the probe's
// last output in the error.
func TestRollbackOnProbeNeverReady(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx := testkit.Context(t, 3*time.Minute)
		reg := registryWith(wrongPasswordRedis{})
		rec := &testruntimes.Recorder{ContainerRuntime: b.RT}
		// The exec probe's failure (the wire check's: TestWireCheckOfAServerThatNeverAcceptsThePassword).
		p, err := provision.New(rec, provision.Options{LabelPrefix: e.Prefix, Images: e.Images, Registry: reg, Getenv: func(string) string { return "" }, Readiness: provision.ReadinessExec})
		require.NoError(t, err)
		id := e.Owner("never")

		start := time.Now()
		_, err = p.Provision(ctx, id, allEngines)
		require.Error(t, err)
		t.Logf("failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
		var pe *provision.Error
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "redis", pe.Service)
		assert.Equal(t, "probe", pe.Stage)
		assert.ErrorIs(t, err, provision.ErrNotReady)
		assert.Regexp(t, `(?i)WRONGPASS|NOAUTH|invalid password|auth`, pe.ProbeOutput, "the probe's last output")
		assert.Contains(t, err.Error(), "last probe output: ")
		assert.NotContains(t, err.Error(), "\n", "one line")
		assert.NoError(t, pe.Rollback)
		for _, pw := range rec.Passwords() {
			assert.NotContains(t, err.Error(), pw, "no password in the error")
		}
		assert.Empty(t, e.Owned(ctx, p, id), "zero containers carry the owner label")
	})
}

// Timings, host mode: each engine alone and the allEngines, next to the
// physical floor measured in the same run: the runtime's own run of the
// same image and spec, then a real client login polled every 20 ms.
// SANDBOXER_TIMING_ROUNDS sets the repetitions (default 1); medians are
// reported.
func TestProvisionTimings(t *testing.T) {
	rounds := 1
	if v := os.Getenv("SANDBOXER_TIMING_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "SANDBOXER_TIMING_ROUNDS")
		rounds = n
	}
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx := testkit.Context(t, time.Duration(rounds)*5*time.Minute)
		e.Warm()
		p := e.Provisioner(nil)
		base := map[string][]time.Duration{}
		prov := map[string][]time.Duration{}
		for r := range rounds {
			for _, svc := range allEngines {
				d, err := e.baseline(ctx, svc, r)
				require.NoError(t, err, "baseline %s", svc)
				base[svc] = append(base[svc], d)

				id := e.Owner("time-" + svc)
				start := time.Now()
				_, err = p.Provision(ctx, id, []string{svc})
				require.NoError(t, err)
				prov[svc] = append(prov[svc], time.Since(start))
				_, err = p.Teardown(ctx, id)
				require.NoError(t, err)
			}
			id := e.Owner("time-all")
			start := time.Now()
			_, err := p.Provision(ctx, id, allEngines)
			require.NoError(t, err)
			prov["all"] = append(prov["all"], time.Since(start))
			_, err = p.Teardown(ctx, id)
			require.NoError(t, err)
		}
		var lines []string
		slowest := time.Duration(0)
		for _, svc := range allEngines {
			bm, pm := median(base[svc]), median(prov[svc])
			slowest = max(slowest, bm)
			lines = append(lines, fmt.Sprintf("%-8s baseline %7s  provision %7s  ratio %.2f", svc, bm.Round(time.Millisecond), pm.Round(time.Millisecond), float64(pm)/float64(bm)))
		}
		tm := median(prov["all"])
		lines = append(lines, fmt.Sprintf("%-8s slowest  %7s  provision %7s  ratio %.2f", "all", slowest.Round(time.Millisecond), tm.Round(time.Millisecond), float64(tm)/float64(slowest)))
		t.Logf("host mode, %s, median of %d:\n%s", b.Name, rounds, strings.Join(lines, "\n"))
	})
}

// baseline runs svc's image with the spec the provisioner would use (no
// provisioner involved) and polls a real client login from the host every
// 20 ms; it returns the time from run to the first successful login.
func (e env) baseline(ctx context.Context, svc string, round int) (time.Duration, error) {
	eng, _ := engines.Default.Lookup(svc)
	spec := eng.Spec()
	cred, err := engines.NewCredentials()
	if err != nil {
		return 0, err
	}
	cc := eng.Container(cred, engines.Limits{MemoryBytes: provision.DefaultMemoryBytes}, engines.Image{})
	start := time.Now()
	ctr, err := e.RT.Run(ctx, runtime.RunSpec{
		Name:        fmt.Sprintf("%s-baseline-%s-%d", e.Prefix, spec.Short, round),
		Image:       e.Images[svc],
		Env:         cc.Env,
		Command:     cc.Command,
		Labels:      map[string]string{e.TestLabel(): "1"},
		Tmpfs:       cc.Tmpfs,
		MemoryBytes: provision.DefaultMemoryBytes,
		CPUs:        provision.DefaultCPUs,
		Ports:       []runtime.PortSpec{{ContainerPort: spec.Port}},
		// what the provisioner's spec keeps: the entrypoint hands its
		// data to the server's user with these
		Capabilities: spec.Capabilities,
	})
	if err != nil {
		return 0, err
	}
	defer e.RT.Remove(context.WithoutCancel(ctx), ctr.ID)
	if len(ctr.Ports) == 0 {
		if ctr, err = e.RT.Inspect(ctx, ctr.ID); err != nil {
			return 0, err
		}
	}
	if len(ctr.Ports) == 0 {
		return 0, errors.New("no published port")
	}
	url, _ := engines.URLVar(eng.Env("X", engines.Endpoint{Host: "127.0.0.1", Port: ctr.Ports[0].HostPort}, cred))
	if err := bench.PollLogin(ctx, bench.Logins[svc], url.Value, spec.ReadyTimeout); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func summary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n/a"
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return fmt.Sprintf("median %s (min %s, max %s)", median(s).Round(time.Millisecond), s[0].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

func pgWriteRead(ctx context.Context, url, value string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "create table sandboxer_t (v text)"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "insert into sandboxer_t values ($1)", value); err != nil {
		return err
	}
	var got string
	if err := conn.QueryRow(ctx, "select v from sandboxer_t").Scan(&got); err != nil {
		return err
	}
	if got != value {
		return fmt.Errorf("read %q, wrote %q", got, value)
	}
	return nil
}

func redisWriteRead(ctx context.Context, url, value string) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	c := redis.NewClient(opts)
	defer c.Close()
	if err := c.Set(ctx, "sandboxer:k", value, 0).Err(); err != nil {
		return err
	}
	got, err := c.Get(ctx, "sandboxer:k").Result()
	if err != nil {
		return err
	}
	if got != value {
		return fmt.Errorf("read %q, wrote %q", got, value)
	}
	return nil
}

// mariadbWriteRead writes value and reads it back with go-sql-driver/mysql
// at the emitted URL (mariadb.Config: the driver takes a DSN of its own).
func mariadbWriteRead(ctx context.Context, url, value string) error {
	cfg, err := mariadb.Config(url)
	if err != nil {
		return err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE sandboxer_t (v TEXT)"); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO sandboxer_t VALUES (?)", value); err != nil {
		return err
	}
	var got string
	if err := db.QueryRowContext(ctx, "SELECT v FROM sandboxer_t").Scan(&got); err != nil {
		return err
	}
	if got != value {
		return fmt.Errorf("read %q, wrote %q", got, value)
	}
	return nil
}

func mongoWriteRead(ctx context.Context, url, db, value string) error {
	c, err := mongo.Connect(options.Client().ApplyURI(url))
	if err != nil {
		return err
	}
	defer c.Disconnect(context.WithoutCancel(ctx))
	coll := c.Database(db).Collection("sandboxer_t")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "v", Value: value}}); err != nil {
		return err
	}
	var got struct {
		V string `bson:"v"`
	}
	if err := coll.FindOne(ctx, bson.D{}).Decode(&got); err != nil {
		return err
	}
	if got.V != value {
		return fmt.Errorf("read %q, wrote %q", got.V, value)
	}
	return nil
}
