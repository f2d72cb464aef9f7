package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/containerd"
)

// ownCallTimeout bounds one command of a runtime's own CLI.
const ownCallTimeout = 2 * time.Minute

// ownTool is a row's own CLI, as its user runs it: docker at the daemon's
// socket, podman at the rootful service's, the rootless row's podman run
// as that user (its default connection: its rootless service), ctr at
// containerd's socket and namespace. Secrets reach it through its
// environment (`exec -e NAME`), never its argv.
type ownTool struct {
	b testruntimes.Runtime
	// argv is the CLI and its global flags.
	argv []string
	// rootless is the rootless row's user; nil on the other rows.
	rootless *user.User
	// kube: the CLI is kubectl, in the adapter's namespace; a network is
	// the label kubeNetworkLabel, a container a pod, its address the pod
	// IP.
	kube bool
}

// kubeNetworkLabel is the pod label by which the kubernetes adapter puts a
// pod on a network (its README: label an agent pod so to reach its
// sandboxes).
const kubeNetworkLabel = "sandboxer.internal/network"

func newOwnTool(t testing.TB, b testruntimes.Runtime) ownTool {
	t.Helper()
	o := ownTool{b: b}
	switch {
	case b.Name == testenv.PodmanRootless:
		name := testenv.Getenv(testenv.EnvPodmanRootlessUser)
		if name == "" {
			testenv.Unavailable(t, testenv.PodmanRootless, "%s is not set (run `make env`)", testenv.EnvPodmanRootlessUser)
		}
		u, err := user.Lookup(name)
		require.NoError(t, err)
		o.rootless = u
		o.argv = []string{"setpriv", "--reuid=" + u.Uid, "--regid=" + u.Gid, "--init-groups", "--", "podman"}
	case b.Name == testenv.Kubernetes:
		ns, ok := b.RT.(interface{ Namespace() string })
		require.True(t, ok, "the kubernetes adapter names its namespace")
		o.kube = true
		o.argv = []string{"kubectl", "--kubeconfig", testenv.Kubeconfig(t), "--namespace", ns.Namespace()}
	case b.RT.Name() == containerd.Name:
		ns, ok := b.RT.(interface{ Namespace() string })
		require.True(t, ok, "the containerd adapter names its namespace")
		o.argv = []string{"ctr", "--address", strings.TrimPrefix(b.RT.Endpoint(), "unix://"), "--namespace", ns.Namespace()}
	case b.Docker != nil:
		o.argv = []string{"docker", "--host", b.RT.Endpoint()}
	default:
		o.argv = []string{"podman", "--url", b.RT.Endpoint()}
	}
	return o
}

// ctr reports whether the row's CLI is ctr, which neither makes networks
// nor joins containers to the adapter's CNI networks (there is no nerdctl
// on the test host): on that row the adapter does those, and the check
// says so in its log.
func (o ownTool) ctr() bool { return o.b.RT.Name() == containerd.Name }

// ownResult is one finished command of a row's CLI.
type ownResult struct {
	stdout, stderr string
	code           int
}

// run runs the CLI with args, env added to its environment, and returns
// what it printed and its exit code; err only when it could not run or
// its deadline passed.
func (o ownTool) run(ctx context.Context, env []string, args ...string) (ownResult, error) {
	return o.runStdin(ctx, "", env, args...)
}

// runStdin is run with stdin as the command's standard input.
func (o ownTool) runStdin(ctx context.Context, stdin string, env []string, args ...string) (ownResult, error) {
	ctx, cancel := context.WithTimeout(ctx, ownCallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.argv[0], append(slices.Clone(o.argv[1:]), args...)...)
	if o.rootless != nil {
		cmd.Env = append([]string{"HOME=" + o.rootless.HomeDir, "USER=" + o.rootless.Username,
			"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "XDG_RUNTIME_DIR=/run/user/" + o.rootless.Uid}, env...)
	} else {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	res := ownResult{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("%s %s: %w (stderr: %s)", o.argv[0], strings.Join(args, " "), ctx.Err(), res.stderr)
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		return res, fmt.Errorf("%s %s: %w", o.argv[0], strings.Join(args, " "), err)
	}
	return res, nil
}

// must runs the CLI and fails the test unless it exits 0; it returns
// stdout, trimmed.
func (o ownTool) must(t testing.TB, ctx context.Context, args ...string) string {
	t.Helper()
	res, err := o.run(ctx, nil, args...)
	require.NoError(t, err)
	require.Zero(t, res.code, "%s %s: %s", o.argv[len(o.argv)-1], strings.Join(args, " "), res.stderr)
	return strings.TrimSpace(res.stdout)
}

// container starts a container called name from image running argv on
// network (the runtime's default when ""), labelled with labels, with the
// row's CLI; on the ctr row with the adapter (ctr joins no CNI network).
func (o ownTool) container(t testing.TB, ctx context.Context, name, image, network string, labels map[string]string, argv ...string) {
	t.Helper()
	if o.ctr() {
		_, err := o.b.RT.Run(ctx, runtime.RunSpec{Name: name, Image: image, Command: argv, Labels: labels, Network: network})
		require.NoError(t, err, "run %s on %q (the adapter: ctr joins no CNI network)", name, network)
		return
	}
	if o.kube {
		var kv []string
		for k, v := range labels {
			kv = append(kv, k+"="+v)
		}
		if network != "" && network != "pod" {
			kv = append(kv, kubeNetworkLabel+"="+network)
		}
		o.must(t, ctx, append([]string{"run", name, "--image", image, "--restart", "Never", "--labels", strings.Join(kv, ","), "--command", "--"}, argv...)...)
		o.must(t, ctx, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=180s")
		return
	}
	args := []string{"run", "-d", "--name", name}
	for k, v := range labels {
		args = append(args, "--label", k+"="+v)
	}
	if network != "" {
		args = append(args, "--network", network)
	}
	o.must(t, ctx, append(append(args, image), argv...)...)
}

// connect attaches container to network with the row's CLI (`docker
// network connect`, `podman network connect`).
func (o ownTool) connect(t testing.TB, ctx context.Context, network, container string) {
	t.Helper()
	require.False(t, o.ctr(), "ctr has no network connect")
	o.must(t, ctx, "network", "connect", network, container)
}

// addresses are the IPv4 addresses of a container by network, as the
// row's CLI inspect reports them (on the ctr row, which reports none, the
// adapter's Inspect).
func (o ownTool) addresses(t testing.TB, ctx context.Context, container string) map[string]string {
	t.Helper()
	if o.ctr() {
		c, err := o.b.RT.Inspect(ctx, container)
		require.NoError(t, err)
		return c.Networks
	}
	if o.kube {
		var pod struct {
			Metadata struct{ Labels map[string]string }
			Status   struct{ PodIP string }
		}
		require.NoError(t, json.Unmarshal([]byte(o.must(t, ctx, "get", "pod", container, "-o", "json")), &pod))
		require.NotEmpty(t, pod.Status.PodIP, "pod %s has an IP", container)
		network := pod.Metadata.Labels[kubeNetworkLabel]
		if network == "" {
			network = "pod"
		}
		return map[string]string{network: pod.Status.PodIP}
	}
	var nets map[string]struct{ IPAddress string }
	require.NoError(t, json.Unmarshal([]byte(o.must(t, ctx, "inspect", "--format", "{{json .NetworkSettings.Networks}}", container)), &nets))
	out := map[string]string{}
	for name, n := range nets {
		if n.IPAddress != "" {
			out[name] = n.IPAddress
		}
	}
	return out
}

// ctrID is, as ctr lists it, the ID of the container called name: the one
// whose nerdctl/name label is name, else name itself (a container made
// when the adapter's ID was the name).
func (o ownTool) ctrID(ctx context.Context, name string) (string, error) {
	res, err := o.run(ctx, nil, "containers", "ls", "-q", `labels."`+containerd.NerdctlNameLabel+`"==`+name)
	if err != nil {
		return "", err
	}
	if res.code != 0 {
		return "", fmt.Errorf("ctr containers ls: exit %d: %s", res.code, res.stderr)
	}
	switch ids := strings.Fields(res.stdout); len(ids) {
	case 0:
		return name, nil
	case 1:
		return ids[0], nil
	default:
		return "", fmt.Errorf("ctr lists %d containers named %s: %v", len(ids), name, ids)
	}
}

// exec runs argv in container with the row's CLI (docker/podman exec, ctr
// tasks exec); env names variables of secrets whose values are passed
// through the CLI's own environment (`-e NAME`), not its argv (ctr's exec
// inherits the container's env instead).
func (o ownTool) exec(ctx context.Context, container string, env []string, argv ...string) (ownResult, error) {
	if o.kube {
		if len(env) > 0 {
			return ownResult{}, errors.New("kubectl exec takes no env: pass secrets on stdin")
		}
		return o.run(ctx, nil, append([]string{"exec", container, "--"}, argv...)...)
	}
	if o.ctr() {
		id, err := o.ctrID(ctx, container)
		if err != nil {
			return ownResult{}, err
		}
		return o.run(ctx, nil, append([]string{"tasks", "exec", "--exec-id", "sbxiso-" + testkit.RandomHex(4), id}, argv...)...)
	}
	args := []string{"exec"}
	var passed []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(cliOwnEnv, name) {
			// The CLI's own variable (HOME=/tmp for the container would
			// point the rootless podman at another storage, where the
			// container is "no such container"): in argv, never a secret.
			args = append(args, "-e", kv)
			continue
		}
		args = append(args, "-e", name)
		passed = append(passed, kv)
	}
	return o.run(ctx, passed, append(append(args, container), argv...)...)
}

// cliOwnEnv are the variables the CLI itself reads (the rootless podman
// finds its storage and service by them), which a container's environment
// must not replace in the CLI's.
var cliOwnEnv = []string{"HOME", "USER", "PATH", "XDG_RUNTIME_DIR"}

// network creates a network with the row's CLI (on the ctr row the
// adapter's CreateNetwork), labelled, and returns its name; the caller
// removes it.
func (o ownTool) network(t testing.TB, ctx context.Context, name string, labels map[string]string) string {
	t.Helper()
	if o.kube {
		return name // a network is a pod label: nothing to make
	}
	if o.ctr() {
		_, err := o.b.RT.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: labels})
		require.NoError(t, err, "create network %s (the adapter: ctr makes none)", name)
		return name
	}
	args := []string{"network", "create"}
	for k, v := range labels {
		args = append(args, "--label", k+"="+v)
	}
	o.must(t, ctx, append(args, name)...)
	return name
}

// removeNetwork removes a network made by network; absent is fine.
func (o ownTool) removeNetwork(ctx context.Context, name string) error {
	if o.kube {
		return nil
	}
	if o.ctr() {
		return o.b.RT.RemoveNetwork(ctx, name)
	}
	res, err := o.run(ctx, nil, "network", "rm", name)
	if err != nil {
		return err
	}
	if res.code != 0 && !strings.Contains(strings.ToLower(res.stderr), "not found") && !strings.Contains(res.stderr, "no such network") {
		return fmt.Errorf("network rm %s: exit %d: %s", name, res.code, res.stderr)
	}
	return nil
}

// defaultNetwork is the network a container of the row's CLI joins when
// none is named, as its inspect names it: docker's "bridge", podman's
// "podman" (the rootless row's too: named explicitly, since its CLI's
// default is the user's pasta, no bridge), the containerd adapter's own.
func (o ownTool) defaultNetwork(t testing.TB, ctx context.Context) string {
	t.Helper()
	switch {
	case o.kube:
		return "pod" // the flat pod network: no label
	case o.ctr():
		return "" // the adapter's default network: its name is the adapter's business
	case o.b.Docker != nil:
		return "bridge"
	}
	return "podman"
}

// cleanupLabelled registers the removal of the pods that carry labels,
// on the kubectl row (the adapter lists only the pods it made); the other
// rows' containers the adapter lists and removes.
func (o ownTool) cleanupLabelled(t testing.TB, labels map[string]string) {
	if !o.kube {
		testkit.CleanupLabelled(t, o.b.RT, labels)
		return
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for k, v := range labels {
			res, err := o.run(ctx, nil, "delete", "pod", "-l", k+"="+v, "--grace-period=0", "--force", "--wait=true")
			if err != nil || res.code != 0 {
				t.Errorf("cleanup: kubectl delete pod -l %s=%s: %v %s", k, v, err, res.stderr)
			}
		}
	})
}

// ref is how the row's CLI names c: its ID, or on kubectl its pod's name.
func (o ownTool) ref(c provision.Container) string {
	if o.kube {
		return c.Name
	}
	return c.ID
}
