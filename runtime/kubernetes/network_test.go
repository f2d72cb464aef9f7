package kubernetes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// policyOf reads a network's NetworkPolicy with kubectl ("" when there is
// none).
func (h *harness) policyOf(t *testing.T, ctx context.Context, network string) *networkingv1.NetworkPolicy {
	t.Helper()
	out := h.cl.kubectl(t, ctx, "get", "networkpolicy", "sandboxer-network."+network, "--ignore-not-found", "-o", "json")
	if strings.TrimSpace(out) == "" {
		return nil
	}
	var p networkingv1.NetworkPolicy
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	return &p
}

// configMapOf reads a network's ConfigMap with kubectl (nil when there is
// none).
func (h *harness) configMapOf(t *testing.T, ctx context.Context, network string) *corev1.ConfigMap {
	t.Helper()
	out := h.cl.kubectl(t, ctx, "get", "configmap", "sandboxer-network."+network, "--ignore-not-found", "-o", "json")
	if strings.TrimSpace(out) == "" {
		return nil
	}
	var cm corev1.ConfigMap
	require.NoError(t, json.Unmarshal([]byte(out), &cm))
	return &cm
}

// TestNetworkIsARecordAndAPolicy: CreateNetwork makes, as kubectl sees, a
// ConfigMap and a NetworkPolicy owned by it that selects the network's
// pods and admits ingress only from them (and, internal, egress only to
// them); ListNetworks reports each with its labels as created (one kept
// in the annotation included), Internal, no subnet, and only those of the
// selector; RemoveNetwork is ErrInUse while a pod carries the network's
// label (both objects stay), then removes both.
func TestNetworkIsARecordAndAPolicy(t *testing.T) {
	h := newHarness(t)
	ctx := testkit.Context(t, 3*time.Minute)
	for _, internal := range []bool{false, true} {
		t.Run(fmt.Sprintf("internal=%v", internal), func(t *testing.T) {
			name := "sbx-k8s-net-" + h.id + "-" + testkit.RandomHex(2)
			labels := map[string]string{adapterLabel: h.id, "owner": "a:b c", "role": name}
			t.Cleanup(func() {
				cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				testkit.RemoveLabelled(t, h.rt, map[string]string{adapterLabel: h.id})
				_ = h.rt.RemoveNetwork(cctx, name)
			})
			n, err := h.rt.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: labels, Internal: internal})
			require.NoError(t, err)
			_, err = h.rt.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: labels, Internal: internal})
			assert.ErrorIs(t, err, runtime.ErrAlreadyExists)

			cm := h.configMapOf(t, ctx, name)
			require.NotNil(t, cm, "kubectl sees the network's ConfigMap")
			assert.Equal(t, string(cm.UID), n.ID)
			p := h.policyOf(t, ctx, name)
			require.NotNil(t, p, "kubectl sees the network's NetworkPolicy")
			require.Len(t, p.OwnerReferences, 1)
			assert.Equal(t, cm.UID, p.OwnerReferences[0].UID, "the policy is owned by the ConfigMap")
			members := map[string]string{"sandboxer.internal/network": name}
			assert.Equal(t, members, p.Spec.PodSelector.MatchLabels, "it selects the network's pods")
			require.Len(t, p.Spec.Ingress, 1)
			require.Len(t, p.Spec.Ingress[0].From, 1)
			assert.Equal(t, members, p.Spec.Ingress[0].From[0].PodSelector.MatchLabels, "ingress only from the network's pods")
			assert.Nil(t, p.Spec.Ingress[0].From[0].NamespaceSelector)
			if internal {
				assert.ElementsMatch(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, p.Spec.PolicyTypes)
				require.Len(t, p.Spec.Egress, 1)
				require.Len(t, p.Spec.Egress[0].To, 1, "egress to nothing but the network's pods: no DNS, no ports of others")
				assert.Equal(t, members, p.Spec.Egress[0].To[0].PodSelector.MatchLabels)
				assert.Empty(t, p.Spec.Egress[0].Ports)
			} else {
				assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, p.Spec.PolicyTypes, "a plain network's egress is unrestricted")
				assert.Empty(t, p.Spec.Egress)
			}

			got, err := h.rt.ListNetworks(ctx, map[string]string{"role": name, "owner": "a:b c"})
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, name, got[0].Name)
			assert.Equal(t, n.ID, got[0].ID)
			assert.Equal(t, labels, got[0].Labels, "the labels as created, none of the adapter's own")
			assert.Equal(t, internal, got[0].Internal)
			assert.False(t, got[0].Subnet.IsValid(), "no subnet on a flat pod network")
			none, err := h.rt.ListNetworks(ctx, map[string]string{"role": name, "owner": "someone else"})
			require.NoError(t, err)
			assert.Empty(t, none, "a selector pair kept in the annotation is matched too")

			spec := h.spec(t)
			spec.Network = name
			c, err := h.rt.Run(ctx, spec)
			require.NoError(t, err)
			err = h.rt.RemoveNetwork(ctx, name)
			assert.ErrorIs(t, err, runtime.ErrInUse, "a pod is still on it")
			assert.NotNil(t, h.configMapOf(t, ctx, name), "the ConfigMap stays")
			assert.NotNil(t, h.policyOf(t, ctx, name), "the policy stays")

			require.NoError(t, h.rt.Remove(ctx, c.ID))
			require.NoError(t, h.rt.RemoveNetwork(ctx, name))
			assert.Nil(t, h.configMapOf(t, ctx, name), "no ConfigMap is left")
			assert.Nil(t, h.policyOf(t, ctx, name), "no policy is left")
			require.NoError(t, h.rt.RemoveNetwork(ctx, name), "absent is no error")
		})
	}
}

// TestPublishOnAnInternalNetworkIsInvalid: a pod publishes nothing
// (ErrUnsupported), and on an internal network that is also the port's
// ErrInvalid; no pod is made.
func TestPublishOnAnInternalNetworkIsInvalid(t *testing.T) {
	h := newHarness(t)
	ctx := testkit.Context(t, time.Minute)
	name := "sbx-k8s-net-" + h.id
	_, err := h.rt.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: map[string]string{adapterLabel: h.id}, Internal: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.rt.RemoveNetwork(context.Background(), name) })
	spec := h.spec(t)
	spec.Network = name
	spec.Ports = []runtime.PortSpec{{ContainerPort: 6379}}
	_, err = h.rt.Run(ctx, spec)
	assert.ErrorIs(t, err, runtime.ErrInvalid)
	assert.ErrorIs(t, err, runtime.ErrUnsupported)
	assert.Empty(t, h.cl.kubectl(t, ctx, "get", "pod", spec.Name, "--ignore-not-found", "-o", "name"), "no pod is made")
}

// TestDiagnoseWarnsExactlyWhenNetworkPolicyIsNotEnforced: the test's own
// neighbours, made with kubectl (a busybox httpd, a client, a deny-all
// ingress policy on the server), tell whether the cluster enforces
// NetworkPolicy; Diagnose warns ("networkpolicy", "does not enforce")
// exactly when it does not, and leaves no probe pod or policy behind.
func TestDiagnoseWarnsExactlyWhenNetworkPolicyIsNotEnforced(t *testing.T) {
	h := newHarness(t)
	ctx := testkit.Context(t, 5*time.Minute)
	image := testkit.Image(t, h.rt, "busybox")
	pre := "sbx-k8s-np-" + h.id
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = exec.CommandContext(cctx, "kubectl", "--kubeconfig", h.cl.kubeconfig, "-n", h.cl.namespace, "delete", "pod,networkpolicy", "-l", adapterLabel+"="+h.id, "--grace-period=0", "--force", "--ignore-not-found", "--wait").Run()
	})
	pod := func(role string, command ...string) string {
		cmd, _ := json.Marshal(command)
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s-%s\n  labels: {%q: %q, np-role: %s}\nspec:\n  nodeName: %s\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 0\n  automountServiceAccountToken: false\n  containers:\n  - name: main\n    image: %s\n    command: %s\n",
			pre, role, adapterLabel, h.id, role, h.cl.node, image, cmd)
	}
	h.cl.apply(t, ctx, pod("server", "httpd", "-f", "-p", "8080", "-h", "/"))
	h.cl.apply(t, ctx, pod("client", "sleep", "3600"))
	h.cl.kubectl(t, ctx, "wait", "--for=condition=Ready", "--timeout=120s", "pod/"+pre+"-server", "pod/"+pre+"-client")
	ip := strings.TrimSpace(h.cl.kubectl(t, ctx, "get", "pod", pre+"-server", "-o", "jsonpath={.status.podIP}"))
	connects := func() bool {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return exec.CommandContext(cctx, "kubectl", "--kubeconfig", h.cl.kubeconfig, "-n", h.cl.namespace, "exec", pre+"-client", "--",
			"sh", "-c", "echo | nc -w 2 "+ip+" 8080 >/dev/null").Run() == nil
	}
	require.Eventually(t, connects, time.Minute, 200*time.Millisecond, "the client reaches the server without a policy")
	h.cl.apply(t, ctx, fmt.Sprintf("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: %s\n  labels: {%q: %q}\nspec:\n  podSelector: {matchLabels: {np-role: server, %q: %q}}\n  policyTypes: [Ingress]\n",
		pre, adapterLabel, h.id, adapterLabel, h.id))
	enforced := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !enforced; {
		enforced = !connects()
	}
	t.Logf("the cluster enforces NetworkPolicy, as kubectl's neighbours see: %v", enforced)

	var warned []string
	for _, d := range h.rt.Diagnose(ctx) {
		if d.Check == "networkpolicy" {
			warned = append(warned, d.Problem)
		}
	}
	if enforced {
		assert.Empty(t, warned, "an enforcing cluster gets no networkpolicy warning")
	} else {
		require.Len(t, warned, 1, "a cluster that does not enforce NetworkPolicy gets a warning")
		assert.Contains(t, warned[0], "does not enforce NetworkPolicy", "not a probe that could not tell")
	}
	left := h.cl.kubectl(t, ctx, "get", "pod,networkpolicy", "-o", "name")
	assert.NotContains(t, left, "sandboxer-probe-", "the probe leaves nothing")
}
