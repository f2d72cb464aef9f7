package mariadb_test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/mariadb"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

const mib = 1 << 20

// pw is shaped like a generated password, so that a leak would show.
const pw = "0123456789abcdef0123456789abcdef"

var cred = engines.Credentials{User: "sandbox", Password: pw, Database: "sandbox"}

// TestRegistered: importing the package registers the engine under its
// name, after mongo, with the layout of mariadb:11 and no capability
// beyond the entrypoint's chown and gosu.
func TestRegistered(t *testing.T) {
	e, ok := engines.Default.Lookup("mariadb")
	require.True(t, ok, "importing engines/mariadb registers it")
	s := e.Spec()
	assert.Equal(t, "maria", s.Short)
	assert.Equal(t, 40, s.Order)
	assert.Equal(t, "mariadb:11", s.Image)
	assert.Equal(t, 3306, s.Port)
	assert.Equal(t, []string{"/var/lib/mysql", "/var/lib/sandboxer/tmp"}, s.Tmpfs)
	assert.Equal(t, 90*time.Second, s.ReadyTimeout)
	assert.Zero(t, s.MemoryBytes, "the provisioner's default limit fits")
	assert.Equal(t, []string{"CHOWN", "SETGID", "SETUID"}, s.Capabilities)
	assert.LessOrEqual(t, len(s.Short), len("redis"), "the longest owner id stays as it was")
}

func TestEnv(t *testing.T) {
	env := mariadb.Engine{}.Env("ROBOCO_TEST", engines.Endpoint{Host: "10.1.2.3", Port: 5555}, cred)
	got := make([][2]string, len(env))
	for i, v := range env {
		got[i] = [2]string{v.Name, v.Value}
		assert.Equal(t, strings.Contains(v.Value, pw), v.Secret, "%s: Secret marks exactly the values holding the password", v.Name)
	}
	assert.Equal(t, [][2]string{
		{"ROBOCO_TEST_MYSQL_HOST", "10.1.2.3"},
		{"ROBOCO_TEST_MYSQL_PORT", "5555"},
		{"ROBOCO_TEST_MYSQL_USER", "sandbox"},
		{"ROBOCO_TEST_MYSQL_PASSWORD", pw},
		{"ROBOCO_TEST_MYSQL_NAME", "sandbox"},
		{"ROBOCO_TEST_MYSQL_URL", "mysql://sandbox:" + pw + "@10.1.2.3:5555/sandbox"},
	}, got)
}

// TestConfig: the emitted URL, whatever its characters, is the driver's
// configuration with the same user, password, address and database.
func TestConfig(t *testing.T) {
	odd := engines.Credentials{User: "us@er:x", Password: "p@ss:w/rd?#%&'\\", Database: "d b"}
	for _, ep := range []engines.Endpoint{{Host: "10.0.0.1", Port: 3306}, {Host: "fd00::1", Port: 3307}} {
		t.Run(ep.Host, func(t *testing.T) {
			v, ok := engines.URLVar(mariadb.Engine{}.Env("P", ep, odd))
			require.True(t, ok)
			cfg, err := mariadb.Config(v.Value)
			require.NoError(t, err)
			assert.Equal(t, odd.User, cfg.User)
			assert.Equal(t, odd.Password, cfg.Passwd)
			assert.Equal(t, odd.Database, cfg.DBName)
			assert.Equal(t, "tcp", cfg.Net)
			assert.Equal(t, ep.HostPort(), cfg.Addr)
		})
	}
	t.Run("NoDatabase", func(t *testing.T) {
		cfg, err := mariadb.Config("mysql://u:p@127.0.0.1:1")
		require.NoError(t, err)
		assert.Empty(t, cfg.DBName)
	})
	t.Run("OtherScheme", func(t *testing.T) {
		_, err := mariadb.Config("postgres://u:" + pw + "@127.0.0.1:1/d")
		require.ErrorContains(t, err, `scheme "postgres"`)
		assert.NotContains(t, err.Error(), pw)
	})
}

// start is the container's command: the start script, then mariadbd's
// argv after it.
func start(c engines.Container) (script string, argv []string) {
	if len(c.Command) < 4 || c.Command[0] != "sh" || c.Command[1] != "-c" {
		return "", c.Command
	}
	return c.Command[2], c.Command[4:]
}

func TestContainerDefaults(t *testing.T) {
	c := mariadb.Engine{}.Container(cred, engines.Limits{}, engines.Image{})
	assert.Equal(t, map[string]string{
		"MARIADB_USER": "sandbox", "MARIADB_PASSWORD": pw, "MARIADB_DATABASE": "sandbox",
		"MARIADB_ROOT_HOST": "localhost", "MARIADB_ALLOW_EMPTY_ROOT_PASSWORD": "1",
	}, c.Env)
	n := 0
	for _, v := range c.Env {
		if strings.Contains(v, pw) {
			n++
		}
	}
	assert.Equal(t, 1, n, "the password is in the env once (TestPasswordOnlyInTheEnv)")
	script, argv := start(c)
	assert.Contains(t, script, `exec docker-entrypoint.sh "$@"`, "the image's entrypoint starts the server")
	assert.Equal(t, []string{"mariadbd", "--tmpdir=/var/lib/sandboxer/tmp", "--innodb-flush-log-at-trx-commit=0",
		"--innodb-doublewrite=0", "--innodb-use-native-aio=0"}, argv)
	assert.Equal(t, map[string]string{"/var/lib/mysql": "", "/var/lib/sandboxer/tmp": ""}, c.Tmpfs, "no limit: no bound")
	assert.NotContains(t, strings.Join(c.Command, " "), pw, "no password in argv")
}

// TestContainerBudget: within a memory limit every tmpfs is bounded, the
// server's caches are sized from the limit, and the tmpfs bounds and the
// caches together leave the server headroom.
func TestContainerBudget(t *testing.T) {
	tests := []struct {
		limit int64
		tmpfs map[string]string
		args  []string
		// memory is what the settings hold in memory besides the tmpfs.
		memory int64
	}{
		{512 * mib, map[string]string{"/var/lib/mysql": "size=201326592", "/var/lib/sandboxer/tmp": "size=16777216"},
			[]string{"--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M", "--innodb-log-buffer-size=8M",
				"--innodb-temp-data-file-path=ibtmp1:12M:autoextend:max:32M", "--tmp-table-size=8M", "--max-heap-table-size=8M",
				"--key-buffer-size=8M", "--aria-pagecache-buffer-size=8M"},
			(64 + 8 + 8 + 8) * mib},
		{256 * mib, map[string]string{"/var/lib/mysql": "size=134217728", "/var/lib/sandboxer/tmp": "size=8388608"},
			[]string{"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--innodb-log-buffer-size=4M",
				"--innodb-temp-data-file-path=ibtmp1:12M:autoextend:max:16M", "--tmp-table-size=4M", "--max-heap-table-size=4M",
				"--key-buffer-size=4M", "--aria-pagecache-buffer-size=4M"},
			(32 + 4 + 4 + 4) * mib},
		{2048 * mib, map[string]string{"/var/lib/mysql": "size=805306368", "/var/lib/sandboxer/tmp": "size=67108864"},
			[]string{"--innodb-buffer-pool-size=256M", "--innodb-log-file-size=64M", "--innodb-log-buffer-size=32M",
				"--innodb-temp-data-file-path=ibtmp1:12M:autoextend:max:128M", "--tmp-table-size=32M", "--max-heap-table-size=32M",
				"--key-buffer-size=32M", "--aria-pagecache-buffer-size=32M"},
			(256 + 32 + 32 + 32) * mib},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%dMiB", tt.limit/mib), func(t *testing.T) {
			e := mariadb.Engine{}
			c := e.Container(cred, engines.Limits{MemoryBytes: tt.limit}, engines.Image{})
			assert.Equal(t, tt.tmpfs, c.Tmpfs)
			assert.Equal(t, slices.Sorted(maps.Keys(c.Tmpfs)), slices.Sorted(slices.Values(e.Spec().Tmpfs)), "every tmpfs of the spec has its options")
			_, argv := start(c)
			assert.Equal(t, tt.args, argv[5:], "the budget's server settings follow the durability settings")
			assert.NotContains(t, strings.Join(c.Command, " "), pw, "no password in argv")
			sum := tt.memory + testkit.TmpfsBytes(t, c.Tmpfs)
			assert.Less(t, sum, tt.limit*3/4, "the tmpfs bounds and the caches leave headroom for mariadbd")
		})
	}
}

// TestContainerFollowsTheImage: every VOLUME of the image gets a bounded
// tmpfs; an image whose config is not known gets mariadb:11's layout.
func TestContainerFollowsTheImage(t *testing.T) {
	img, err := engines.ImageOf("mariadb", runtime.ImageConfig{Volumes: []string{"/var/lib/mysql", "/etc/mysql/conf.d"}})
	require.NoError(t, err)
	c := mariadb.Engine{}.Container(cred, engines.Limits{MemoryBytes: 512 * mib}, img)
	assert.Equal(t, map[string]string{"/var/lib/mysql": "size=201326592", "/var/lib/sandboxer/tmp": "size=16777216",
		"/etc/mysql/conf.d": "size=4194304"}, c.Tmpfs)
	c = mariadb.Engine{}.Container(cred, engines.Limits{MemoryBytes: 512 * mib}, engines.Image{})
	assert.Equal(t, map[string]string{"/var/lib/mysql": "size=201326592", "/var/lib/sandboxer/tmp": "size=16777216"}, c.Tmpfs)
}

func TestProbe(t *testing.T) {
	ep := engines.Endpoint{Host: "172.18.0.5", Port: 3306}
	steps := mariadb.Engine{}.Probe(ep, cred)
	require.Len(t, steps, 1)
	st := steps[0]
	assert.Equal(t, "mariadb", st.Cmd[0])
	argv := strings.Join(st.Cmd, " ")
	assert.Contains(t, argv, "--protocol=tcp -h 172.18.0.5 -P 3306", "over TCP, at the sandbox's own address")
	assert.NotContains(t, argv, pw, "no password in argv")
	assert.Equal(t, map[string]string{"MYSQL_PWD": pw}, st.Env)
	assert.NoError(t, st.Check(runtime.ExecResult{Stdout: []byte("1\n")}))
	assert.Error(t, st.Check(runtime.ExecResult{ExitCode: 1, Stderr: []byte("ERROR 1045 (28000): Access denied for user 'sandbox'@'172.18.0.1' (using password: YES)")}))
	assert.Error(t, st.Check(runtime.ExecResult{ExitCode: 1, Stderr: []byte("ERROR 2002 (HY000): Can't connect to server on '172.18.0.5' (115)")}))
}

// TestStartScript runs the start script with sh, as the image's
// entrypoint would (with its docker-entrypoint.sh and its init
// directory replaced by ones of the test's own), then sources the init
// script it dropped, as the entrypoint does during initialisation, with a
// docker_process_sql that records its SQL: the user, whatever its
// characters, is granted every privilege, quoted as the entrypoint quotes
// it, and the entrypoint is exec'd with the server's argv.
func TestStartScript(t *testing.T) {
	sh, err := exec.LookPath("sh")
	require.NoError(t, err, "the start script runs under sh, as in the image")
	dir := t.TempDir()
	initd := filepath.Join(dir, "initdb.d")
	tmp := filepath.Join(dir, "tmp")
	bin := filepath.Join(dir, "bin")
	cnf := filepath.Join(dir, "conf.d") // made by the script
	for _, d := range []string{initd, tmp, bin} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	// Stand-ins for what the image has: chown (the test's user owns
	// nothing of mysql's) and the entrypoint, which prints its argv.
	require.NoError(t, os.WriteFile(filepath.Join(bin, "chown"), []byte("#!/bin/sh\necho chown \"$@\" >>\"$LOG\"\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "docker-entrypoint.sh"), []byte("#!/bin/sh\necho entrypoint \"$@\" >>\"$LOG\"\n"), 0o755))

	c := mariadb.Engine{}.Container(engines.Credentials{User: `o'bri\en`, Password: pw, Database: "sandbox"}, engines.Limits{MemoryBytes: 256 * mib}, engines.Image{})
	script, argv := start(c)
	script = strings.NewReplacer("/docker-entrypoint-initdb.d", initd, "/var/lib/sandboxer/tmp", tmp, "/etc/mysql/conf.d", cnf).Replace(script)
	log := filepath.Join(dir, "log")
	cmd := exec.Command(sh, append([]string{"-c", script, "sandboxer-mariadb"}, argv...)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "LOG="+log)
	for k, v := range c.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	got, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Equal(t, "chown mysql:mysql "+tmp+"\nentrypoint "+strings.Join(argv, " ")+"\n", string(got))
	installCnf, err := os.ReadFile(filepath.Join(cnf, "sandboxer.cnf"))
	require.NoError(t, err)
	assert.Equal(t, "[mysqld]\ninnodb_log_file_size=16M\n", string(installCnf),
		"mariadb-install-db's server creates the redo log at the budget's size, whatever the image hands it")

	initScript := filepath.Join(initd, "sandboxer-grant.sh")
	fi, err := os.Stat(initScript)
	require.NoError(t, err)
	assert.Zero(t, fi.Mode()&0o111, "not executable: the entrypoint sources it, with its docker_process_sql")
	src := `docker_process_sql() { printf '%s\n' "$*" >"$LOG.args"; cat >"$LOG.sql"; }
. "$0"`
	cmd = exec.Command(sh, "-c", src, initScript)
	cmd.Env = append(os.Environ(), "LOG="+log, "MARIADB_USER="+`o'bri\en`)
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	sql, err := os.ReadFile(log + ".sql")
	require.NoError(t, err)
	assert.Equal(t, `GRANT ALL PRIVILEGES ON *.* TO 'o\'bri\\en'@'%' WITH GRANT OPTION;`+"\n", string(sql))
	args, err := os.ReadFile(log + ".args")
	require.NoError(t, err)
	assert.Equal(t, "--database=mysql\n", string(args))
	assert.NotContains(t, string(sql), pw)
}
