package sandboxtest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/mariadb"
	"github.com/roboco/sandboxer/engines/postgres/postgrestest"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/runtime/detect"
	"github.com/roboco/sandboxer/sandboxtest"
)

// parallelTests is how many parallel tests the isolation test runs at
// once (TestMain raises -test.parallel so that they all do).
const parallelTests = 100

// itemsFS is a migration set: the table every postgres test writes to.
var itemsFS = fstest.MapFS{
	"002_seed.sql":  {Data: []byte("insert into items (marker) values ('seed');")},
	"001_items.sql": {Data: []byte("create table items (marker text not null);\ncreate index on items (marker);")},
}

// client is one engine's real client, as a test under test would use it
// at its database's URL.
type client struct {
	// write stores marker in the database at rawURL.
	write func(ctx context.Context, rawURL, marker string) error
	// read lists the markers stored there.
	read func(ctx context.Context, rawURL string) ([]string, error)
	// left lists, of names, the databases still on the server at
	// serverURL (for redis: the ones still holding keys).
	left func(ctx context.Context, serverURL string, names []string) ([]string, error)
	// seeded are the markers the template holds before any test writes.
	seeded []string
}

var clients = map[string]client{
	"postgres": {
		seeded: []string{"seed"},
		write: func(ctx context.Context, rawURL, marker string) error {
			conn, err := pgx.Connect(ctx, rawURL)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, "insert into items (marker) values ($1)", marker)
			return err
		},
		read: func(ctx context.Context, rawURL string) ([]string, error) {
			conn, err := pgx.Connect(ctx, rawURL)
			if err != nil {
				return nil, err
			}
			defer conn.Close(ctx)
			rows, _ := conn.Query(ctx, "select marker from items order by marker")
			return pgx.CollectRows(rows, pgx.RowTo[string])
		},
		left: func(ctx context.Context, serverURL string, names []string) ([]string, error) {
			conn, err := pgx.Connect(ctx, serverURL)
			if err != nil {
				return nil, err
			}
			defer conn.Close(ctx)
			rows, _ := conn.Query(ctx, "select datname from pg_database where datname = any($1) order by datname", names)
			return pgx.CollectRows(rows, pgx.RowTo[string])
		},
	},
	"redis": {
		write: func(ctx context.Context, rawURL, marker string) error {
			c, err := redisClient(rawURL)
			if err != nil {
				return err
			}
			defer c.Close()
			return c.Set(ctx, "marker:"+marker, marker, 0).Err()
		},
		read: func(ctx context.Context, rawURL string) ([]string, error) {
			c, err := redisClient(rawURL)
			if err != nil {
				return nil, err
			}
			defer c.Close()
			keys, err := c.Keys(ctx, "*").Result()
			if err != nil {
				return nil, err
			}
			var out []string
			for _, k := range keys {
				v, err := c.Get(ctx, k).Result()
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			return out, nil
		},
		left: func(ctx context.Context, serverURL string, names []string) ([]string, error) {
			var out []string
			for _, n := range names {
				u, err := url.Parse(serverURL)
				if err != nil {
					return nil, err
				}
				u.Path = "/" + n
				c, err := redisClient(u.String())
				if err != nil {
					return nil, err
				}
				size, err := c.DBSize(ctx).Result()
				c.Close()
				if err != nil {
					return nil, err
				}
				if size > 0 {
					out = append(out, n)
				}
			}
			return out, nil
		},
	},
	"mongo": {
		write: func(ctx context.Context, rawURL, marker string) error {
			c, db, err := mongoClient(rawURL)
			if err != nil {
				return err
			}
			defer c.Disconnect(ctx)
			_, err = c.Database(db).Collection("items").InsertOne(ctx, bson.D{{Key: "marker", Value: marker}})
			return err
		},
		read: func(ctx context.Context, rawURL string) ([]string, error) {
			c, db, err := mongoClient(rawURL)
			if err != nil {
				return nil, err
			}
			defer c.Disconnect(ctx)
			cur, err := c.Database(db).Collection("items").Find(ctx, bson.D{})
			if err != nil {
				return nil, err
			}
			var docs []struct {
				Marker string `bson:"marker"`
			}
			if err := cur.All(ctx, &docs); err != nil {
				return nil, err
			}
			var out []string
			for _, d := range docs {
				out = append(out, d.Marker)
			}
			return out, nil
		},
		left: func(ctx context.Context, serverURL string, names []string) ([]string, error) {
			c, _, err := mongoClient(serverURL)
			if err != nil {
				return nil, err
			}
			defer c.Disconnect(ctx)
			return c.ListDatabaseNames(ctx, bson.D{{Key: "name", Value: bson.D{{Key: "$in", Value: names}}}})
		},
	},
	"mariadb": {
		write: func(ctx context.Context, rawURL, marker string) error {
			db, err := mariadbClient(rawURL)
			if err != nil {
				return err
			}
			defer db.Close()
			if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS items (marker TEXT NOT NULL)"); err != nil {
				return err
			}
			_, err = db.ExecContext(ctx, "INSERT INTO items (marker) VALUES (?)", marker)
			return err
		},
		read: func(ctx context.Context, rawURL string) ([]string, error) {
			db, err := mariadbClient(rawURL)
			if err != nil {
				return nil, err
			}
			defer db.Close()
			return mariadbStrings(ctx, db, "SELECT marker FROM items ORDER BY marker")
		},
		left: func(ctx context.Context, serverURL string, names []string) ([]string, error) {
			db, err := mariadbClient(serverURL)
			if err != nil {
				return nil, err
			}
			defer db.Close()
			var out []string
			for _, n := range names {
				got, err := mariadbStrings(ctx, db, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", n)
				if err != nil {
					return nil, err
				}
				out = append(out, got...)
			}
			return out, nil
		},
	},
}

// mariadbClient opens rawURL with go-sql-driver/mysql.
func mariadbClient(rawURL string) (*sql.DB, error) {
	cfg, err := mariadb.Config(rawURL)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// mariadbStrings is the one column of query's rows.
func mariadbStrings(ctx context.Context, db *sql.DB, query string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func redisClient(rawURL string) (*redis.Client, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(opts), nil
}

// mongoClient connects to rawURL and names the database in its path.
func mongoClient(rawURL string) (*mongo.Client, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", err
	}
	c, err := mongo.Connect(options.Client().ApplyURI(rawURL))
	return c, u.Path[1:], err
}

// serverURL is rawURL at the server's own database: where a client looks
// at every test's database from outside.
func serverURL(t testing.TB, engine, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	u.Path = map[string]string{"postgres": "/postgres", "redis": "/0", "mongo": "/admin", "mariadb": ""}[engine]
	return u.String()
}

// dbOptions pin the shared sandboxes to r under a label prefix of the
// test's own (a shared sandbox of its own, which no other test sees). When
// the test ends, after its databases' release, sandboxtest.Close tears
// the shared sandboxes down, as Main does when a binary's tests end (the
// top-level tests of this package run one at a time): the runtime lists
// none of the test's prefix afterwards. What a failed run leaves behind
// is removed by label.
func dbOptions(t *testing.T, r testruntimes.Runtime, engine string) sandboxtest.DBOptions {
	t.Helper()
	testenv.Image(t, r.Name, engine)
	prefix := "sbt" + testkit.RandomHex(4)
	sel := map[string]string{prefix + ".sandbox": "1"}
	testkit.CleanupLabelled(t, r.RT, sel)
	t.Cleanup(func() {
		require.NoError(t, sandboxtest.Close())
		got, err := r.RT.List(testkit.Context(t, 30*time.Second), sel)
		require.NoError(t, err)
		assert.Empty(t, testkit.Names(got), "Close tore the shared sandbox down")
	})
	// The runtime as the test reached it (on the rootless row, the user's
	// socket with the limits opt-out). The daemons are shared with other
	// packages' tests: a ping may take longer than detection's default.
	dopts := r.Detect
	dopts.PingTimeout = 15 * time.Second
	return sandboxtest.DBOptions{
		Options:    sandboxtest.Options{LabelPrefix: prefix, Detect: dopts},
		Migrations: sandboxtest.MigrateFS(itemsFS),
	}
}

// TestParallelTestsGetDatabasesOfTheirOwn: 100 parallel tests, all
// holding their database at once, each write a marker and read back only
// their own (and the template's seed), with the engine's real client; 100
// distinct databases were handed out; once the tests end every one is
// gone (redis: flushed), seen by a client of the server's own.
func TestParallelTestsGetDatabasesOfTheirOwn(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, r testruntimes.Runtime) {
		for _, engine := range engines.Default.Names() {
			t.Run(engine, func(t *testing.T) {
				cl, ok := clients[engine]
				require.True(t, ok, "no client to check %s's databases with", engine)
				opts := dbOptions(t, r, engine)
				var (
					mu     sync.Mutex
					names  = map[string]string{} // database -> test
					server string
				)
				all := make(chan struct{})
				var arrived sync.WaitGroup
				arrived.Add(parallelTests)
				go func() { arrived.Wait(); close(all) }()
				t.Run("Tests", func(t *testing.T) {
					for i := range parallelTests {
						t.Run(fmt.Sprint(i), func(t *testing.T) {
							t.Parallel()
							var once sync.Once
							defer once.Do(arrived.Done) // a failed test still lets the others go on
							ctx := testkit.Context(t, 2*time.Minute)
							db := sandboxtest.NewDB(t, engine, opts)
							assert.Equal(t, engine, db.Engine)
							require.NoError(t, cl.write(ctx, db.URL, t.Name()))
							once.Do(arrived.Done)
							select {
							case <-all:
							case <-ctx.Done():
								t.Fatal("the other tests never all held their database")
							}
							got, err := cl.read(ctx, db.URL)
							require.NoError(t, err)
							assert.ElementsMatch(t, append([]string{t.Name()}, cl.seeded...), got, "only its own rows")
							mu.Lock()
							defer mu.Unlock()
							assert.NotContains(t, names, db.Name, "handed out twice at once")
							names[db.Name] = t.Name()
							server = serverURL(t, engine, db.URL)
						})
					}
				})
				require.Len(t, names, parallelTests, "distinct databases")
				var handed []string
				for n := range names {
					handed = append(handed, n)
				}
				testkit.Poll(t, time.Minute, 100*time.Millisecond, func() error {
					left, err := cl.left(testkit.Context(t, 30*time.Second), server, handed)
					require.NoError(t, err)
					if len(left) > 0 {
						return fmt.Errorf("%d databases left: %v", len(left), left)
					}
					return nil
				}, "every test's database released when it ended")
			})
		}
	})
}

// TestDBEnvAndOwner: a per-test database comes with its engine's env for
// that database, and the shared sandbox it lives on is owned by the test
// process (a sweep with no grace keeps it), named as a sandbox of its own.
func TestDBEnvAndOwner(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, r testruntimes.Runtime) {
		opts := dbOptions(t, r, "postgres")
		db := sandboxtest.NewDB(t, "postgres", opts)
		assert.Equal(t, r.RT.Name(), db.Runtime, "the adapter it runs on")
		assert.Equal(t, db.Name, db.Getenv("ROBOCO_TEST_DB_NAME"))
		assert.Equal(t, db.URL, db.Getenv("ROBOCO_TEST_DB_URL"))
		assert.Equal(t, "sandbox", db.Getenv("ROBOCO_TEST_DB_USER"))
		u, err := url.Parse(db.URL)
		require.NoError(t, err)
		assert.Equal(t, "/"+db.Name, u.Path)
		assert.Equal(t, u.Hostname(), db.Getenv("ROBOCO_TEST_DB_HOST"))

		other := sandboxtest.NewDB(t, "postgres", opts)
		assert.NotEqual(t, db.Name, other.Name)
		assert.Equal(t, db.Container, other.Container, "one shared sandbox")

		ctx := testkit.Context(t, time.Minute)
		got, err := r.RT.List(ctx, labels.For(opts.LabelPrefix).Sandboxes())
		require.NoError(t, err)
		require.Len(t, got, 1, "one container for both databases")
		assert.Equal(t, db.Container, got[0].Name)
		j, err := janitor.New(r.RT, janitor.Options{Prefix: opts.LabelPrefix, NoGrace: true})
		require.NoError(t, err)
		rep, err := j.Sweep(ctx)
		require.NoError(t, err)
		assert.Empty(t, rep.Removed, "a live test process owns it: %s", rep)
	})
}

// TestRedisAndMongoURLs: redis hands out /N of a logical database other
// than 0; mongo's URL authenticates against admin.
func TestRedisAndMongoURLs(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, r testruntimes.Runtime) {
		t.Run("redis", func(t *testing.T) {
			rd := sandboxtest.NewDB(t, "redis", dbOptions(t, r, "redis"))
			assert.Regexp(t, `^redis://default:[0-9a-f]{32}@127\.0\.0\.1:\d+/([1-9]\d*)$`, rd.URL)
			assert.Equal(t, "/"+rd.Name, must(url.Parse(rd.URL)).Path)
		})
		t.Run("mongo", func(t *testing.T) {
			mg := sandboxtest.NewDB(t, "mongo", dbOptions(t, r, "mongo"))
			u := must(url.Parse(mg.URL))
			assert.Equal(t, "admin", u.Query().Get("authSource"))
			assert.Equal(t, "/"+mg.Name, u.Path)
			assert.Equal(t, mg.Name, mg.Getenv("ROBOCO_TEST_MONGO_DB"))
			_, err := engines.Default.Login(testkit.Context(t, time.Minute), "mongo", mg.URL)
			assert.NoError(t, err, "mongo-driver logs in at the database's URL")
		})
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// onDockerDB is dbOptions on Docker alone, for what no runtime changes.
func onDockerDB(t *testing.T, engine string) sandboxtest.DBOptions {
	t.Helper()
	return dbOptions(t, testruntimes.Connect(t, "docker"), engine)
}

// TestTemplateBuiltOncePerMigrationSet: parallel first tests of one
// migration set wait for one build; another set (here: another version)
// gets a template of its own; every database has its set's tables.
func TestTemplateBuiltOncePerMigrationSet(t *testing.T) {
	opts := onDockerDB(t, "postgres")
	var builds sync.Map // version -> *atomic.Int64
	migrate := func(version string) sandboxtest.Migrations {
		n, _ := builds.LoadOrStore(version, new(atomic.Int64))
		return sandboxtest.MigrateFunc(version, func(ctx context.Context, rawURL string) error {
			n.(*atomic.Int64).Add(1)
			conn, err := pgx.Connect(ctx, rawURL)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, "create table "+pgx.Identifier{"v" + version}.Sanitize()+" (id int)")
			return err
		})
	}
	t.Run("Tests", func(t *testing.T) {
		for i := range 20 {
			version := fmt.Sprint(i % 2)
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				o := opts
				o.Migrations = migrate(version)
				db := sandboxtest.NewDB(t, "postgres", o)
				ctx := testkit.Context(t, time.Minute)
				conn, err := pgx.Connect(ctx, db.URL)
				require.NoError(t, err)
				defer conn.Close(ctx)
				var tables []string
				rows, _ := conn.Query(ctx, "select tablename from pg_tables where schemaname = 'public'")
				tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
				require.NoError(t, err)
				assert.Equal(t, []string{"v" + version}, tables, "its own set's template")
			})
		}
	})
	for _, v := range []string{"0", "1"} {
		n, ok := builds.Load(v)
		require.True(t, ok)
		assert.Equal(t, int64(1), n.(*atomic.Int64).Load(), "set %s built once", v)
	}

	// .sql files: the same content read twice is one template, a changed
	// file another; psql in the container counts them.
	changed := fstest.MapFS{"001_items.sql": itemsFS["001_items.sql"], "002_seed.sql": {Data: []byte("insert into items (marker) values ('other');")}}
	for _, fsys := range []fstest.MapFS{itemsFS, maps.Clone(itemsFS), changed} {
		o := opts
		o.Migrations = sandboxtest.MigrateFS(fsys)
		sandboxtest.NewDB(t, "postgres", o)
	}
	db := sandboxtest.NewDB(t, "postgres", opts)
	out, err := exec.Command("docker", "exec", db.Container, "psql", "-U", "sandbox", "-d", "postgres", "-tA",
		"-c", "select count(*) from pg_database where datistemplate and datname like 'tpl%'").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "4", strings.TrimSpace(string(out)), "two function sets, two file sets")
}

// TestPoolAndStrategyChoices: with the pool or without, and with either
// CREATE DATABASE strategy, a test gets a migrated database of its own;
// a bad strategy fails with a clear error before anything starts.
func TestPoolAndStrategyChoices(t *testing.T) {
	base := onDockerDB(t, "postgres")
	tests := []struct {
		name     string
		pool     int
		strategy string
	}{
		{"PoolDefaultStrategy", 0, ""},
		{"PoolWALLog", 2, postgrestest.StrategyWALLog},
		{"NoPoolFileCopy", -1, postgrestest.StrategyFileCopy},
		{"NoPoolWALLog", -1, postgrestest.StrategyWALLog},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base
			o.Pool, o.Strategy = tt.pool, tt.strategy
			db := sandboxtest.NewDB(t, "postgres", o)
			got, err := clients["postgres"].read(testkit.Context(t, time.Minute), db.URL)
			require.NoError(t, err)
			assert.Equal(t, []string{"seed"}, got)
		})
	}
}

// envKeepChild, set to a label prefix, makes TestKeptOnFailure its own
// child: a test that fails holding a postgres database it asked to keep.
const envKeepChild = "SANDBOXTEST_KEEP_CHILD"

// TestKeptOnFailure: a failed test's database is kept when asked for, its
// name printed, and the shared sandbox that holds it outlives the test
// binary (Main says so); the database is still there, seen by psql inside
// that container. It runs itself in a child test binary, as the child.
func TestKeptOnFailure(t *testing.T) {
	if prefix, ok := os.LookupEnv(envKeepChild); ok {
		opts := sandboxtest.DBOptions{
			Options:       sandboxtest.Options{LabelPrefix: prefix, Detect: detect.Options{Runtime: "docker"}},
			Migrations:    sandboxtest.MigrateFS(itemsFS),
			KeepOnFailure: true,
		}
		db := sandboxtest.NewDB(t, "postgres", opts)
		fmt.Printf("database=%s\n", db.Name)
		t.Fatal("failing on purpose")
	}
	opts, _ := onDocker(t, "postgres") // the child's shared sandbox is removed by label
	const self = "TestKeptOnFailure"
	cmd := exec.Command(os.Args[0], "-test.run=^"+self+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envKeepChild+"="+opts.LabelPrefix)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "the child failed: %v\n%s", err, out)
	m := regexp.MustCompile(`(?m)^database=(\S+)$`).FindSubmatch(out)
	require.NotNil(t, m, "%s", out)
	name := string(m[1])
	assert.Contains(t, string(out), fmt.Sprintf("kept postgres database %q", name))
	assert.Contains(t, string(out), "stays, with the databases kept for failed tests")

	ps, err := exec.Command("docker", "ps", "-q", "--filter", "label="+opts.LabelPrefix+".sandbox=1").Output()
	require.NoError(t, err)
	ids := strings.Fields(string(ps))
	require.Len(t, ids, 1, "the shared sandbox outlived the child")
	count, err := exec.Command("docker", "exec", ids[0], "psql", "-U", "sandbox", "-d", "postgres", "-tA",
		"-c", "select count(*) from pg_database where datname = '"+name+"'").CombinedOutput()
	require.NoError(t, err, "%s", count)
	assert.Equal(t, "1", strings.TrimSpace(string(count)), "the kept database is still there")
}

// TestBadDBOptionsFailBeforeAnythingStarts: an unknown engine or a bad
// strategy fails the test with a clear error, and no runtime is asked
// for anything (none is even detected: the options name none that
// exists).
func TestBadDBOptionsFailBeforeAnythingStarts(t *testing.T) {
	nowhere := sandboxtest.Options{Detect: detect.Options{Runtime: "nowhere"}}
	tests := []struct {
		name, engine string
		opts         sandboxtest.DBOptions
		want         string
	}{
		{"UnknownEngine", "mysql", sandboxtest.DBOptions{Options: nowhere}, `unknown engine "mysql"`},
		{"BadStrategy", "postgres", sandboxtest.DBOptions{Options: nowhere, Strategy: "COPY"}, `strategy "COPY": want WAL_LOG or FILE_COPY`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &failures{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				sandboxtest.NewDB(rec, tt.engine, tt.opts)
				t.Error("NewDB returned")
			}()
			<-done
			require.Len(t, rec.msgs, 1)
			assert.Contains(t, rec.msgs[0], tt.want)
		})
	}
}

// failures is a test whose Fatalf is recorded and ends only the
// goroutine that called it.
type failures struct {
	testing.TB
	msgs []string
}

func (f *failures) Fatalf(format string, a ...any) {
	f.msgs = append(f.msgs, fmt.Sprintf(format, a...))
	goruntime.Goexit()
}

// envMainChild, set to a label prefix, makes TestMainTearsDownTheSharedSandbox
// its own child: a passing test holding a redis database.
const envMainChild = "SANDBOXTEST_MAIN_CHILD"

// TestMainTearsDownTheSharedSandbox: a test binary run through
// sandboxtest.Main (this package's TestMain) removes its shared sandboxes
// when its tests end; docker lists none of them after the child exits.
func TestMainTearsDownTheSharedSandbox(t *testing.T) {
	if prefix, ok := os.LookupEnv(envMainChild); ok {
		db := sandboxtest.NewDB(t, "redis", sandboxtest.DBOptions{
			Options: sandboxtest.Options{LabelPrefix: prefix, Detect: detect.Options{Runtime: "docker"}},
		})
		fmt.Printf("container=%s\n", db.Container)
		return
	}
	opts, _ := onDocker(t, "redis") // what a failed child leaves is removed by label
	const self = "TestMainTearsDownTheSharedSandbox"
	cmd := exec.Command(os.Args[0], "-test.run=^"+self+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envMainChild+"="+opts.LabelPrefix)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := regexp.MustCompile(`(?m)^container=(\S+)$`).FindSubmatch(out)
	require.NotNil(t, m, "%s", out)
	ps, err := exec.Command("docker", "ps", "-a", "--format", "{{.Names}}", "--filter", "label="+opts.LabelPrefix+".sandbox=1").Output()
	require.NoError(t, err)
	assert.Empty(t, strings.TrimSpace(string(ps)), "Main removed %s when the child's tests ended", m[1])
}
