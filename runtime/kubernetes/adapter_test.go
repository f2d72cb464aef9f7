package kubernetes_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/kubernetes"
)

// adapterLabel marks what these tests make, with a random value per test.
const adapterLabel = "sandboxer.k8s-adapter-test"

// harness is one test's cluster and adapter, with everything it makes
// labelled adapterLabel=<id> and removed when it ends.
type harness struct {
	cl *cluster
	rt *kubernetes.Runtime
	id string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	testkit.RequireRuntime(t)
	cl := newCluster(t)
	h := &harness{cl: cl, rt: cl.runtime(t), id: testkit.RandomHex(4)}
	testkit.CleanupLabelled(t, h.rt, map[string]string{adapterLabel: h.id})
	return h
}

// spec is a busybox pod that sleeps, named and labelled for this test.
func (h *harness) spec(t *testing.T) runtime.RunSpec {
	return runtime.RunSpec{
		Name:    "sbx-k8s-" + h.id + "-" + testkit.RandomHex(3),
		Image:   testkit.Image(t, h.rt, "busybox"),
		Command: []string{"sleep", "3600"},
		Labels:  map[string]string{adapterLabel: h.id},
	}
}

// pod reads a pod with kubectl, as a user would.
func (h *harness) pod(t *testing.T, ctx context.Context, name string) corev1.Pod {
	t.Helper()
	var p corev1.Pod
	require.NoError(t, json.Unmarshal([]byte(h.cl.kubectl(t, ctx, "get", "pod", name, "-o", "json")), &p))
	return p
}

// TestEnvIsASecretOwnedByThePod: the run spec's env reaches PID 1 from a
// Secret the pod owns, never from the pod spec, and Remove deletes the
// Secret; an exec's env (spaces, quotes, newlines) reaches the process
// and is in no argv, as kubectl and the /proc of the pod's own processes
// show them.
func TestEnvIsASecretOwnedByThePod(t *testing.T) {
	h := newHarness(t)
	ctx := testkit.Context(t, 3*time.Minute)
	const password = "pw-5e6f7a8b9c0d1e2f"
	spec := h.spec(t)
	spec.Env = map[string]string{"SBX_PASSWORD": password}
	_, err := h.rt.Run(ctx, spec)
	require.NoError(t, err)

	p := h.pod(t, ctx, spec.Name)
	raw := h.cl.kubectl(t, ctx, "get", "pod", spec.Name, "-o", "json")
	assert.NotContains(t, raw, password, "the password is not in the pod")
	require.Len(t, p.Spec.Containers, 1)
	require.Len(t, p.Spec.Containers[0].EnvFrom, 1, "env comes from a Secret")
	secret := p.Spec.Containers[0].EnvFrom[0].SecretRef.Name
	var s corev1.Secret
	require.NoError(t, json.Unmarshal([]byte(h.cl.kubectl(t, ctx, "get", "secret", secret, "-o", "json")), &s))
	require.Len(t, s.OwnerReferences, 1, "the Secret has an owner")
	assert.Equal(t, p.UID, s.OwnerReferences[0].UID, "the pod owns its Secret")
	assert.Equal(t, "Pod", s.OwnerReferences[0].Kind)
	assert.False(t, *p.Spec.AutomountServiceAccountToken, "no service account token")
	assert.False(t, *p.Spec.EnableServiceLinks, "no service links")
	assert.Equal(t, corev1.RestartPolicyNever, p.Spec.RestartPolicy)

	res, err := h.rt.Exec(ctx, spec.Name, runtime.ExecSpec{Cmd: []string{"sh", "-c", `printf %s "$SBX_PASSWORD"`}})
	require.NoError(t, err)
	assert.Equal(t, password, string(res.Stdout), "PID 1's env from the Secret")

	tricky := "a b 'single' \"double\" $HOME `x` \\ \nsecond line\n"
	res, err = h.rt.Exec(ctx, spec.Name, runtime.ExecSpec{
		Cmd: []string{"sh", "-c", `printf %s "$SBX_TRICKY"; for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f"; echo; done`},
		Env: map[string]string{"SBX_TRICKY": tricky},
	})
	require.NoError(t, err)
	out := string(res.Stdout)
	require.True(t, strings.HasPrefix(out, tricky), "the exec's env arrives verbatim: %q", out)
	assert.NotContains(t, out[len(tricky):], "second line", "no process's argv carries the exec's env")

	require.NoError(t, h.rt.Remove(ctx, spec.Name))
	_, err = h.cl.cs.CoreV1().Secrets(h.cl.namespace).Get(ctx, secret, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Secret is gone with the pod: %v", err)
}

// TestLabelsKeptInAnnotationsSelect: a label the cluster cannot hold as a
// label (':' in its value, as the owner labels have) is kept in an
// annotation, read back exactly, and selected by List and Snapshot.
func TestLabelsKeptInAnnotationsSelect(t *testing.T) {
	h := newHarness(t)
	ctx := testkit.Context(t, 3*time.Minute)
	owner := "pid:" + h.id + ":42:1700000000"
	a, b := h.spec(t), h.spec(t)
	a.Labels = map[string]string{adapterLabel: h.id, "sbx.test/owner": owner}
	b.Labels = map[string]string{adapterLabel: h.id, "sbx.test/owner": owner + "0"}
	for _, s := range []runtime.RunSpec{a, b} {
		_, err := h.rt.Run(ctx, s)
		require.NoError(t, err)
	}
	p := h.pod(t, ctx, a.Name)
	assert.NotContains(t, p.Labels, "sbx.test/owner", "not a valid label value: not a pod label")
	assert.Contains(t, p.Annotations["sandboxer.internal/labels"], "sbx.test/owner", "kept in the annotation")

	got, err := h.rt.List(ctx, map[string]string{adapterLabel: h.id, "sbx.test/owner": owner})
	require.NoError(t, err)
	assert.Equal(t, []string{a.Name}, testkit.Names(got), "selected on the annotation-kept label, exactly")
	require.Len(t, got, 1)
	assert.Equal(t, owner, got[0].Labels["sbx.test/owner"])
	snap, err := h.rt.Snapshot(ctx, map[string]string{"sbx.test/owner": owner})
	require.NoError(t, err)
	assert.Equal(t, []string{a.Name}, testkit.Names(snap.Matched))
	assert.True(t, snap.Exists(string(p.UID)) && snap.Exists(a.Name) && snap.Exists(b.Name), "refs by name and UID")
}

// TestNamesThePodCannotTakeAreInvalid: a name with upper case or '_' (the
// port's rule allows both) is ErrInvalid, never renamed, and leaves no pod.
func TestNamesThePodCannotTakeAreInvalid(t *testing.T) {
	h := newHarness(t)
	ctx := testkit.Context(t, time.Minute)
	for _, name := range []string{"Sbx-K8s-" + h.id, "sbx_k8s_" + h.id} {
		t.Run(name, func(t *testing.T) {
			spec := h.spec(t)
			spec.Name = name
			_, err := h.rt.Run(ctx, spec)
			require.ErrorIs(t, err, runtime.ErrInvalid)
			assert.Contains(t, err.Error(), name, "the error names the refused name")
			left, err := h.rt.List(ctx, map[string]string{adapterLabel: h.id})
			require.NoError(t, err)
			assert.Empty(t, left)
		})
	}
}

// TestDiagnoseAdminHasEveryPermission: the test cluster's admin may do
// everything the adapter does, so Diagnose finds no missing permission;
// Version reports the cluster's.
func TestDiagnoseAdminHasEveryPermission(t *testing.T) {
	h := newHarness(t)
	ctx := testkit.Context(t, 3*time.Minute)
	for _, d := range h.rt.Diagnose(ctx) {
		assert.NotEqual(t, "rbac", d.Check, "%s", d.Problem)
	}
	info, err := h.rt.Version(ctx)
	require.NoError(t, err)
	want := strings.TrimSpace(h.cl.kubectl(t, ctx, "version", "-o", "json"))
	var v struct {
		Server struct {
			GitVersion string `json:"gitVersion"`
		} `json:"serverVersion"`
	}
	require.NoError(t, json.Unmarshal([]byte(want), &v))
	assert.Equal(t, v.Server.GitVersion, info.Version, "the server's gitVersion, as kubectl reads it")
	assert.Equal(t, h.cl.namespace, h.rt.Namespace())
}

// TestDiagnoseNamesMissingPermissions: a service account whose Role grants
// only get and list on pods (made with kubectl, as an operator would) gets
// a Diagnostic for each other verb the adapter uses, naming the verb and
// the resource, and none for what it may do.
func TestDiagnoseNamesMissingPermissions(t *testing.T) {
	h := newHarness(t)
	ctx := testkit.Context(t, 2*time.Minute)
	rt, _ := h.serviceAccount(t, ctx, rbacv1.Role{
		TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		Rules:    []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}},
	})

	problems := map[string]bool{}
	for _, d := range rt.Diagnose(ctx) {
		assert.Equal(t, "rbac", d.Check)
		problems[d.Problem] = true
	}
	for _, want := range []string{"create pods", "delete pods", "create pods/exec", "create secrets", "delete secrets", "create configmaps", "get configmaps", "list configmaps", "create networkpolicies", "get networkpolicies", "delete networkpolicies"} {
		assert.True(t, problems["not allowed to "+want+" in namespace "+h.cl.namespace+" (grant the Role in the README's Kubernetes section)"], "a diagnostic for %s in %v", want, problems)
	}
	for p := range problems {
		assert.NotContains(t, p, "to get pods ", "get pods is granted")
		assert.NotContains(t, p, "to list pods ", "list pods is granted")
	}
}

// TestRunThatCannotStartIsDeletedWithItsReason: a pod the node refuses
// (more memory than it has: the kubelet's admission says OutOfmemory) is a
// Run error that gives the cluster's reason, and no pod or Secret is left,
// as kubectl sees it.
func TestRunThatCannotStartIsDeletedWithItsReason(t *testing.T) {
	h := newHarness(t)
	ctx := testkit.Context(t, 2*time.Minute)
	spec := h.spec(t)
	spec.MemoryBytes = 1 << 50 // a pebibyte
	spec.Env = map[string]string{"SBX_X": "y"}
	_, err := h.rt.Run(ctx, spec)
	require.Error(t, err)
	assert.Contains(t, err.Error(), spec.Name, "the error names the pod")
	assert.Contains(t, strings.ToLower(err.Error()), "memory", "the error gives the cluster's reason")
	assert.Empty(t, h.cl.kubectl(t, ctx, "get", "pod", spec.Name, "--ignore-not-found", "-o", "name"), "no pod is left")
	assert.Empty(t, h.cl.kubectl(t, ctx, "get", "secret", spec.Name+".sandboxer-env", "--ignore-not-found", "-o", "name"), "no Secret is left")
}
