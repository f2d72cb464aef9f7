package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
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
)

// rootlessUser is the unprivileged user of the podman-rootless row
// (hack/env/podman-rootless.sh), and the built binary where it may run it.
type rootlessUser struct {
	name, home string
	uid, gid   string
	binary     string
}

// runDir is the user's XDG_RUNTIME_DIR.
func (u *rootlessUser) runDir() string { return "/run/user/" + u.uid }

// command runs argv as the user, with the environment a login session of
// its own would give it (HOME, USER, PATH, XDG_RUNTIME_DIR) plus env, and
// nothing of the test's: no DOCKER_HOST, no CONTAINER_HOST.
func (u *rootlessUser) command(ctx context.Context, env []string, argv ...string) *exec.Cmd {
	args := []string{"--reuid=" + u.uid, "--regid=" + u.gid, "--init-groups", "--",
		"env", "-i", "HOME=" + u.home, "USER=" + u.name, "LOGNAME=" + u.name,
		"PATH=/usr/local/bin:/usr/bin:/bin", "XDG_RUNTIME_DIR=" + u.runDir()}
	args = append(append(args, env...), argv...)
	cmd := exec.CommandContext(ctx, "setpriv", args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// podman runs the user's own podman CLI (the runtime's tool, not the
// adapter) and returns its stdout; it must succeed.
func (u *rootlessUser) podman(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := u.command(ctx, nil, append([]string{"podman"}, args...)...).Output()
	var stderr string
	if xe, ok := err.(*exec.ExitError); ok {
		stderr = string(xe.Stderr)
	}
	require.NoError(t, err, "podman %v (as %s): %s", args, u.name, stderr)
	return string(out)
}

// newRootlessCLI is newCLIOn for the unprivileged user of the
// podman-rootless row: the binary runs as that user, with no runtime flag
// and no endpoint in its environment (auto-detection finds its rootless
// socket), the stand-in images of services given as SANDBOXER_IMAGE_*.
// The test's cleanup removes, through the rootless service, what the
// prefix left. Without the user (or without root, to become it) the test
// ends through testenv.Unavailable.
func newRootlessCLI(t *testing.T, services ...string) (*cli, *rootlessUser) {
	t.Helper()
	testkit.RequireRuntime(t)
	require.NotEmpty(t, binary, "TestMain builds the binary outside -short")
	name := testenv.Getenv(testenv.EnvPodmanRootlessUser)
	if name == "" {
		testenv.Unavailable(t, testenv.PodmanRootless, "%s is not set (run `make env`)", testenv.EnvPodmanRootlessUser)
	}
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, testenv.PodmanRootless, "running the CLI as %s needs root", name)
	}
	acct, err := user.Lookup(name)
	if err != nil {
		testenv.Unavailable(t, testenv.PodmanRootless, "%v", err)
	}
	r := testruntimes.Connect(t, testenv.PodmanRootless)
	u := &rootlessUser{name: name, home: acct.HomeDir, uid: acct.Uid, gid: acct.Gid, binary: userBinary(t)}
	c := &cli{t: t, rt: r.RT, prefix: "h16" + testkit.RandomHex(4), user: u}
	// The user's environment is its own, not the test's: TestMain's ping
	// timeout (a slow first answer under the suite's load is load, not a
	// runtime that is gone) is handed over as the other tests get it.
	if v := os.Getenv(envPingTimeout); v != "" {
		c.env = append(c.env, envPingTimeout+"="+v)
	}
	for _, s := range services {
		c.env = append(c.env, "SANDBOXER_IMAGE_"+strings.ToUpper(s)+"="+testkit.Image(t, r.RT, s))
	}
	t.Cleanup(c.removeAll)
	return c, u
}

// userBinary copies the built binary where any user may run it (TestMain's
// directory is root's only), for the test.
func userBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sandboxer-rootless-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	src, err := os.Open(binary)
	require.NoError(t, err)
	defer src.Close()
	path := filepath.Join(dir, "sandboxer")
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	return path
}

// TestRootlessDoctorDetectsTheUsersSocket: a user whose
// $XDG_RUNTIME_DIR/podman/podman.sock answers, with no DOCKER_HOST or
// CONTAINER_HOST, gets rootless Podman there, and doctor says so, names
// the socket, and (on cgroup v1, as the host's /sys/fs/cgroup says) that
// limits cannot be enforced and what to do about it.
func TestRootlessDoctorDetectsTheUsersSocket(t *testing.T) {
	c, u := newRootlessCLI(t)
	sock := "unix://" + u.runDir() + "/podman/podman.sock"
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	cgroupV1 := err != nil

	var rep doctorReport
	r := c.run("doctor", "-o", "json")
	require.Equal(t, 0, r.code, "doctor as %s: %s", u.name, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.NotNil(t, rep.Chosen, "a runtime was chosen: %s", rep.Reason)
	assert.Equal(t, "podman", rep.Chosen.Runtime)
	assert.Equal(t, sock, rep.Chosen.Endpoint)
	assert.Equal(t, "rootless Podman socket", rep.Chosen.Source)
	assert.True(t, rep.Chosen.Rootless, "the service says it is rootless")

	text := c.run("doctor")
	require.Equal(t, 0, text.code, "doctor as %s: %s", u.name, text.stderr)
	t.Logf("doctor as %s:\n%s", u.name, text.stdout)
	assert.Contains(t, text.stdout, "chosen: podman (rootless) at "+sock)
	if cgroupV1 {
		assert.Equal(t, "1", rep.Chosen.CgroupVersion)
		assert.Contains(t, text.stdout, "runs rootless on cgroup v1: memory and CPU limits cannot be enforced")
		assert.Contains(t, text.stdout, "cgroup v2 with the memory, cpu and pids controllers delegated")
		assert.Contains(t, text.stdout, "--unenforced-limits")
	} else {
		assert.Contains(t, text.stdout, "limits need cgroup v2 with the memory, cpu and pids controllers delegated")
	}
}

// TestRootlessUpLoginDown: as the unprivileged user, on cgroup v1, `up`
// without the limits opt-out fails (exit 4, naming the opt-out) and leaves
// nothing; with it, `up` provisions postgres, redis and mongo on its
// rootless Podman, their real clients log in with the
// emitted env, no password reaches stderr, and `down` leaves nothing,
// as the user's own podman CLI sees it.
func TestRootlessUpLoginDown(t *testing.T) {
	services := engines.Default.Names()
	c, u := newRootlessCLI(t, services...)
	owner := "rl" + testkit.RandomHex(3)
	refused := c.sbx("up", "--owner", owner, "--services", strings.Join(services, ","))
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil { // cgroup v1
		assert.Equal(t, ExitProvision, refused.code, "without the opt-out, up refuses limits it cannot enforce: %s", refused.stderr)
		assert.Contains(t, lastLine(refused.stderr), "--unenforced-limits", "the error names the opt-out")
		assert.Empty(t, strings.TrimSpace(u.podman(t, "ps", "-a", "--filter", "label="+labels.For(c.prefix).Sandbox+"=1", "--format", "{{.Names}}")), "a refused up leaves nothing")
	}
	up := c.sbx("--unenforced-limits", "up", "--owner", owner, "--services", strings.Join(services, ","))
	require.Equal(t, 0, up.code, "up as %s: %s", u.name, up.stderr)
	env := parseDotenv(t, up.stdout)
	for _, s := range services {
		_, err := engines.Default.Login(testkit.Context(t, time.Minute), s, env[engines.Default.URLName(s, provision.DefaultEnvPrefix)])
		require.NoError(t, err, "a real client logs in to %s with the emitted URL", s)
	}
	pws := passwords(env)
	require.Len(t, pws, len(services), "one password per service")
	for _, pw := range pws {
		assert.NotContains(t, up.stderr, pw, "no password in logs")
	}
	assert.Contains(t, up.stderr, "limits", "the opt-out is not silent")

	ownerLabel := "label=" + labels.For(c.prefix).Owner + "=" + provision.Options{LabelPrefix: c.prefix}.OwnerName(owner)
	listed := strings.Fields(u.podman(t, "ps", "-a", "--filter", ownerLabel, "--format", "{{.Names}}"))
	assert.Len(t, listed, len(services), "the user's podman sees the sandboxes")

	down := c.sbx("down", "--owner", owner)
	require.Equal(t, 0, down.code, "down as %s: %s", u.name, down.stderr)
	assert.Empty(t, strings.TrimSpace(u.podman(t, "ps", "-a", "--filter", ownerLabel, "--format", "{{.Names}}")), "down left nothing")
	assert.Empty(t, strings.TrimSpace(u.podman(t, "volume", "ls", "--filter", "dangling=true", "--format", "{{.Name}}")), "no volume left")
}

// TestRootlessJanitorFollowsTheUsersOwner: as the unprivileged user, with
// the owner container made by the user's own podman CLI, `gc` keeps the
// sandboxes of a live owner and reaps those of a removed one.
func TestRootlessJanitorFollowsTheUsersOwner(t *testing.T) {
	c, u := newRootlessCLI(t, "redis")
	busybox := testkit.Image(t, c.rt, "busybox")
	owner := "jr" + testkit.RandomHex(3)
	ownerName := provision.Options{LabelPrefix: c.prefix}.OwnerName(owner)
	u.podman(t, "run", "-d", "--name", ownerName, "--label", c.prefix+".test=1", busybox, "sleep", "600")

	up := c.sbx("--unenforced-limits", "up", "--owner", owner, "-s", "redis")
	require.Equal(t, 0, up.code, "up as %s: %s", u.name, up.stderr)
	ownerLabel := "label=" + labels.For(c.prefix).Owner + "=" + ownerName
	sandboxes := func() []string {
		return strings.Fields(u.podman(t, "ps", "-a", "--filter", ownerLabel, "--format", "{{.Names}}"))
	}
	require.Len(t, sandboxes(), 1)

	gc := c.sbx("gc", "--grace", "0s")
	require.Equal(t, 0, gc.code, "gc as %s: %s", u.name, gc.stderr)
	assert.Len(t, sandboxes(), 1, "a live owner keeps its sandbox: %s", gc.stdout)

	u.podman(t, "rm", "-f", ownerName)
	gc = c.sbx("gc", "--grace", "0s")
	require.Equal(t, 0, gc.code, "gc as %s: %s", u.name, gc.stderr)
	assert.Contains(t, gc.stdout, "removed")
	assert.Empty(t, sandboxes(), "a removed owner's sandbox is reaped: %s", gc.stdout)
}
