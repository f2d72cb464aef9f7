package podman

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/internal/poll"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// TestSSHArgs: the ssh command line an endpoint makes, and the endpoints
// refused before any process starts.
func TestSSHArgs(t *testing.T) {
	noEnv := func(string) string { return "" }
	t.Run("PortUserPathAndOptions", func(t *testing.T) {
		u, _ := url.Parse("ssh://core@host.example:2222/run/user/1000/podman/podman.sock")
		args, err := sshArgs(u, 3*time.Second, []string{"-o", "UserKnownHostsFile=/k"}, func(k string) string {
			return map[string]string{"CONTAINER_SSHKEY": "/id"}[k]
		})
		require.NoError(t, err)
		assert.Equal(t, []string{"-o", "BatchMode=yes", "-o", "ConnectTimeout=3", "-p", "2222", "-l", "core", "-i", "/id",
			"-o", "UserKnownHostsFile=/k", "--", "host.example",
			"podman --url 'unix:///run/user/1000/podman/podman.sock' system dial-stdio"}, args)
	})
	t.Run("NoPathIsTheRemoteDefault", func(t *testing.T) {
		u, _ := url.Parse("ssh://host")
		args, err := sshArgs(u, 0, nil, noEnv)
		require.NoError(t, err)
		assert.Equal(t, []string{"-o", "BatchMode=yes", "-o", "ConnectTimeout=1", "--", "host", "podman system dial-stdio"}, args)
	})
	t.Run("PathIsQuotedForTheRemoteShell", func(t *testing.T) {
		u, _ := url.Parse("ssh://host/tmp/a'b;c.sock")
		args, err := sshArgs(u, time.Second, nil, noEnv)
		require.NoError(t, err)
		assert.Equal(t, `podman --url 'unix:///tmp/a'\''b;c.sock' system dial-stdio`, args[len(args)-1])
	})
	t.Run("PasswordIsRefusedWithoutShowingIt", func(t *testing.T) {
		_, err := New(WithHost("ssh://core:hunter2@host/run/podman/podman.sock"))
		require.Error(t, err)
		assert.ErrorIs(t, err, runtime.ErrUnavailable)
		assert.Contains(t, err.Error(), "password")
		assert.NotContains(t, err.Error(), "hunter2")
	})
	t.Run("NoHost", func(t *testing.T) {
		_, err := New(WithHost("ssh:///run/podman/podman.sock"))
		assert.ErrorContains(t, err, "without a host")
	})
}

// sshd is an OpenSSH server of the test's own on a loopback port, with a
// host key and one authorised user key it generated.
type sshd struct {
	port       int
	key        string // the authorised user key
	knownHosts string // a known_hosts file naming the server's host key
}

// startSSHD runs Debian's /usr/sbin/sshd (openssh-server, installed by
// `make env`) as root on 127.0.0.1, until the test ends.
func startSSHD(t *testing.T) sshd {
	t.Helper()
	bin, err := exec.LookPath("/usr/sbin/sshd")
	if err != nil {
		testenv.Unavailable(t, Name, "no OpenSSH server (openssh-server): %v", err)
	}
	dir := t.TempDir()
	keygen := func(name string) {
		out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sandboxer-test", "-f", filepath.Join(dir, name)).CombinedOutput()
		require.NoError(t, err, "ssh-keygen: %s", out)
	}
	keygen("host_key")
	keygen("user_key")
	keygen("stranger_key")
	pub, err := os.ReadFile(filepath.Join(dir, "user_key.pub"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600))
	hostPub, err := os.ReadFile(filepath.Join(dir, "host_key.pub"))
	require.NoError(t, err)
	port := testkit.FreePort(t)
	s := sshd{port: port, key: filepath.Join(dir, "user_key"), knownHosts: filepath.Join(dir, "known_hosts")}
	require.NoError(t, os.WriteFile(s.knownHosts, fmt.Appendf(nil, "[127.0.0.1]:%d %s", port, hostPub), 0o600))
	// sshd refuses to start without its privilege separation directory.
	if _, err := os.Stat("/run/sshd"); errors.Is(err, os.ErrNotExist) {
		require.NoError(t, os.MkdirAll("/run/sshd", 0o755))
		t.Cleanup(func() { _ = os.Remove("/run/sshd") })
	}
	conf := strings.Join([]string{
		fmt.Sprintf("Port %d", port),
		"ListenAddress 127.0.0.1",
		"HostKey " + filepath.Join(dir, "host_key"),
		"AuthorizedKeysFile " + filepath.Join(dir, "authorized_keys"),
		"PidFile none",
		"StrictModes no",
		"UsePAM no",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PermitRootLogin prohibit-password",
		"",
	}, "\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(conf), 0o600))
	cmd := exec.Command(bin, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	log := &tail{max: 8192}
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("sshd's log:\n%s", log.String())
		}
	})
	err = poll.Until(t.Context(), 10*time.Second, 20*time.Millisecond, func() error {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	require.NoError(t, err, "sshd did not listen: %s", log.String())
	return s
}

// TestSSHEndpoint: an ssh:// endpoint reaches the service through a real
// OpenSSH server and the remote `podman system dial-stdio`: the service
// answers, a container made over ssh is the one the service's own CLI
// lists, an exec (an upgraded connection) returns its output, and a login
// the server refuses is runtime.ErrUnavailable with ssh's own words.
func TestSSHEndpoint(t *testing.T) {
	local := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	sock := socketPath(mustParse(t, local.endpoint))
	s := startSSHD(t)
	endpoint := fmt.Sprintf("ssh://root@127.0.0.1:%d%s", s.port, sock)
	trust := []string{"-o", "UserKnownHostsFile=" + s.knownHosts, "-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes"}

	r, err := New(WithHost(endpoint), WithSSHOptions(append([]string{"-i", s.key}, trust...)...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	want, err := local.Version(ctx)
	require.NoError(t, err)
	got, err := r.Version(ctx)
	require.NoError(t, err, "version over ssh")
	assert.Equal(t, want.APIVersion, got.APIVersion)

	labels := adaptertest.Labels(t, local)
	spec := adaptertest.Sleeper(testkit.Image(t, local, "busybox"), "sandboxer-test-ssh-"+testkit.RandomHex(4), labels)
	c, err := r.Run(ctx, spec)
	require.NoError(t, err, "run over ssh")
	out, err := exec.CommandContext(ctx, "podman", "--url", "unix://"+sock, "ps", "--no-trunc",
		"--filter", "label="+adaptertest.RunLabel+"="+labels[adaptertest.RunLabel], "--format", "{{.ID}} {{.Names}}").CombinedOutput()
	require.NoError(t, err, "podman ps: %s", out)
	assert.Equal(t, c.ID+" "+spec.Name, strings.TrimSpace(string(out)), "the service's own CLI lists the container made over ssh")

	res, err := r.Exec(ctx, spec.Name, runtime.ExecSpec{Cmd: []string{"echo", "over-ssh"}})
	require.NoError(t, err, "exec over ssh")
	assert.Equal(t, 0, res.ExitCode)
	assert.Equal(t, "over-ssh\n", string(res.Stdout))
	require.NoError(t, r.Remove(ctx, c.ID))
	_, err = local.Inspect(ctx, spec.Name)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "removed over ssh")

	t.Run("RefusedLoginIsUnavailable", func(t *testing.T) {
		stranger, err := New(WithHost(endpoint), WithSSHOptions(append([]string{"-i", filepath.Join(filepath.Dir(s.key), "stranger_key")}, trust...)...))
		require.NoError(t, err)
		t.Cleanup(func() { _ = stranger.Close() })
		_, err = stranger.Version(ctx)
		require.Error(t, err)
		assert.ErrorIs(t, err, runtime.ErrUnavailable)
		assert.Contains(t, err.Error(), "Permission denied", "ssh's own words")
	})
	t.Run("UnknownHostKeyIsUnavailable", func(t *testing.T) {
		empty := filepath.Join(t.TempDir(), "known_hosts")
		require.NoError(t, os.WriteFile(empty, nil, 0o600))
		wary, err := New(WithHost(endpoint), WithSSHOptions("-i", s.key, "-o", "UserKnownHostsFile="+empty, "-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = wary.Close() })
		_, err = wary.Version(ctx)
		require.Error(t, err)
		assert.ErrorIs(t, err, runtime.ErrUnavailable)
		assert.Contains(t, err.Error(), "Host key verification failed")
	})
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}
