package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// spawnJSON is spawn's report.
type spawnJSON struct {
	Status     string   `json:"status"`
	Reason     string   `json:"reason"`
	Switch     string   `json:"switch"`
	Enabled    bool     `json:"enabled"`
	Services   []string `json:"services"`
	OwnerID    string   `json:"owner_id"`
	Owner      string   `json:"owner"`
	Containers []struct {
		Name   string `json:"name"`
		Engine string `json:"engine"`
	} `json:"containers"`
	EnvFile string            `json:"env_file"`
	Env     []json.RawMessage `json:"env"`
	Error   *struct {
		Message  string `json:"message"`
		ExitCode int    `json:"exit_code"`
	} `json:"error"`
}

func parseSpawn(t *testing.T, r result) spawnJSON {
	t.Helper()
	var rep spawnJSON
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	require.NoError(t, dec.Decode(&rep), "stdout: %q\nstderr: %s", r.stdout, r.stderr)
	assert.False(t, dec.More(), "one JSON object on stdout: %q", r.stdout)
	return rep
}

// TestSpawnAsAShellOrchestrator drives spawn as a non-Go orchestrator
// does: the master switch and the project's JSON list from its own
// config, the env file handed to `docker run --env-file` for the agent's
// container (named as the owner), real clients logging in from containers
// that got nothing but that file, and the teardown when the agent's
// container is removed.
func TestSpawnAsAShellOrchestrator(t *testing.T) {
	c := newCLI(t, "postgres", "redis")
	pgImage := testenv.Image(t, "docker", "postgres")
	redisImage := testenv.Image(t, "docker", "redis")
	ctx := testkit.Context(t, 5*time.Minute)
	network := c.prefix + "-net"
	_, err := c.rt.CreateNetwork(ctx, runtime.NetworkSpec{Name: network, Labels: map[string]string{c.prefix + ".test": "1"}})
	require.NoError(t, err)
	t.Cleanup(func() {
		c.removeAll()
		assert.NoError(t, c.rt.RemoveNetwork(testkit.Context(t, time.Minute), network))
	})
	dir := t.TempDir()
	envFile := filepath.Join(dir, "sandbox.env")
	id := "o" + testkit.RandomHex(3)
	agent := c.prefix + "-agent-" + id

	// The orchestrator's spawn: its config in env and flags, as a shell sets them.
	r := c.runWith([]string{"ROBOCO_SANDBOX_DB_ENABLED=true"}, c.args("spawn", "--owner", id,
		"--services-json", `["postgres","redis"]`, "--network", network, "--env-file", envFile)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	rep := parseSpawn(t, r)
	assert.Equal(t, "provisioned", rep.Status)
	assert.Empty(t, rep.Reason)
	assert.Equal(t, "ROBOCO_SANDBOX_DB_ENABLED", rep.Switch)
	assert.True(t, rep.Enabled)
	assert.Equal(t, agent, rep.Owner)
	assert.Equal(t, envFile, rep.EnvFile)
	assert.Empty(t, rep.Env, "the env is in the file, not in the report")
	require.Len(t, rep.Containers, 2)
	assert.Equal(t, "postgres", rep.Containers[0].Engine)
	assert.Equal(t, "redis", rep.Containers[1].Engine)
	fi, err := os.Stat(envFile)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
	data, err := os.ReadFile(envFile)
	require.NoError(t, err)
	env := parseDotenv(t, string(data))
	for _, pw := range passwords(env) {
		assert.NotContains(t, r.stdout+r.stderr, pw, "no password on stdout or stderr")
	}

	// The agent's container gets the env file; a real client logs in from it.
	c.own.OwnCLI(t, "run", "-d", "--name", agent, "--label", c.prefix+".test=1", "--network", network,
		"--env-file", envFile, "--entrypoint", "sleep", redisImage, "600")
	out := c.own.OwnCLI(t, "exec", agent, "sh", "-c",
		`REDISCLI_AUTH="$ROBOCO_TEST_REDIS_PASSWORD" redis-cli --no-auth-warning -h "$ROBOCO_TEST_REDIS_HOST" -p "$ROBOCO_TEST_REDIS_PORT" ping`)
	assert.Equal(t, "PONG", strings.TrimSpace(out), "redis-cli logged in from the agent's container")
	out = c.own.OwnCLI(t, "run", "--rm", "--label", c.prefix+".test=1", "--network", network, "--env-file", envFile,
		"--entrypoint", "sh", pgImage, "-c",
		`PGPASSWORD="$ROBOCO_TEST_DB_PASSWORD" psql -h "$ROBOCO_TEST_DB_HOST" -p "$ROBOCO_TEST_DB_PORT" -U "$ROBOCO_TEST_DB_USER" -d "$ROBOCO_TEST_DB_NAME" -tAc 'select 6*7'`)
	assert.Equal(t, "42", strings.TrimSpace(out), "psql logged in from a container given the env file")

	// The agent's container is removed: its sandboxes go with it.
	c.own.OwnCLI(t, "rm", "-f", agent)
	down := c.mustSbx("down", "--owner", id)
	assert.Len(t, strings.Split(strings.TrimSpace(down.stdout), "\n"), 2, down.stdout)
	assert.Empty(t, c.own.LabelledNames(t, labels.For(c.prefix).Sandbox, labels.SandboxValue), "docker ps -a lists no sandbox")
}

// TestSpawnNotParticipating: switch off or no services leaves the spawn
// untouched: exit 0, status not_participating with the reason, an empty
// env file, and no runtime contacted at all (the only one configured
// does not exist). A bad switch value never refuses a project without
// services.
func TestSpawnNotParticipating(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		args    []string
		reason  string
		warn    string
		enabled bool // the report's "enabled"
	}{
		{"SwitchUnset", nil, []string{"--services-json", `["redis"]`}, "switch_off", "", false},
		{"SwitchFalse", []string{"ROBOCO_SANDBOX_DB_ENABLED=0"}, []string{"--services-json", `["postgres","redis"]`}, "switch_off", "", false},
		{"OtherSwitchPrefix", []string{"ROBOCO_SANDBOX_DB_ENABLED=1"}, []string{"--switch-prefix", "ACME", "--services-json", `["redis"]`}, "switch_off", "", false},
		{"SwitchOffListWithTypoWarns", []string{"ROBOCO_SANDBOX_DB_ENABLED=off"}, []string{"--services-json", `["postgress"]`}, "switch_off", `invalid service \"postgress\"`, false},
		{"SwitchOffListNotJSONWarns", nil, []string{"--services-json", "postgres,redis"}, "switch_off", "want a JSON list", false},
		{"NullList", []string{"ROBOCO_SANDBOX_DB_ENABLED=1"}, []string{"--services-json", "null"}, "no_services", "", true},
		{"EmptyList", []string{"ROBOCO_SANDBOX_DB_ENABLED=yes"}, []string{"--services-json", "[]"}, "no_services", "", true},
		{"NoListAtAll", []string{"ROBOCO_SANDBOX_DB_ENABLED=1"}, nil, "no_services", "", true},
		{"BadSwitchWithoutServices", []string{"ROBOCO_SANDBOX_DB_ENABLED=maybe"}, []string{"--services-json", "null"}, "no_services", "", false},
		{"BadSwitchWithEmptyList", []string{"ROBOCO_SANDBOX_DB_ENABLED=maybe"}, []string{"--services-json", ""}, "no_services", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCLI(t)
			envFile := filepath.Join(t.TempDir(), "sandbox.env")
			env := append([]string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, tt.env...)
			r := c.runWith(env, c.args(append([]string{"spawn", "--owner", "n1", "--env-file", envFile}, tt.args...)...)...)
			require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
			rep := parseSpawn(t, r)
			assert.Equal(t, "not_participating", rep.Status)
			assert.Equal(t, tt.reason, rep.Reason)
			assert.Equal(t, tt.enabled, rep.Enabled)
			if tt.warn == "" {
				assert.NotContains(t, r.stderr, "level=WARN")
			}
			assert.Empty(t, rep.Containers)
			assert.Nil(t, rep.Error)
			assert.Equal(t, envFile, rep.EnvFile)
			fi, err := os.Stat(envFile)
			require.NoError(t, err, "an env file for docker run --env-file, whatever the outcome")
			assert.Zero(t, fi.Size(), "empty")
			assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
			if tt.warn != "" {
				assert.Contains(t, r.stderr, "level=WARN")
				assert.Contains(t, r.stderr, tt.warn)
			}
			assert.Empty(t, c.containers())
		})
	}
}

// TestSpawnFailures: every failure is exit != 0 with the code as up's,
// one JSON report with status failed and that code, no env file, and
// nothing left on the runtime.
func TestSpawnFailures(t *testing.T) {
	busybox := testenv.Image(t, "docker", "busybox")
	on := []string{"ROBOCO_SANDBOX_DB_ENABLED=1"}
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"BadSwitchWithServices", []string{"ROBOCO_SANDBOX_DB_ENABLED=maybe"}, []string{"--services-json", `["redis"]`}, ExitUsage, `ROBOCO_SANDBOX_DB_ENABLED "maybe"`},
		{"UnknownService", on, []string{"--services-json", `["postgress"]`}, ExitUsage, `invalid service "postgress"`},
		{"NotAJSONList", on, []string{"--services-json", "postgres,redis"}, ExitUsage, "want a JSON list"},
		{"BadSwitchBeforeBadList", []string{"ROBOCO_SANDBOX_DB_ENABLED=maybe"}, []string{"--services-json", "postgres,redis"}, ExitUsage, `ROBOCO_SANDBOX_DB_ENABLED "maybe"`},
		{"BadOwnerID", on, []string{"--owner", "a..b", "--services-json", `["redis"]`}, ExitUsage, `invalid owner id "a..b"`},
		{"BadSwitchPrefix", on, []string{"--switch-prefix", "acme", "--services-json", `["redis"]`}, ExitUsage, `invalid switch prefix "acme"`},
		{"RuntimeUnavailable", append([]string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, on...), []string{"--services-json", `["redis"]`}, ExitUnavailable, "unix:///nonexistent/docker.sock"},
		{"ProvisioningFails", on, []string{"--image", "redis=" + busybox, "--services-json", `["postgres","redis"]`}, ExitProvision, "redis"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCLI(t, "postgres", "busybox")
			envFile := filepath.Join(t.TempDir(), "sandbox.env")
			args := []string{"spawn", "--owner", "f1", "--env-file", envFile}
			var global []string
			for i := 0; i < len(tt.args); i++ {
				if tt.args[i] == "--image" {
					global = append(global, tt.args[i], tt.args[i+1])
					i++
					continue
				}
				args = append(args, tt.args[i])
			}
			r := c.runWith(tt.env, c.args(append(global, args...)...)...)
			assert.Equal(t, tt.code, r.code, "stderr: %s", r.stderr)
			rep := parseSpawn(t, r)
			assert.Equal(t, "failed", rep.Status)
			require.NotNil(t, rep.Error)
			assert.Equal(t, tt.code, rep.Error.ExitCode, "the report's code is the exit code")
			assert.Contains(t, rep.Error.Message, tt.want)
			assert.Contains(t, lastLine(r.stderr), tt.want, "and the usual stderr line")
			assert.Empty(t, rep.Containers)
			assert.NoFileExists(t, envFile)
			assert.Empty(t, c.containers(), "nothing left")
		})
	}
}

func TestEnginesCheck(t *testing.T) {
	tests := []struct {
		name string
		list string
		code int
		out  string // stdout (0) or the stderr line (2)
	}{
		{"Trio", `["postgres","redis","mongo"]`, 0, "ok: postgres, redis, mongo\n"},
		{"Null", "null", 0, "ok: no services (the project does not participate)\n"},
		{"Empty", "", 0, "ok: no services (the project does not participate)\n"},
		{"Typo", `["postgres","mongodb"]`, ExitUsage, `sandboxer: provision: invalid service "mongodb": unknown service; valid services: ` + strings.Join(engines.Default.Names(), ", ")},
		{"Twice", `["redis","redis"]`, ExitUsage, `invalid service "redis": listed twice`},
		{"NotJSON", `postgres`, ExitUsage, "want a JSON list"},
	}
	c := newCLI(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No runtime is needed, nor contacted.
			r := c.runWith([]string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, "engines", "--check", tt.list)
			assert.Equal(t, tt.code, r.code, r.stderr)
			if tt.code == 0 {
				assert.Equal(t, tt.out, r.stdout)
				assert.Empty(t, r.stderr)
			} else {
				assert.Empty(t, r.stdout)
				assert.Contains(t, lastLine(r.stderr), tt.out)
			}
			var rep checkReport
			j := c.runWith(nil, "engines", "--check", tt.list, "-o", "json")
			assert.Equal(t, tt.code, j.code)
			require.NoError(t, json.Unmarshal([]byte(j.stdout), &rep))
			assert.Equal(t, tt.code == 0, rep.Valid)
		})
	}
}

// TestLsFlagsAPortPublishedBeyondLoopback: a sandbox-labelled container
// that the runtime's own CLI published on 0.0.0.0 is listed with the
// address as the runtime reports it and flagged, never rewritten to
// 127.0.0.1; one published on 127.0.0.1 is not flagged. containerd's ctr
// cannot publish ports: there the adapter, asked for 0.0.0.0, makes it.
func TestLsFlagsAPortPublishedBeyondLoopback(t *testing.T) {
	for _, name := range testruntimes.Names {
		t.Run(name, func(t *testing.T) {
			c := newCLIOn(t, name, "busybox")
			busybox := testenv.Image(t, name, "busybox")
			keys := labels.For(c.prefix)
			for _, host := range []string{"0.0.0.0", "127.0.0.1"} {
				ctr := c.prefix + "-sandbox-redis-" + strings.ReplaceAll(host, ".", "")
				lbls := map[string]string{keys.Sandbox: labels.SandboxValue, keys.Engine: "redis", keys.Owner: c.prefix + "-agent-x"}
				if name == "containerd" {
					_, err := c.rt.Run(testkit.Context(t, time.Minute), runtime.RunSpec{
						Name: ctr, Image: busybox, Command: []string{"sleep", "600"}, Labels: lbls,
						Ports: []runtime.PortSpec{{ContainerPort: 6379, HostIP: host}},
					})
					require.NoError(t, err)
					continue
				}
				args := []string{"run", "-d", "--name", ctr, "-p", host + "::6379"}
				for k, v := range lbls {
					args = append(args, "--label", k+"="+v)
				}
				c.own.OwnCLI(t, append(args, busybox, "sleep", "600")...)
			}

			r := c.mustSbx("ls", "-o", "json")
			var rows []listed
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows), r.stdout)
			require.Len(t, rows, 2)
			byName := map[string]listed{}
			for _, row := range rows {
				byName[row.Name] = row
			}
			exposed, loopback := byName[c.prefix+"-sandbox-redis-0000"], byName[c.prefix+"-sandbox-redis-127001"]
			require.NotNil(t, exposed.Endpoint)
			assert.Equal(t, "0.0.0.0", exposed.Endpoint.Host, "shown as the runtime reports it")
			assert.True(t, exposed.Exposed)
			require.NotNil(t, loopback.Endpoint)
			assert.Equal(t, "127.0.0.1", loopback.Endpoint.Host)
			assert.False(t, loopback.Exposed)
			assert.Contains(t, r.stderr, "sandbox published beyond loopback")

			table := c.mustSbx("ls").stdout
			assert.Regexp(t, c.prefix+`-sandbox-redis-0000\s.*0\.0\.0\.0:\d+ \(EXPOSED\)`, table)
			assert.Regexp(t, c.prefix+`-sandbox-redis-127001\s.*127\.0\.0\.1:\d+\s+\S+\s+`+c.rt.Name(), table) // the network column, then the runtime column names the adapter
		})
	}
}

// TestOwnerIDRefusedBeforeAnyPullOnEveryRuntime: an owner id that one
// runtime would refuse (containerd's identifier rule, a Kubernetes pod
// name's) is exit 2 on every
// runtime, before anything is pulled (the image given does not exist) or
// created.
func TestOwnerIDRefusedBeforeAnyPullOnEveryRuntime(t *testing.T) {
	for _, name := range testruntimes.Names {
		t.Run(name, func(t *testing.T) {
			c := newCLIOn(t, name)
			tooLong := "a" + strings.Repeat("0", provision.Options{LabelPrefix: c.prefix}.MaxOwnerIDLength())
			for _, id := range []string{"a..b", "a-", "x_-y", "Agent1", "a_b", tooLong} {
				r := c.sbx("--image", "redis=127.0.0.1:9/sandboxer/never-pulled:0", "up", "--owner", id, "-s", "redis")
				assert.Equal(t, ExitUsage, r.code, r.stderr)
				assert.Contains(t, lastLine(r.stderr), `invalid owner id "`+id+`"`)
				assert.NotContains(t, r.stderr, "pull")
				s := c.runWith([]string{"ROBOCO_SANDBOX_DB_ENABLED=1"}, c.args("--image", "redis=127.0.0.1:9/sandboxer/never-pulled:0", "spawn", "--owner", id, "--services-json", `["redis"]`)...)
				assert.Equal(t, ExitUsage, s.code, s.stderr)
			}
			assert.Empty(t, c.containers())
		})
	}
}

// TestSpawnOnEveryRuntime: without --env-file the report carries the env,
// and a real client on the host logs in with it, on every runtime.
func TestSpawnOnEveryRuntime(t *testing.T) {
	for _, name := range testruntimes.Names {
		t.Run(name, func(t *testing.T) {
			c := newCLIOn(t, name, "redis")
			id := "e" + testkit.RandomHex(3)
			r := c.runWith([]string{"ROBOCO_SANDBOX_DB_ENABLED=on"}, c.args("spawn", "--owner", id, "--services-json", `["redis"]`)...)
			require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
			var rep struct {
				Status string `json:"status"`
				Env    []struct {
					Name  string `json:"name"`
					Value string `json:"value"`
				} `json:"env"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
			assert.Equal(t, "provisioned", rep.Status)
			env := map[string]string{}
			for _, v := range rep.Env {
				env[v.Name] = v.Value
			}
			url := env[engines.Default.URLName("redis", "ROBOCO_TEST")]
			require.NotEmpty(t, url, "the report's env: %v", rep.Env)
			_, err := engines.Default.Login(testkit.Context(t, time.Minute), "redis", url)
			require.NoError(t, err, "go-redis logs in with the report's env")
			assert.NotContains(t, r.stderr, env["ROBOCO_TEST_REDIS_PASSWORD"], "no password in logs")
			c.mustSbx("down", "--owner", id)
			assert.Empty(t, c.containers())
		})
	}
}

// TestUnwritableStdoutTearsDown runs up and spawn with stdout on /dev/full
// (every write fails with ENOSPC, as a full disk under a redirect does):
// nobody can read the credentials, so each exits 1 and leaves nothing.
func TestUnwritableStdoutTearsDown(t *testing.T) {
	for _, args := range [][]string{
		{"up", "--owner", "full1", "-s", "redis"},
		{"spawn", "--owner", "full2", "--services-json", `["redis"]`},
	} {
		t.Run(args[0], func(t *testing.T) {
			c := newCLI(t, "redis")
			full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
			require.NoError(t, err)
			defer full.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := c.command(ctx, c.args(args...)...)
			cmd.Env = append(cmd.Env, "ROBOCO_SANDBOX_DB_ENABLED=1")
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = full, &stderr
			err = cmd.Run()
			var xe *exec.ExitError
			require.ErrorAs(t, err, &xe, "stderr: %s", stderr.String())
			assert.Equal(t, 1, xe.ExitCode(), "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), "sandboxes torn down")
			assert.Empty(t, c.containers(), "nothing left behind")
		})
	}
}

// failingWriter fails every write, as stdout on a full disk does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestSpawnWithUnwritableReportLeavesNoEnvFile: the README promises no env
// file when spawn fails, and a spawn whose report cannot be written has
// failed, though its env file was complete: provisioned (on a real
// runtime, stdout /dev/full) or not participating (no runtime contacted),
// it exits 1 and leaves neither the file nor a temporary beside it, nor a
// sandbox.
func TestSpawnWithUnwritableReportLeavesNoEnvFile(t *testing.T) {
	t.Run("NotParticipating", func(t *testing.T) {
		dir := t.TempDir()
		envFile := filepath.Join(dir, "sandbox.env")
		var errb bytes.Buffer
		code := Main(context.Background(), []string{"spawn", "--owner", "1", "--services-json", `["redis"]`, "--env-file", envFile},
			Stdio{In: strings.NewReader(""), Out: failingWriter{}, Err: &errb}, hermetic(nil), nil)
		assert.Equal(t, ExitFailure, code, errb.String())
		assert.Contains(t, errb.String(), "write report")
		assertNoFiles(t, dir)
	})
	t.Run("Provisioned", func(t *testing.T) {
		c := newCLI(t, "redis")
		dir := t.TempDir()
		envFile := filepath.Join(dir, "sandbox.env")
		code, stderr := c.withStdout(t, "/dev/full", []string{"ROBOCO_SANDBOX_DB_ENABLED=1"},
			"spawn", "--owner", "full3", "--services-json", `["redis"]`, "--env-file", envFile)
		assert.Equal(t, ExitFailure, code, stderr)
		assert.Contains(t, stderr, "sandboxes torn down")
		assertNoFiles(t, dir)
		assert.Empty(t, c.containers(), "nothing left behind")
	})
}

// assertNoFiles asserts that dir is empty.
func assertNoFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "no env file, no temporary")
}

// withStdout runs sandboxer with the test's global flags and env added,
// its stdout on the file at path (opened for writing), and returns its
// exit code and stderr.
func (c *cli) withStdout(t *testing.T, path string, env []string, args ...string) (int, string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := c.command(ctx, c.args(args...)...)
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = f, &stderr
	err = cmd.Run()
	if err == nil {
		return 0, stderr.String()
	}
	var xe *exec.ExitError
	require.ErrorAs(t, err, &xe, "stderr: %s", stderr.String())
	return xe.ExitCode(), stderr.String()
}
