package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/containerd/v2/plugins"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/containerd"
)

// ownerStates are the states an owner container may be in while it owns
// its sandboxes: created (its image still pulling), running, paused, and
// exited (stopped, to be restarted).
var ownerStates = []runtime.State{runtime.StateCreated, runtime.StateRunning, runtime.StatePaused, runtime.StateExited}

// ownerTool makes and removes owner containers the way the runtime's own
// users do, never through sandboxer's adapter.
type ownerTool interface {
	// make creates a container that the runtime's tools know by name, puts
	// it in state, checks that the tool reports that state, and registers
	// its removal as a cleanup.
	make(ctx context.Context, t *testing.T, name string, state runtime.State)
	// remove removes the container named name, in whatever state.
	remove(ctx context.Context, t *testing.T, name string)
}

// ownerToolFor returns the tool real users drive runtime b with: the
// docker CLI, the podman CLI, and on containerd a nerdctl-style container
// (namespace "default", a random 64-hex ID, the name in "nerdctl/name")
// made with the containerd client.
func ownerToolFor(t *testing.T, b testruntimes.Runtime, label string) ownerTool {
	t.Helper()
	image := testkit.Image(t, b.RT, "busybox")
	switch b.Name {
	case "docker", "podman":
		return &cliTool{bin: b.Name, image: image, label: label}
	case testenv.PodmanRootless:
		// The podman CLI as a remote client of the user's rootless
		// service: the storage is the user's, not root's.
		return &cliTool{bin: "podman", pre: []string{"--url", testenv.PodmanRootlessHost(t)}, image: image, label: label}
	case containerd.Name:
		return newNerdctlTool(t, testenv.Image(t, b.Name, "busybox"), "default")
	}
	t.Fatalf("no owner tool for runtime %q", b.Name)
	return nil
}

// cliTool drives the docker or podman CLI (podman locally, rootful, on the
// storage its service shares, or a remote client of the rootless one;
// docker through DOCKER_HOST).
type cliTool struct {
	bin   string
	pre   []string // global flags before every command
	image string
	label string
}

func (c *cliTool) run(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, c.bin, append(slices.Clone(c.pre), args...)...)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s: %s", c.bin, strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

func (c *cliTool) make(ctx context.Context, t *testing.T, name string, state runtime.State) {
	t.Helper()
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = exec.CommandContext(cctx, c.bin, append(slices.Clone(c.pre), "rm", "-f", name)...).Run()
	})
	switch state {
	case runtime.StateCreated:
		c.run(ctx, t, "create", "--name", name, "--label", c.label+"=1", c.image, "sleep", "3600")
	case runtime.StateRunning, runtime.StatePaused:
		c.run(ctx, t, "run", "-d", "--name", name, "--label", c.label+"=1", c.image, "sleep", "3600")
		if state == runtime.StatePaused {
			c.run(ctx, t, "pause", name)
		}
	case runtime.StateExited:
		c.run(ctx, t, "run", "--name", name, "--label", c.label+"=1", c.image, "true")
	}
	assert.Equal(t, string(state), c.run(ctx, t, "inspect", "--format", "{{.State.Status}}", name), "%s reports %s", c.bin, name)
}

func (c *cliTool) remove(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	c.run(ctx, t, "rm", "-f", name)
}

// nerdctlTool makes containers as nerdctl does: in its namespace, under a
// random 64-hex ID, with the user's name in the nerdctl/name label.
type nerdctlTool struct {
	cli   *client.Client
	ns    string
	image client.Image
	root  string
	ids   map[string]string // name -> ID
}

func newNerdctlTool(t *testing.T, ref, ns string) *nerdctlTool {
	t.Helper()
	addr := os.Getenv(containerd.EnvAddress)
	if addr == "" {
		addr = containerd.DefaultAddress
	}
	cli, err := client.New(addr)
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), ns), 5*time.Minute)
	defer cancel()
	img, err := cli.GetImage(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		resolver := docker.NewResolver(docker.ResolverOptions{
			Hosts: docker.ConfigureDefaultRegistries(docker.WithPlainHTTP(docker.MatchLocalhost)),
		})
		img, err = cli.Pull(ctx, ref, client.WithPullUnpack, client.WithResolver(resolver))
	}
	require.NoError(t, err, "pull %s into namespace %s", ref, ns)
	return &nerdctlTool{cli: cli, ns: ns, image: img, root: os.Getenv(containerd.EnvRuncRoot), ids: map[string]string{}}
}

func (n *nerdctlTool) ctx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, n.ns)
}

func (n *nerdctlTool) make(ctx context.Context, t *testing.T, name string, state runtime.State) {
	t.Helper()
	ctx = n.ctx(ctx)
	id := testkit.RandomHex(32)
	n.ids[name] = id
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		n.delete(n.ctx(cctx), id)
	})
	args := []string{"sleep", "3600"}
	if state == runtime.StateExited {
		args = []string{"true"}
	}
	var runc any
	if n.root != "" {
		runc = &runcoptions.Options{Root: n.root}
	}
	c, err := n.cli.NewContainer(ctx, id,
		client.WithNewSnapshot(id, n.image),
		client.WithRuntime(plugins.RuntimeRuncV2, runc),
		client.WithNewSpec(oci.WithImageConfig(n.image), oci.WithProcessArgs(args...)),
		client.WithContainerLabels(map[string]string{containerd.NerdctlNameLabel: name, "nerdctl/namespace": n.ns}),
	)
	require.NoError(t, err)
	if state == runtime.StateCreated {
		return // nerdctl create: a container, no task
	}
	task, err := c.NewTask(ctx, cio.NullIO)
	require.NoError(t, err)
	exited, err := task.Wait(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Start(ctx))
	want := client.Running
	switch state {
	case runtime.StatePaused:
		require.NoError(t, task.Pause(ctx))
		want = client.Paused
	case runtime.StateExited:
		select {
		case <-exited:
		case <-ctx.Done():
			t.Fatalf("%s did not exit: %v", name, ctx.Err())
		}
		want = client.Stopped
	}
	st, err := task.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, st.Status, "containerd reports %s", name)
}

func (n *nerdctlTool) remove(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	id, ok := n.ids[name]
	require.True(t, ok, "no container named %s was made", name)
	n.delete(n.ctx(ctx), id)
	_, err := n.cli.LoadContainer(n.ctx(ctx), id)
	require.True(t, cerrdefs.IsNotFound(err), "%s still exists: %v", name, err)
}

// delete removes a container with its task, as `nerdctl rm -f` does.
func (n *nerdctlTool) delete(ctx context.Context, id string) {
	c, err := n.cli.LoadContainer(ctx, id)
	if err != nil {
		return
	}
	if task, err := c.Task(ctx, nil); err == nil {
		_, _ = task.Delete(ctx, client.WithProcessKill)
	}
	_ = c.Delete(ctx, client.WithSnapshotCleanup)
}

// ownerStatesOn are the ownerStates a container can be in on b: all of
// them, but paused where the runtime is rootless on cgroup v1 (no cgroup
// of its own to freeze: `podman pause` refuses), so no owner is paused
// there.
func ownerStatesOn(ctx context.Context, t *testing.T, b testruntimes.Runtime) []runtime.State {
	t.Helper()
	info, err := b.RT.Version(ctx)
	require.NoError(t, err)
	if !info.Rootless || info.CgroupVersion != "1" {
		return ownerStates
	}
	t.Logf("%s is rootless on cgroup v1: no container can be paused, so no owner is", b.Name)
	return slices.DeleteFunc(slices.Clone(ownerStates), func(s runtime.State) bool { return s == runtime.StatePaused })
}

// TestJanitorOwnersMadeByTheRuntimesTools: owner containers made by the
// runtime's own tools (docker and podman CLIs; on containerd a
// nerdctl-style container in namespace "default") keep their sandboxes in
// every state a container exists in (created, running, paused, exited),
// past a grace window of 1 ns; once the tool removes them, the next sweep
// removes their sandboxes.
func TestJanitorOwnersMadeByTheRuntimesTools(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		tool := ownerToolFor(t, b, e.TestLabel())
		services := []string{"redis"}
		p := e.Provisioner(nil)
		states := ownerStatesOn(ctx, t, b)

		owned := map[runtime.State][]string{} // state -> its owner's sandbox names
		var g errgroup.Group
		sandboxes := make([][]string, len(states))
		for i, st := range states {
			g.Go(func() error {
				sb, err := p.Provision(ctx, string(st), services)
				if err != nil {
					return fmt.Errorf("provision for the %s owner: %w", st, err)
				}
				sandboxes[i] = janContainerNames(sb)
				return nil
			})
		}
		require.NoError(t, g.Wait())
		for i, st := range states {
			owned[st] = sandboxes[i]
			tool.make(ctx, t, p.OwnerName(string(st)), st)
		}

		e.pastGrace(ctx)
		j := e.Janitor(time.Nanosecond)
		rep, err := j.Sweep(ctx)
		require.NoError(t, err)
		assert.Empty(t, rep.Removed, "a sandbox of an existing owner was removed")
		for _, st := range states {
			assert.Subset(t, janNames(rep.Kept), owned[st], "the %s owner keeps its sandboxes", st)
		}
		require.Len(t, e.SandboxNames(ctx), len(states))

		for _, st := range states {
			tool.remove(ctx, t, p.OwnerName(string(st)))
			rep, err := j.Sweep(ctx)
			require.NoError(t, err)
			assert.ElementsMatch(t, owned[st], janNames(rep.Removed), "removing the %s owner orphans exactly its sandboxes", st)
			assert.NotContains(t, e.SandboxNames(ctx), owned[st][0])
		}
		assert.Empty(t, e.SandboxNames(ctx))
	})
}

// TestJanitorContainerdOwnerByIDInAnyNamespace: on containerd an owner is
// also the container whose ID is the owner name, in any namespace (as
// `ctr run <image> <id>` names it); its sandboxes live while it exists.
func TestJanitorContainerdOwnerByIDInAnyNamespace(t *testing.T) {
	b := testruntimes.Connect(t, containerd.Name)
	e := newEnv(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A namespace of some other tool's (kept across runs, like nerdctl's
	// "default": it holds the pulled image).
	tool := newNerdctlTool(t, testenv.Image(t, b.Name, "busybox"), "agents")
	services := []string{"redis"}
	p := e.Provisioner(nil)
	sb, err := p.Provision(ctx, "byid", services)
	require.NoError(t, err)

	owner := p.OwnerName("byid")
	nctx := tool.ctx(ctx)
	c, err := tool.cli.NewContainer(nctx, owner,
		client.WithNewSnapshot(owner, tool.image),
		client.WithNewSpec(oci.WithImageConfig(tool.image), oci.WithProcessArgs("sleep", "3600")),
	)
	require.NoError(t, err)
	tool.ids[owner] = c.ID()
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		tool.delete(tool.ctx(cctx), owner)
	})

	e.pastGrace(ctx)
	j := e.Janitor(time.Nanosecond)
	rep, err := j.Sweep(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, janContainerNames(sb), janNames(rep.Kept), "kept while a container with the owner's ID exists in namespace %s", tool.ns)

	tool.remove(ctx, t, owner)
	rep, err = j.Sweep(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, janContainerNames(sb), janNames(rep.Removed))
	assert.Empty(t, e.SandboxNames(ctx))
}
