package kubernetes_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/kubernetes"
)

// readmeRole is the Role of the README's Kubernetes section, exactly as
// an operator copies it from there.
func readmeRole(t *testing.T) rbacv1.Role {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "The Role the adapter needs")
	require.True(t, ok, "the README has the Role")
	_, block, ok := strings.Cut(section, "```yaml\n")
	require.True(t, ok, "the Role is a yaml block")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	var role rbacv1.Role
	require.NoError(t, yaml.UnmarshalStrict([]byte(block), &role), "the README's Role:\n%s", block)
	require.Equal(t, "Role", role.Kind)
	return role
}

// grants is every "verb resource" a Role's rules grant.
func grants(role rbacv1.Role) []string {
	var out []string
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				out = append(out, v+" "+res)
			}
		}
	}
	slices.Sort(out)
	return out
}

// without is role less verb on resource.
func without(role rbacv1.Role, verb, resource string) rbacv1.Role {
	out := *role.DeepCopy()
	for i, r := range out.Rules {
		if slices.Contains(r.Resources, resource) {
			out.Rules[i].Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == verb })
		}
	}
	return out
}

// serviceAccount makes, with kubectl as an operator would, a service
// account bound to role (renamed for the test, in the test's namespace),
// removed when the test ends, and returns an adapter that authenticates
// with that account's token, and that adapter's kubeconfig.
func (h *harness) serviceAccount(t *testing.T, ctx context.Context, role rbacv1.Role) (*kubernetes.Runtime, string) {
	t.Helper()
	cl := h.cl
	sa := "sbx-k8s-sa-" + h.id + "-" + testkit.RandomHex(2)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, kind := range []string{"rolebinding", "role", "serviceaccount"} {
			_ = exec.CommandContext(cctx, "kubectl", "--kubeconfig", cl.kubeconfig, "-n", cl.namespace, "delete", kind, sa, "--ignore-not-found").Run()
		}
	})
	role.Name, role.Namespace = sa, cl.namespace
	manifest, err := json.Marshal(role)
	require.NoError(t, err)
	cl.kubectl(t, ctx, "create", "serviceaccount", sa)
	cl.apply(t, ctx, string(manifest))
	cl.kubectl(t, ctx, "create", "rolebinding", sa, "--role="+sa, "--serviceaccount="+cl.namespace+":"+sa)
	token := strings.TrimSpace(cl.kubectl(t, ctx, "create", "token", sa))

	cfg, err := clientcmd.LoadFromFile(cl.kubeconfig)
	require.NoError(t, err)
	for _, ai := range cfg.AuthInfos {
		ai.Token, ai.TokenFile, ai.ClientCertificate, ai.ClientCertificateData, ai.ClientKey, ai.ClientKeyData = token, "", "", nil, "", nil
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return cl.runtime(t, kubernetes.WithKubeconfig(path)), path
}

// TestReadmeRoleIsExactlyWhatTheAdapterNeeds: doctor (Diagnose) checks
// exactly the verbs the README's Role grants, and a service account bound
// to that Role, and nothing else, can do what sandboxer does on a
// cluster: doctor finds nothing missing, and a provision (its network, its
// Secret, its readiness, its adoption by an agent pod that exists), an
// exec by ID, a janitor sweep and a teardown all succeed, as kubectl sees.
func TestReadmeRoleIsExactlyWhatTheAdapterNeeds(t *testing.T) {
	h := newHarness(t)
	ctx := testkit.Context(t, 5*time.Minute)
	role := readmeRole(t)
	want := kubernetes.Accesses()
	slices.Sort(want)
	assert.Equal(t, want, grants(role), "doctor checks exactly what the README's Role grants")

	rt, _ := h.serviceAccount(t, ctx, role)
	for _, d := range rt.Diagnose(ctx) {
		// The probe of NetworkPolicy enforcement runs on the Role too: it
		// may say the cluster does not enforce, never that it could not
		// probe.
		assert.NotEqual(t, "rbac", d.Check, "doctor on the README's Role reports no missing verb: %s", d.Problem)
		assert.NotContains(t, d.Problem, "cannot tell", "the Role lets doctor probe NetworkPolicy enforcement")
	}

	w := testruntimes.NewWorld(t, testruntimes.Runtime{Name: kubernetes.Name, RT: rt})
	p := networkProvisioner(ctx, w)
	id := w.Owner("rbac")
	agent := p.OwnerName(id)
	h.cl.apply(t, ctx, podYAML(w, h.cl.node, agent, w.Images["redis"], "", "sleep", "3600"))
	sb, err := p.Provision(ctx, id, []string{"redis"})
	require.NoError(t, err)
	assert.Equal(t, agent, sb.AdoptedBy, "adopted by the agent pod")
	h.cl.assertAdoptedBy(t, ctx, agent, sb)
	c := sb.Containers[0]

	res, err := rt.Exec(ctx, c.ID, runtime.ExecSpec{Cmd: []string{"sh", "-c", "echo ok"}})
	require.NoError(t, err)
	assert.Equal(t, "ok\n", string(res.Stdout))

	rep, err := w.Janitor(time.Hour).Sweep(ctx)
	require.NoError(t, err)
	assert.Empty(t, rep.Removed, "the owner exists: nothing to remove")

	removed, err := p.Teardown(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []string{c.Name}, testkit.Names(removed))
	require.NoError(t, h.cl.gone(t, ctx, c.Name), "teardown leaves no pod or Secret")
}

// TestInspectAndExecByUIDListNothing: the readiness probe's Inspect and
// Exec by ID (the pod's UID) cost one get by name, not a list of the
// namespace, whatever its size: a service account that may do everything
// the README's Role grants but list pods runs a pod, then inspects, execs
// in and removes it by UID, and an Inspect after the removal is NotFound.
// Only a UID an adapter never saw costs one list.
func TestInspectAndExecByUIDListNothing(t *testing.T) {
	h := newHarness(t)
	ctx := testkit.Context(t, 3*time.Minute)
	rt, kubeconfig := h.serviceAccount(t, ctx, without(readmeRole(t), "list", "pods"))
	_, err := rt.List(ctx, map[string]string{adapterLabel: h.id})
	require.Error(t, err, "this account may not list pods")

	spec := h.spec(t)
	c, err := rt.Run(ctx, spec)
	require.NoError(t, err)
	uid := strings.TrimSpace(h.cl.kubectl(t, ctx, "get", "pod", spec.Name, "-o", "jsonpath={.metadata.uid}"))
	require.Equal(t, uid, c.ID, "the ID is the pod's UID")

	got, err := rt.Inspect(ctx, c.ID)
	require.NoError(t, err, "inspect by UID without list")
	assert.Equal(t, spec.Name, got.Name)
	res, err := rt.Exec(ctx, c.ID, runtime.ExecSpec{Cmd: []string{"echo", "by-uid"}})
	require.NoError(t, err, "exec by UID without list")
	assert.Equal(t, "by-uid\n", string(res.Stdout))
	// A UID an adapter never saw costs it one list: the admin's fresh
	// adapter finds the pod so, this account's fresh one may not list.
	got, err = h.cl.runtime(t).Inspect(ctx, c.ID)
	require.NoError(t, err)
	assert.Equal(t, spec.Name, got.Name)
	_, err = h.cl.runtime(t, kubernetes.WithKubeconfig(kubeconfig)).Inspect(ctx, c.ID)
	assert.Error(t, err, "an unseen UID needs the list this account may not do")
	require.NoError(t, rt.Remove(ctx, c.ID), "remove by UID without list")
	require.NoError(t, h.cl.gone(t, ctx, spec.Name))
	_, err = rt.Inspect(ctx, c.ID)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "a removed pod's UID names no pod")
}
