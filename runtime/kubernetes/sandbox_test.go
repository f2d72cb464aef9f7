package kubernetes_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	_ "github.com/roboco/sandboxer/engines/all/alltest"
	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/kubernetes"
)

// The tests of this file provision on the cluster as the CLI does
// (provision and janitor on the adapter, in network mode: a cluster
// publishes nothing on the provisioner's 127.0.0.1), and look at the
// result the way a cluster's user does: kubectl, and the engines' own
// clients in pods of their own.

// world is a test's world on the cluster (testruntimes.World: its own label
// prefix, its sandboxes and labelled pods removed when the test ends).
func world(t *testing.T) (*cluster, *testruntimes.World) {
	t.Helper()
	testkit.RequireRuntime(t)
	cl := newCluster(t)
	return cl, testruntimes.NewWorld(t, testruntimes.Runtime{Name: kubernetes.Name, RT: cl.runtime(t)})
}

// networkProvisioner is a provisioner of w in network mode, on a network
// of the test's (a cluster publishes nothing on the provisioner's
// 127.0.0.1).
func networkProvisioner(ctx context.Context, w *testruntimes.World) *provision.Provisioner {
	network := w.Network(ctx)
	return w.Provisioner(func(o *provision.Options) { o.Network = network })
}

// apply feeds manifest to `kubectl apply -f -` (on stdin: a Secret's value
// never reaches an argv).
func (cl *cluster) apply(t *testing.T, ctx context.Context, manifest string) {
	t.Helper()
	var errb bytes.Buffer
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", cl.kubeconfig, "-n", cl.namespace, "apply", "-f", "-")
	cmd.Stdin, cmd.Stderr = strings.NewReader(manifest), &errb
	require.NoError(t, cmd.Run(), "kubectl apply: %s", errb.String())
}

// podYAML is a pod on the test's node (the test cluster runs no
// scheduler), with the world's test label so that its cleanup removes it.
func podYAML(w *testruntimes.World, node, name, image, secret string, command ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  labels: {%q: \"1\"}\n", name, w.TestLabel())
	fmt.Fprintf(&b, "spec:\n  nodeName: %s\n  restartPolicy: Never\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 0\n", node)
	fmt.Fprintf(&b, "  containers:\n  - name: main\n    image: %s\n    command: [", image)
	for i, c := range command {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", c)
	}
	b.WriteString("]\n")
	if secret != "" {
		fmt.Fprintf(&b, "    envFrom:\n    - secretRef: {name: %s}\n", secret)
	}
	return b.String()
}

// phase is a pod's phase as kubectl reports it ("" once it is gone).
func (cl *cluster) phase(t *testing.T, ctx context.Context, pod string) string {
	t.Helper()
	return strings.TrimSpace(cl.kubectl(t, ctx, "get", "pod", pod, "--ignore-not-found", "-o", "jsonpath={.status.phase}"))
}

// gone reports whether no pod of this name and no Secret of that pod
// (<name>.sandboxer-env) is left.
func (cl *cluster) gone(t *testing.T, ctx context.Context, name string) error {
	t.Helper()
	left := strings.TrimSpace(cl.kubectl(t, ctx, "get", "pod/"+name, "secret/"+name+".sandboxer-env", "--ignore-not-found", "-o", "name"))
	if left != "" {
		return fmt.Errorf("still there: %s", strings.ReplaceAll(left, "\n", ", "))
	}
	return nil
}

// requireSecret fails the test unless the env Secret of pod exists: the
// precondition that makes a later gone() mean something.
func (cl *cluster) requireSecret(t *testing.T, ctx context.Context, pod string) {
	t.Helper()
	require.Equal(t, "secret/"+pod+".sandboxer-env", strings.TrimSpace(cl.kubectl(t, ctx, "get", "secret", pod+".sandboxer-env", "--ignore-not-found", "-o", "name")), "the env Secret of %s", pod)
}

// assertAdoptedBy asserts, as kubectl reads them, that each sandbox pod
// of sb has exactly one ownerReference, to the agent pod (its kind, name
// and UID), and that its env Secret exists (so that a later gone() means
// something).
func (cl *cluster) assertAdoptedBy(t *testing.T, ctx context.Context, agent string, sb provision.Sandbox) {
	t.Helper()
	agentUID := strings.TrimSpace(cl.kubectl(t, ctx, "get", "pod", agent, "-o", "jsonpath={.metadata.uid}"))
	require.NotEmpty(t, agentUID)
	for _, c := range sb.Containers {
		refs := cl.kubectl(t, ctx, "get", "pod", c.Name, "-o", `jsonpath={range .metadata.ownerReferences[*]}{.kind}/{.name}/{.uid}{"\n"}{end}`)
		assert.Equal(t, "Pod/"+agent+"/"+agentUID, strings.TrimSpace(refs), "%s is owned by the agent pod", c.Name)
		cl.requireSecret(t, ctx, c.Name)
	}
}

// deleteAgent deletes the agent pod with kubectl and waits until the
// cluster's garbage collector has removed every sandbox pod of sb and its
// Secret, with no sandboxer call in between; it returns how long that took.
func (cl *cluster) deleteAgent(t *testing.T, ctx context.Context, agent string, sb provision.Sandbox) time.Duration {
	t.Helper()
	cl.kubectl(t, ctx, "delete", "pod", agent, "--wait=true")
	start := time.Now()
	for _, c := range sb.Containers {
		testkit.Poll(t, 3*time.Minute, 500*time.Millisecond, func() error { return cl.gone(t, ctx, c.Name) },
			"the garbage collector deletes %s and its Secret", c.Name)
	}
	return time.Since(start)
}

// TestSandboxesServeRealClientsInOtherPods provisions every engine on the
// cluster, then logs in to each from a pod of its own, with the engine's
// own client (its kit's CLILogin: psql, redis-cli, mongosh, mariadb) from
// the stand-in image, at the URL the provisioner handed out: the pod address, reached
// across the cluster's pod network.
func TestSandboxesServeRealClientsInOtherPods(t *testing.T) {
	cl, w := world(t)
	ctx := testkit.Context(t, 8*time.Minute)
	p := networkProvisioner(ctx, w)
	sb, err := p.Provision(ctx, w.Owner("wire"), engines.Default.Names())
	require.NoError(t, err)
	require.Len(t, sb.Containers, len(engines.Default.Names()))

	for _, c := range sb.Containers {
		t.Run(c.Engine, func(t *testing.T) {
			eng, _ := engines.Default.Lookup(c.Engine)
			kit, err := enginetest.KitOf(eng)
			require.NoError(t, err)
			script, want := kit.CLILogin()
			podIP := strings.TrimSpace(cl.kubectl(t, ctx, "get", "pod", c.Name, "-o", "jsonpath={.status.podIP}"))
			require.NotEmpty(t, podIP)
			assert.Equal(t, podIP, c.Endpoint.Host, "the handed-out address is the sandbox pod's")
			url, err := testruntimes.URL(sb, c)
			require.NoError(t, err)

			name := "client-" + c.Name
			cl.apply(t, ctx, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  labels: {%q: \"1\"}\nstringData:\n  URL: %q\n", name, w.TestLabel(), url))
			t.Cleanup(func() { cl.kubectl(t, context.Background(), "delete", "secret", name, "--ignore-not-found") })
			cl.apply(t, ctx, podYAML(w, cl.node, name, w.Images[c.Engine], name, "sh", "-c", script))
			testkit.Poll(t, 3*time.Minute, 200*time.Millisecond, func() error {
				if ph := cl.phase(t, ctx, name); ph != "Succeeded" && ph != "Failed" {
					return fmt.Errorf("client pod %s is %q", name, ph)
				}
				return nil
			})
			logs := strings.TrimSpace(cl.kubectl(t, ctx, "logs", name))
			require.Equal(t, "Succeeded", cl.phase(t, ctx, name), "the client's output: %s", logs)
			assert.Equal(t, want, logs)
		})
	}
}

// TestAdoptedSandboxesGoWithTheirAgentPod is the owner lifetime on a
// cluster: sandboxes provisioned before their agent pod exist unadopted
// (the janitor's grace covers them); once the agent pod is made (with
// kubectl, as an orchestrator would), sandboxer adopts them, and when the
// agent pod is deleted the cluster's garbage collector deletes the
// sandbox pods and their Secrets, with no sandboxer call in between. A
// sandbox whose agent never came is not adopted, outlives the other
// agent, and is the janitor's to remove.
func TestAdoptedSandboxesGoWithTheirAgentPod(t *testing.T) {
	cl, w := world(t)
	ctx := testkit.Context(t, 8*time.Minute)
	p := networkProvisioner(ctx, w)
	id, lonely := w.Owner("ad"), w.Owner("lonely")
	agent := p.OwnerName(id)

	sb, err := p.Provision(ctx, id, []string{"redis", "mongo"})
	require.NoError(t, err)
	assert.Empty(t, sb.AdoptedBy, "no agent pod yet")
	other, err := p.Provision(ctx, lonely, []string{"redis"})
	require.NoError(t, err)
	_, err = p.Adopt(ctx, id)
	require.ErrorIs(t, err, runtime.ErrNotFound, "no agent pod to adopt by")

	cl.apply(t, ctx, podYAML(w, cl.node, agent, w.Images["redis"], "", "sleep", "3600"))
	adopted, err := p.Adopt(ctx, id)
	require.NoError(t, err)
	require.Len(t, adopted, 2)
	cl.assertAdoptedBy(t, ctx, agent, sb)
	again, err := p.Adopt(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, again, "adopted already")

	// The agent pod goes; nothing of sandboxer runs from here on.
	took := cl.deleteAgent(t, ctx, agent, sb)
	t.Logf("the cluster deleted the adopted sandboxes %s after their agent pod", took.Round(time.Second))

	lonelyName := other.Containers[0].Name
	assert.Equal(t, "Running", cl.phase(t, ctx, lonelyName), "a sandbox that was never adopted outlives another agent")
	cl.requireSecret(t, ctx, lonelyName)
	j, err := janitor.New(w.RT, janitor.Options{Prefix: w.Prefix, NoGrace: true})
	require.NoError(t, err)
	rep, err := j.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{lonelyName}, names(rep.Removed), "the janitor removes the never-adopted orphan")
	require.NoError(t, cl.gone(t, ctx, lonelyName))
}

// TestJanitorAdoptsOnceTheAgentPodExists: a janitor sweep adopts the
// sandboxes of an agent pod that appeared after them, inside the grace
// window too, and a second sweep adopts nothing again.
func TestJanitorAdoptsOnceTheAgentPodExists(t *testing.T) {
	cl, w := world(t)
	ctx := testkit.Context(t, 5*time.Minute)
	p := networkProvisioner(ctx, w)
	id := w.Owner("jan")
	sb, err := p.Provision(ctx, id, []string{"redis"})
	require.NoError(t, err)
	j, err := janitor.New(w.RT, janitor.Options{Prefix: w.Prefix})
	require.NoError(t, err)

	rep, err := j.Sweep(ctx)
	require.NoError(t, err)
	assert.Empty(t, rep.Adopted, "no agent pod yet")
	assert.Equal(t, []string{sb.Containers[0].Name}, names(rep.Skipped))

	cl.apply(t, ctx, podYAML(w, cl.node, p.OwnerName(id), w.Images["redis"], "", "sleep", "3600"))
	rep, err = j.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{sb.Containers[0].Name}, names(rep.Adopted))
	owner := cl.kubectl(t, ctx, "get", "pod", sb.Containers[0].Name, "-o", "jsonpath={.metadata.ownerReferences[0].name}")
	assert.Equal(t, p.OwnerName(id), owner)

	rep, err = j.Sweep(ctx)
	require.NoError(t, err)
	assert.Empty(t, rep.Adopted, "the second sweep sees the adoption (Container.AdoptedBy)")
	listed, err := w.RT.List(ctx, w.SandboxLabels())
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.Equal(t, p.OwnerName(id), listed[0].AdoptedBy)
}

// TestProvisionAdoptsWhenTheAgentPodExists: an agent pod made first (with
// kubectl, as an orchestrator would) adopts the sandboxes in Provision
// itself: they carry ownerReferences to it, and deleting it with kubectl
// makes the cluster's garbage collector remove them and their Secrets,
// with no sandboxer call in between.
func TestProvisionAdoptsWhenTheAgentPodExists(t *testing.T) {
	cl, w := world(t)
	ctx := testkit.Context(t, 6*time.Minute)
	p := networkProvisioner(ctx, w)
	id := w.Owner("first")
	agent := p.OwnerName(id)
	cl.apply(t, ctx, podYAML(w, cl.node, agent, w.Images["redis"], "", "sleep", "3600"))

	sb, err := p.Provision(ctx, id, []string{"redis", "mongo"})
	require.NoError(t, err)
	assert.Equal(t, agent, sb.AdoptedBy, "Provision adopted them")
	require.Len(t, sb.Containers, 2)
	cl.assertAdoptedBy(t, ctx, agent, sb)
	took := cl.deleteAgent(t, ctx, agent, sb)
	t.Logf("the cluster deleted the sandboxes adopted at Provision %s after their agent pod", took.Round(time.Second))
}

func names(sbs []janitor.Sandbox) []string {
	out := []string{}
	for _, s := range sbs {
		out = append(out, s.Name)
	}
	return out
}
