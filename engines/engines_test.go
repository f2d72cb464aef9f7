package engines_test

import (
	"fmt"
	"maps"
	"net/url"
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
	_ "github.com/roboco/sandboxer/engines/all"
	"github.com/roboco/sandboxer/engines/mongo"
	"github.com/roboco/sandboxer/engines/postgres"
	"github.com/roboco/sandboxer/engines/redis"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// enginePackages are the names of the engines whose packages live under
// engines/ (engines/<name>, the package that calls engines.Register):
// the list engines/all must link, read from the tree rather than kept by
// hand.
func enginePackages(t *testing.T) []string {
	t.Helper()
	dirs, err := os.ReadDir(".")
	require.NoError(t, err)
	var names []string
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		files, err := filepath.Glob(filepath.Join(d.Name(), "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			if !strings.HasSuffix(f, "_test.go") && strings.Contains(string(src), "engines.Register(") {
				names = append(names, d.Name())
				break
			}
		}
	}
	require.NotEmpty(t, names)
	return names
}

// TestDefaultRegistry: engines/all links every engine package of the
// tree, each registered under its directory's name (engines.Import), in
// report order; and the engines' static descriptions (an engine added
// later checks its own in its package's tests).
func TestDefaultRegistry(t *testing.T) {
	assert.ElementsMatch(t, enginePackages(t), engines.Default.Names(), "engines/all links every engine under engines/, each under its directory's name")
	for i, e := range engines.Default.All() {
		if i > 0 {
			assert.Less(t, engines.Default.All()[i-1].Spec().Order, e.Spec().Order, "report order")
		}
	}
	tests := []struct {
		name    string
		short   string
		image   string
		port    int
		tmpfs   []string
		timeout time.Duration
	}{
		{"postgres", "pg", "postgres:16-alpine", 5432, []string{"/var/lib/postgresql/data", "/var/lib/sandboxer/wal", "/var/lib/sandboxer/tablespace"}, 60 * time.Second},
		{"redis", "redis", "redis:8-alpine", 6379, []string{"/data"}, 15 * time.Second},
		{"mongo", "mongo", "mongo:8", 27017, []string{"/data/db", "/data/configdb"}, 60 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := engines.Default.Lookup(tt.name)
			require.True(t, ok)
			s := e.Spec()
			assert.Equal(t, tt.short, s.Short)
			assert.Equal(t, tt.image, s.Image)
			assert.Equal(t, tt.port, s.Port)
			assert.Equal(t, tt.tmpfs, s.Tmpfs)
			assert.Equal(t, tt.timeout, s.ReadyTimeout)
		})
	}
}

func TestEnvNamesAndValues(t *testing.T) {
	cred := engines.Credentials{User: "sandbox", Password: "0123456789abcdef0123456789abcdef", Database: "sandbox"}
	ep := engines.Endpoint{Host: "10.1.2.3", Port: 5555}
	tests := []struct {
		engine string
		want   [][2]string
	}{
		{"postgres", [][2]string{
			{"ROBOCO_TEST_DB_HOST", "10.1.2.3"},
			{"ROBOCO_TEST_DB_PORT", "5555"},
			{"ROBOCO_TEST_DB_USER", "sandbox"},
			{"ROBOCO_TEST_DB_PASSWORD", cred.Password},
			{"ROBOCO_TEST_DB_NAME", "sandbox"},
			{"ROBOCO_TEST_DB_ADMIN_DB", "postgres"},
			{"ROBOCO_TEST_DB_URL", "postgres://sandbox:" + cred.Password + "@10.1.2.3:5555/sandbox?sslmode=disable"},
		}},
		{"redis", [][2]string{
			{"ROBOCO_TEST_REDIS_HOST", "10.1.2.3"},
			{"ROBOCO_TEST_REDIS_PORT", "5555"},
			{"ROBOCO_TEST_REDIS_PASSWORD", cred.Password},
			{"ROBOCO_TEST_REDIS_URL", "redis://default:" + cred.Password + "@10.1.2.3:5555/0"},
		}},
		{"mongo", [][2]string{
			{"ROBOCO_TEST_MONGO_HOST", "10.1.2.3"},
			{"ROBOCO_TEST_MONGO_PORT", "5555"},
			{"ROBOCO_TEST_MONGO_USER", "sandbox"},
			{"ROBOCO_TEST_MONGO_PASSWORD", cred.Password},
			{"ROBOCO_TEST_MONGO_DB", "sandbox"},
			{"ROBOCO_TEST_MONGO_AUTH_DB", "admin"},
			{"ROBOCO_TEST_MONGO_URL", "mongodb://sandbox:" + cred.Password + "@10.1.2.3:5555/sandbox?authSource=admin"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.engine, func(t *testing.T) {
			e, _ := engines.Default.Lookup(tt.engine)
			env := e.Env("ROBOCO_TEST", ep, cred)
			got := make([][2]string, len(env))
			for i, v := range env {
				got[i] = [2]string{v.Name, v.Value}
				assert.Equal(t, strings.Contains(v.Value, cred.Password), v.Secret, "%s: Secret marks exactly the values holding the password", v.Name)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestURLsEscape(t *testing.T) {
	cred := engines.Credentials{User: "us@er:x", Password: "p@ss:w/rd?#%&", Database: "d b"}
	tests := []struct {
		engine string
		ep     engines.Endpoint
	}{
		{"postgres", engines.Endpoint{Host: "10.0.0.1", Port: 5432}},
		{"redis", engines.Endpoint{Host: "fd00::1", Port: 6379}},
		{"mongo", engines.Endpoint{Host: "fd00::2", Port: 27017}},
	}
	for _, tt := range tests {
		t.Run(tt.engine, func(t *testing.T) {
			e, _ := engines.Default.Lookup(tt.engine)
			var raw string
			for _, v := range e.Env("P", tt.ep, cred) {
				if strings.HasSuffix(v.Name, "_URL") {
					raw = v.Value
				}
			}
			require.NotEmpty(t, raw)
			u, err := url.Parse(raw)
			require.NoError(t, err)
			pw, _ := u.User.Password()
			assert.Equal(t, cred.Password, pw, "the password survives a parse")
			assert.Equal(t, tt.ep.Host, u.Hostname())
			if tt.engine != "redis" {
				assert.Equal(t, cred.User, u.User.Username())
				assert.Equal(t, "/"+cred.Database, u.Path)
			}
		})
	}
}

func TestContainerDefaults(t *testing.T) {
	cred := engines.Credentials{User: "sandbox", Password: "pw", Database: "sandbox"}
	tests := []struct {
		engine  string
		env     map[string]string
		command []string // after the sh -c script, where there is one
		tmpfs   map[string]string
	}{
		{"postgres",
			map[string]string{"POSTGRES_USER": "sandbox", "POSTGRES_PASSWORD": "pw", "POSTGRES_DB": "sandbox",
				"POSTGRES_INITDB_WALDIR": "/var/lib/sandboxer/wal", "PGDATA": "/var/lib/postgresql/data"},
			[]string{"sandboxer-postgres", "postgres", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
				"-c", "wal_level=minimal", "-c", "max_wal_senders=0", "-c", "wal_skip_threshold=0", "-c", "jit=off"},
			map[string]string{"/var/lib/postgresql/data": "", "/var/lib/sandboxer/wal": "", "/var/lib/sandboxer/tablespace": ""}},
		{"redis", map[string]string{"REDIS_PASSWORD": "pw"},
			[]string{"redis-server", "--save", "", "--appendonly", "no"},
			map[string]string{"/data": ""}},
		{"mongo", map[string]string{"MONGO_INITDB_ROOT_USERNAME": "sandbox", "MONGO_INITDB_ROOT_PASSWORD": "pw"}, nil,
			map[string]string{"/data/db": "", "/data/configdb": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.engine, func(t *testing.T) {
			e, _ := engines.Default.Lookup(tt.engine)
			c := e.Container(cred, engines.Limits{}, engines.Image{})
			assert.Equal(t, tt.env, c.Env)
			assert.Equal(t, tt.command, afterScript(c.Command))
			assert.Equal(t, tt.tmpfs, c.Tmpfs, "no limit: no bound")
		})
	}
}

// afterScript is argv without a leading `sh -c SCRIPT`.
func afterScript(argv []string) []string {
	if len(argv) >= 3 && argv[0] == "sh" && argv[1] == "-c" {
		return argv[3:]
	}
	return argv
}

// TestContainerBudget: within a memory limit every tmpfs is bounded, the
// bounds and the servers' own memory settings sum to less than the limit,
// and they follow the limit.
func TestContainerBudget(t *testing.T) {
	cred := engines.Credentials{User: "sandbox", Password: "0123456789abcdef0123456789abcdef", Database: "sandbox"}
	const mib = 1 << 20
	tests := []struct {
		engine string
		limit  int64
		tmpfs  map[string]string
		args   []string // server settings the budget sets, in argv
	}{
		{"postgres", 512 * mib,
			map[string]string{"/var/lib/postgresql/data": "size=50331648", "/var/lib/sandboxer/wal": "size=100663296", "/var/lib/sandboxer/tablespace": "size=201326592"},
			[]string{"-c", "shared_buffers=32MB", "-c", "maintenance_work_mem=32MB", "-c", "work_mem=4MB", "-c", "max_wal_size=32MB", "-c", "min_wal_size=32MB"}},
		{"postgres", 2048 * mib,
			map[string]string{"/var/lib/postgresql/data": "size=134217728", "/var/lib/sandboxer/wal": "size=402653184", "/var/lib/sandboxer/tablespace": "size=805306368"},
			[]string{"-c", "shared_buffers=128MB", "-c", "maintenance_work_mem=128MB", "-c", "work_mem=16MB", "-c", "max_wal_size=96MB", "-c", "min_wal_size=32MB"}},
		{"redis", 512 * mib, map[string]string{"/data": "size=16777216"},
			[]string{"--maxmemory", "256mb", "--maxmemory-policy", "noeviction"}},
		{"redis", 2048 * mib, map[string]string{"/data": "size=67108864"},
			[]string{"--maxmemory", "1024mb", "--maxmemory-policy", "noeviction"}},
		{"mongo", 512 * mib, map[string]string{"/data/db": "size=134217728", "/data/configdb": "size=8388608"},
			[]string{"--wiredTigerCacheSizeGB", "0.25"}},
		{"mongo", 4096 * mib, map[string]string{"/data/db": "size=1073741824", "/data/configdb": "size=67108864"},
			[]string{"--wiredTigerCacheSizeGB", "1.00"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%dMiB", tt.engine, tt.limit/mib), func(t *testing.T) {
			e, _ := engines.Default.Lookup(tt.engine)
			c := e.Container(cred, engines.Limits{MemoryBytes: tt.limit}, engines.Image{})
			assert.Equal(t, tt.tmpfs, c.Tmpfs)
			assert.Equal(t, slices.Sorted(maps.Keys(c.Tmpfs)), slices.Sorted(slices.Values(e.Spec().Tmpfs)), "every tmpfs of the spec has its options")
			argv := strings.Join(c.Command, " ")
			assert.Contains(t, argv, strings.Join(tt.args, " "))
			assert.NotContains(t, argv, cred.Password, "no password in argv")
			sum := testkit.TmpfsBytes(t, c.Tmpfs)
			assert.Less(t, sum, tt.limit*3/4, "the tmpfs bounds leave headroom for the server")
		})
	}
}

// TestContainerFollowsTheImage: where the image keeps its data (its
// config's PGDATA and VOLUMEs) is where the tmpfs go, each bounded, with
// PGDATA set to the image's own; an image whose config is not known (no
// image store) gets a layout every official postgres image accepts.
func TestContainerFollowsTheImage(t *testing.T) {
	const mib = 1 << 20
	cred := engines.Credentials{User: "sandbox", Password: "pw", Database: "sandbox"}
	image := func(pgdata string, volumes ...string) engines.Image {
		img, err := engines.ImageOf("pg", runtime.ImageConfig{Env: []string{"PATH=/usr/bin", "PGDATA=" + pgdata}, Volumes: volumes})
		require.NoError(t, err)
		return img
	}
	tests := []struct {
		name   string
		engine string
		img    engines.Image
		pgdata string // "": not postgres
		tmpfs  map[string]string
	}{
		{"postgres16", "postgres", image("/var/lib/postgresql/data", "/var/lib/postgresql/data"), "/var/lib/postgresql/data",
			map[string]string{"/var/lib/postgresql/data": "size=50331648", "/var/lib/sandboxer/wal": "size=100663296", "/var/lib/sandboxer/tablespace": "size=201326592"}},
		{"postgres18", "postgres", image("/var/lib/postgresql/18/docker", "/var/lib/postgresql"), "/var/lib/postgresql/18/docker",
			map[string]string{"/var/lib/postgresql": "size=50331648", "/var/lib/sandboxer/wal": "size=100663296", "/var/lib/sandboxer/tablespace": "size=201326592"}},
		{"PGDATAOnNoVolume", "postgres", image("/pg/data", "/var/lib/postgresql", "/etc/extra"), "/pg/data",
			map[string]string{"/pg/data": "size=50331648", "/var/lib/postgresql": "size=4194304", "/etc/extra": "size=4194304",
				"/var/lib/sandboxer/wal": "size=100663296", "/var/lib/sandboxer/tablespace": "size=201326592"}},
		{"postgresUnknownImage", "postgres", engines.Image{}, "/var/lib/postgresql/data",
			map[string]string{"/var/lib/postgresql/data": "size=50331648", "/var/lib/sandboxer/wal": "size=100663296", "/var/lib/sandboxer/tablespace": "size=201326592"}},
		{"redisExtraVolume", "redis", known(t, runtime.ImageConfig{Volumes: []string{"/data", "/etc/redis"}}), "",
			map[string]string{"/data": "size=16777216", "/etc/redis": "size=4194304"}},
		{"mongoNoVolumes", "mongo", known(t, runtime.ImageConfig{}), "",
			map[string]string{"/data/db": "size=134217728", "/data/configdb": "size=8388608"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := engines.Default.Lookup(tt.engine)
			c := e.Container(cred, engines.Limits{MemoryBytes: 512 * mib}, tt.img)
			assert.Equal(t, tt.tmpfs, c.Tmpfs)
			if tt.pgdata != "" {
				assert.Equal(t, tt.pgdata, c.Env["PGDATA"])
			}
			for _, v := range tt.img.Config.Volumes {
				assert.Contains(t, c.Tmpfs, v, "every VOLUME of the image gets a tmpfs")
			}
			for p, o := range c.Tmpfs {
				assert.True(t, strings.HasPrefix(o, "size="), "%s is bounded", p)
			}
		})
	}
}

func TestProbes(t *testing.T) {
	cred := engines.Credentials{User: "sandbox", Password: "s3cr3tpassw0rd", Database: "sandbox"}
	ep := engines.Endpoint{Host: "172.18.0.5", Port: 1234}
	tests := []struct {
		engine string
		argv0  []string
		pass   []runtime.ExecResult // one per step, all passing
		fail   []runtime.ExecResult // per step, a failing answer
	}{
		{"postgres", []string{"pg_isready", "psql"},
			[]runtime.ExecResult{{}, {Stdout: []byte("1\n")}},
			[]runtime.ExecResult{{ExitCode: 2}, {ExitCode: 2, Stderr: []byte("password authentication failed")}}},
		{"redis", []string{"redis-cli"},
			[]runtime.ExecResult{{Stdout: []byte("PONG\n")}},
			[]runtime.ExecResult{{Stdout: []byte("NOAUTH Authentication required.\n")}}},
		{"mongo", []string{"mongosh"},
			[]runtime.ExecResult{{Stdout: []byte("1\n")}},
			[]runtime.ExecResult{{ExitCode: 1, Stderr: []byte("MongoServerSelectionError: connect ECONNREFUSED")}}},
	}
	for _, tt := range tests {
		t.Run(tt.engine, func(t *testing.T) {
			e, _ := engines.Default.Lookup(tt.engine)
			steps := e.Probe(ep, cred)
			require.Len(t, steps, len(tt.argv0))
			for i, st := range steps {
				assert.Equal(t, tt.argv0[i], st.Cmd[0])
				assert.Contains(t, strings.Join(st.Cmd, " ")+" "+envValues(st.Env), ep.Host, "the probe targets the given address")
				assert.NotContains(t, strings.Join(st.Cmd, " "), cred.Password, "no password in argv")
				assert.NotContains(t, st.Cmd, "127.0.0.1")
				assert.NotContains(t, st.Cmd, "localhost")
				assert.NoError(t, st.Check(tt.pass[i]))
				assert.Error(t, st.Check(tt.fail[i]))
			}
		})
	}
}

func envValues(m map[string]string) string {
	var b strings.Builder
	for _, v := range m {
		b.WriteString(v + " ")
	}
	return b.String()
}

func TestCredentials(t *testing.T) {
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for range 50 {
		c, err := engines.NewCredentials()
		require.NoError(t, err)
		assert.Equal(t, "sandbox", c.User)
		assert.Equal(t, "sandbox", c.Database)
		assert.Regexp(t, hex32, c.Password)
		assert.False(t, seen[c.Password], "passwords repeat")
		seen[c.Password] = true
	}
}

// fakeEngine is a minimal engine for registry tests.
type fakeEngine struct{ spec engines.Spec }

func (f fakeEngine) Spec() engines.Spec { return f.spec }
func (fakeEngine) Container(engines.Credentials, engines.Limits, engines.Image) engines.Container {
	return engines.Container{}
}
func (fakeEngine) Probe(engines.Endpoint, engines.Credentials) []engines.ProbeStep {
	return nil
}
func (fakeEngine) Env(string, engines.Endpoint, engines.Credentials) []engines.EnvVar { return nil }

func TestRegister(t *testing.T) {
	ok := engines.Spec{Name: "kv", Short: "kv", Order: 40, Image: "kv:1", Port: 1, ReadyTimeout: time.Second}
	with := func(f func(*engines.Spec)) engines.Spec { s := ok; f(&s); return s }
	tests := []struct {
		name    string
		spec    engines.Spec
		wantErr string
	}{
		{"Valid", ok, ""},
		{"BadName", with(func(s *engines.Spec) { s.Name = "K V" }), "name must be"},
		{"EmptyShort", with(func(s *engines.Spec) { s.Short = "" }), "short name"},
		{"NoImage", with(func(s *engines.Spec) { s.Image = "" }), "no default image"},
		{"BadPort", with(func(s *engines.Spec) { s.Port = 70000 }), "out of range"},
		{"NoTimeout", with(func(s *engines.Spec) { s.ReadyTimeout = 0 }), "ready timeout"},
		{"DuplicateName", with(func(s *engines.Spec) { s.Name = "redis"; s.Short = "r2" }), "already registered"},
		{"DuplicateShort", with(func(s *engines.Spec) { s.Short = "pg" }), "already used by postgres"},
		{"NoOrder", with(func(s *engines.Spec) { s.Order = 0 }), "order 0 is not positive"},
		{"DuplicateOrder", with(func(s *engines.Spec) { s.Order = redis.Order }), "order 20 already used by redis"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := engines.NewRegistry(postgres.Engine{}, redis.Engine{}, fakeEngine{tt.spec})
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
	reg := engines.MustRegistry(fakeEngine{ok}, mongo.Engine{})
	assert.Equal(t, []string{"mongo", "kv"}, reg.Names(), "report order, not registration order")
	assert.Equal(t, 1, reg.Index("kv"))
	assert.Equal(t, -1, reg.Index("postgres"))
}

// TestReportOrderIsNotImportOrder: whatever order the engines' packages
// register in (Go initialises engines/all's imports by import path:
// mariadb, mongo, postgres, redis), a registry reports them in their
// Spec.Order: postgres, redis, mongo, then the engines added since.
func TestReportOrderIsNotImportOrder(t *testing.T) {
	all := engines.Default.All()
	want := slices.Clone(engines.Default.Names())
	slices.SortFunc(want, func(a, b string) int { return order(a) - order(b) })
	assert.Equal(t, want, engines.Default.Names(), "engines.Default, as engines/all's imports registered them")
	assert.Equal(t, []string{"postgres", "redis", "mongo"}, want[:3], "the first three, as they always were")
	for _, perm := range permutations(len(all)) {
		var in []engines.Engine
		for _, i := range perm {
			in = append(in, all[i])
		}
		reg, err := engines.NewRegistry(in...)
		require.NoError(t, err)
		assert.Equal(t, want, reg.Names(), "registered in the order %v", perm)
	}
}

// order is the Spec.Order of the engine of engines.Default called name.
func order(name string) int {
	e, _ := engines.Default.Lookup(name)
	return e.Spec().Order
}

// permutations are every order of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := slices.Insert(slices.Clone(p), i, n-1)
			out = append(out, q)
		}
	}
	return out
}

// TestNotLinked: a service no engine of the registry serves is an error
// matching ErrNotLinked that names the import to add and what the program
// links.
func TestNotLinked(t *testing.T) {
	reg := engines.MustRegistry(postgres.Engine{})
	err := reg.NotLinked("redis")
	require.ErrorIs(t, err, engines.ErrNotLinked)
	assert.Contains(t, err.Error(), `unknown engine "redis"`)
	assert.Contains(t, err.Error(), `import _ "github.com/roboco/sandboxer/engines/redis"`)
	assert.Contains(t, err.Error(), `_ "github.com/roboco/sandboxer/engines/all"`)
	assert.Contains(t, err.Error(), "this program links postgres")
}

// TestMongoFitsMongodsFloor: mongo's own default limit (1 GiB) holds the
// WiredTiger cache's floor (0.25 GB) beside its data tmpfs, and mongod is
// given the server parameters a bounded data directory needs: an index
// build disk floor below the tmpfs, no diagnostic data in it, a journal
// of small files that are not preallocated.
func TestMongoFitsMongodsFloor(t *testing.T) {
	m := mongo.Engine{}
	lim := m.Spec().MemoryBytes
	require.Equal(t, int64(1<<30), lim)
	c := m.Container(engines.Credentials{User: "sandbox", Password: "pw"}, engines.Limits{MemoryBytes: lim}, engines.Image{})
	argv := strings.Join(c.Command, " ")
	for _, want := range []string{
		"--wiredTigerCacheSizeGB 0.25",
		"--setParameter indexBuildMinAvailableDiskSpaceMB=16",
		"--setParameter diagnosticDataCollectionEnabled=false",
		"--wiredTigerEngineConfigString log=(file_max=16MB,prealloc=false)",
	} {
		assert.Contains(t, argv, want)
	}
	assert.Equal(t, "size=268435456", c.Tmpfs["/data/db"])
	assert.Less(t, int64(256<<20)+int64(268435456), lim*3/4, "cache and data leave a quarter for mongod itself")
}

// known is the Image of cfg, which ImageOf accepts.
func known(t *testing.T, cfg runtime.ImageConfig) engines.Image {
	t.Helper()
	img, err := engines.ImageOf("test/image", cfg)
	require.NoError(t, err)
	return img
}

// TestImageOfBoundsTheVolumes: an image may declare up to MaxVolumes
// VOLUMEs, each of which then gets a bounded tmpfs; one declaring more is
// refused (ErrImageLayout, naming the image and the count) rather than
// having the extra ones dropped onto the host's disk.
func TestImageOfBoundsTheVolumes(t *testing.T) {
	volumes := func(n int) []string {
		var v []string
		for i := range n {
			v = append(v, fmt.Sprintf("/v%02d", i))
		}
		return v
	}
	t.Run("AtTheBoundEveryVolumeIsATmpfs", func(t *testing.T) {
		img, err := engines.ImageOf("test/pg16", runtime.ImageConfig{Volumes: volumes(engines.MaxVolumes)})
		require.NoError(t, err)
		c := postgres.Engine{}.Container(engines.Credentials{User: "u", Password: "p", Database: "d"}, engines.Limits{MemoryBytes: 512 << 20}, img)
		for _, v := range img.Config.Volumes {
			assert.True(t, strings.HasPrefix(c.Tmpfs[v], "size="), "%s is a bounded tmpfs", v)
		}
	})
	t.Run("BeyondTheBoundIsRefused", func(t *testing.T) {
		_, err := engines.ImageOf("test/pg17", runtime.ImageConfig{Volumes: volumes(engines.MaxVolumes + 1)})
		require.ErrorIs(t, err, engines.ErrImageLayout)
		assert.Contains(t, err.Error(), `"test/pg17"`, "names the image")
		assert.Contains(t, err.Error(), "17 VOLUMEs", "names the count")
	})
}
