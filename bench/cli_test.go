package bench

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// TestRunArgsKeepThePasswordOutOfArgv: the CLI part's baseline gives the
// runtime's CLI a container's env through a 0600 file, so no password is
// in any process's argv, and everything else of the spec is a flag.
func TestRunArgsKeepThePasswordOutOfArgv(t *testing.T) {
	const pw = "0123456789abcdef0123456789abcdef"
	spec := runtime.RunSpec{
		Name: "b-redis-x", Image: "img", Env: map[string]string{"REDIS_PASSWORD": pw},
		Command: []string{"sh", "-c", "x"}, Labels: map[string]string{"p.bench": "1"},
		Tmpfs: map[string]string{"/data": "size=16m", "/run": ""}, MemoryBytes: 512 << 20, CPUs: 1,
		Ports:        []runtime.PortSpec{{ContainerPort: 6379, Protocol: "tcp"}},
		Capabilities: []string{"SETUID"},
	}
	file, err := writeEnvFile(spec.Env)
	require.NoError(t, err)
	t.Cleanup(func() { os.Remove(file) })
	fi, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "REDIS_PASSWORD="+pw+"\n", string(data))

	args := runArgs(spec, file, 40000)
	assert.NotContains(t, strings.Join(args, " "), pw)
	assert.Equal(t, []string{"run", "-d", "--name", "b-redis-x", "--env-file", file,
		"--security-opt", "no-new-privileges", "--cap-drop", "ALL", "--label", "p.bench=1", "--cap-add", "SETUID",
		"-p", "127.0.0.1:40000:6379/tcp", "--memory", "536870912", "--cpus", "1",
		"--tmpfs", "/data:size=16m", "--tmpfs", "/run", "img", "sh", "-c", "x"}, args)
}

// TestWriteEnvFileRefusesALineBreak: a value an env file cannot carry is
// an error, and no file is left.
func TestWriteEnvFileRefusesALineBreak(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	_, err := writeEnvFile(map[string]string{"A": "x\ny"})
	require.ErrorContains(t, err, "env A")
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, left)
}
