package kubernetes_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/kubernetes"
)

// psaEnforce is the Pod Security admission label that makes the API
// server refuse pods that break a profile.
const psaEnforce = "pod-security.kubernetes.io/enforce"

// TestSandboxPodsPassPodSecurityBaseline: in a namespace whose Pod
// Security admission enforces the "baseline" profile (the cluster's own
// admission, proven to refuse a privileged pod there), the provisioner
// makes postgres, redis and mongo, each ready and logged in to by its real
// client; `kubectl exec` reads, in each pod's /proc/1/status, the runtime's
// default seccomp filter, no_new_privs, and the engine's capabilities as
// the bounding set, without NET_RAW or SYS_ADMIN. The API server, asked to
// evaluate the sandboxes against each profile, finds nothing against
// baseline, and against restricted only the capabilities and the root
// user the images' entrypoints need.
func TestSandboxPodsPassPodSecurityBaseline(t *testing.T) {
	testkit.RequireRuntime(t)
	cl := newCluster(t)
	ctx := testkit.Context(t, 8*time.Minute)
	id := testkit.RandomHex(4)
	ns := "sbx-psa-" + id
	_, err := cl.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   ns,
		Labels: map[string]string{psaEnforce: "baseline", adapterLabel: id},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		grace := int64(0)
		_ = cl.cs.CoreV1().Pods(ns).DeleteCollection(cctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
		if err := cl.cs.CoreV1().Namespaces().Delete(cctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("cleanup: delete namespace %s: %v", ns, err)
		}
	})
	// The test cluster may run no controller-manager: the namespace's
	// default service account, which pod admission asks for, is made here.
	_, err = cl.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}

	t.Run("ControlANonBaselinePodIsRefused", func(t *testing.T) {
		// A capability beyond baseline's list: the API server itself
		// allows it (unlike privileged, which it refuses on its own), Pod
		// Security admission does not.
		_, err := cl.cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "sbx-psa-net-admin"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: "busybox",
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}},
			}}},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.Error(t, err, "the namespace's Pod Security admission enforces baseline")
		assert.Contains(t, err.Error(), "violates PodSecurity", "refused by Pod Security admission")
	})

	rt := cl.runtime(t, kubernetes.WithNamespace(ns))
	network := "sbx-psa-net-" + id
	_, err = rt.CreateNetwork(ctx, runtime.NetworkSpec{Name: network})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.RemoveNetwork(context.Background(), network) })
	images := map[string]string{}
	for _, e := range engines.Default.Names() {
		images[e] = testkit.Image(t, rt, e)
	}
	p, err := provision.New(rt, provision.Options{
		Network:     network,
		Images:      images,
		LabelPrefix: "sbxp" + id,
		Labels:      map[string]string{adapterLabel: id},
		MemoryBytes: 256 << 20,
		CPUs:        0.5,
	})
	require.NoError(t, err)
	owner := "psa" + id
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _ = p.Teardown(cctx, owner)
	})
	sb, err := p.Provision(ctx, owner, engines.Default.Names())
	require.NoError(t, err, "the sandboxes pass the baseline profile and get ready")
	require.Len(t, sb.Containers, len(engines.Default.Names()))

	for _, c := range sb.Containers {
		t.Run(c.Engine, func(t *testing.T) {
			eng, ok := engines.Default.Lookup(c.Engine)
			require.True(t, ok)
			for _, proc := range []string{"1", "self"} {
				testkit.AssertConfined(t, "/proc/"+proc+"/status", kubectlNS(t, ctx, cl, ns, "exec", c.Name, "--", "cat", "/proc/"+proc+"/status"), eng.Spec().Capabilities)
			}
			sess, err := engines.Default.Login(ctx, c.Engine, sbURL(t, sb, c))
			require.NoError(t, err, "the real client logs in")
			t.Logf("%s: %s logged in to %s under baseline", c.Name, sess.Client, sess.Server)
		})
	}

	// The API server evaluates the namespace's pods, the sandboxes, against
	// a new enforce label and warns, without applying it (server-side dry
	// run): baseline has nothing to say; restricted refuses only what the
	// images' root entrypoints need (their capabilities, running as root),
	// not the seccomp profile, privilege escalation or a capability left
	// undropped.
	for _, tc := range []struct {
		level string
		clean bool
	}{{"baseline", true}, {"restricted", false}} {
		out := kubectlNS(t, ctx, cl, "", "label", "--dry-run=server", "--overwrite", "namespace", ns, psaEnforce+"="+tc.level)
		t.Logf("the sandboxes against %s: %s", tc.level, out)
		assert.Equal(t, tc.clean, !strings.Contains(out, "violate"), "%s: %s", tc.level, out)
		for _, never := range []string{"seccompProfile", "allowPrivilegeEscalation", "privileged", "host namespaces", "hostPath"} {
			assert.NotContains(t, out, never, "%s", tc.level)
		}
	}
}

// sbURL is the URL sb emitted for c.
func sbURL(t testing.TB, sb provision.Sandbox, c provision.Container) string {
	t.Helper()
	url, ok := sb.Lookup(engines.Default.URLName(c.Engine, provision.DefaultEnvPrefix))
	require.True(t, ok, "%s emitted its URL", c.Name)
	return url
}

// kubectlNS runs kubectl in namespace ns ("": none given) and returns its
// stdout and stderr together (the API server's warnings go to stderr).
func kubectlNS(t testing.TB, ctx context.Context, cl *cluster, ns string, args ...string) string {
	t.Helper()
	argv := []string{"--kubeconfig", cl.kubeconfig}
	if ns != "" {
		argv = append(argv, "-n", ns)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "kubectl", append(argv, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), "kubectl %s: %s", strings.Join(args, " "), out.String())
	return out.String()
}
