package kubernetes

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// networkPrefix starts the name of a network's ConfigMap and of its
// NetworkPolicy.
const networkPrefix = "sandboxer-network."

// Keys of a network ConfigMap's data.
const (
	// dataNetwork is the network's name.
	dataNetwork = "network"
	// dataInternal is "true" for an internal network.
	dataInternal = "internal"
)

// configMapName is the name of network's ConfigMap.
func configMapName(network string) string { return networkPrefix + network }

// policyName is the name of network's NetworkPolicy.
func policyName(network string) string { return networkPrefix + network }

// CreateNetwork is the Kubernetes form of a network: the pod network is
// flat, so a network is a record, a ConfigMap labelled as the adapter's,
// which makes its name unique (a second create is
// runtime.ErrAlreadyExists), and a NetworkPolicy of the same name, owned
// by the ConfigMap (the garbage collector removes it with it), that
// selects the network's pods and admits ingress only from pods on the
// same network; an Internal network's policy also admits egress only to
// them (no DNS, nothing outside). A pod joins the network by a label
// (RunSpec.Network) and is reached at its pod IP. The name must be a
// DNS-1123 label. A policy means something only on a cluster whose
// network plugin enforces NetworkPolicy (Diagnose checks).
func (r *Runtime) CreateNetwork(ctx context.Context, spec runtime.NetworkSpec) (runtime.Network, error) {
	const op = runtime.OpCreateNetwork
	if spec.Name == DefaultNetwork {
		return runtime.Network{}, r.wrap(op, spec.Name, adapterkit.WithKind(runtime.ErrAlreadyExists, "%q is the cluster's own pod network, which every pod is on", DefaultNetwork))
	}
	if err := validNetworkName(spec.Name); err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, adapterkit.WithKind(runtime.ErrInvalid, "%w", err))
	}
	lbls, annotations, err := splitLabels(spec.Labels)
	if err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, adapterkit.WithKind(runtime.ErrInvalid, "%w", err))
	}
	lbls[managedLabel] = "true"
	lbls[networkLabel] = spec.Name
	data := map[string]string{dataNetwork: spec.Name}
	if spec.Internal {
		data[dataInternal] = "true"
	}
	cm, err := r.cs.CoreV1().ConfigMaps(r.namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: configMapName(spec.Name), Namespace: r.namespace, Labels: lbls, Annotations: annotations},
		Data:       data,
	}, metav1.CreateOptions{})
	if err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, err)
	}
	if err := r.putPolicy(ctx, buildPolicy(cm, spec.Name, spec.Internal)); err != nil {
		// A network without its policy would be open: it is not made.
		_ = adapterkit.Discard(ctx, r.log, Name, op, cm.Name, func(ctx context.Context, _ string) error {
			return r.deleteConfigMap(ctx, cm)
		})
		return runtime.Network{}, r.wrap(op, spec.Name, fmt.Errorf("network policy %s: %w", policyName(spec.Name), err))
	}
	return toNetwork(cm), nil
}

// buildPolicy is the NetworkPolicy of network, owned by its ConfigMap cm:
// the network's pods take connections only from pods on it and, when
// internal, open connections only to them.
func buildPolicy(cm *corev1.ConfigMap, network string, internal bool) *networkingv1.NetworkPolicy {
	members := metav1.LabelSelector{MatchLabels: map[string]string{networkLabel: network}}
	p := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:      policyName(network),
			Namespace: cm.Namespace,
			Labels:    map[string]string{managedLabel: "true", networkLabel: network},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID,
			}},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: members,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &members}}}},
		},
	}
	if internal {
		p.Spec.PolicyTypes = append(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &members}}}}
	}
	return p
}

// putPolicy creates p, or replaces a policy of the same name that an
// earlier network of this name left (its ConfigMap is gone, and the
// garbage collector has not removed it yet); one that is not the
// adapter's is an error.
func (r *Runtime) putPolicy(ctx context.Context, p *networkingv1.NetworkPolicy) error {
	policies := r.cs.NetworkingV1().NetworkPolicies(r.namespace)
	_, err := policies.Create(ctx, p, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	old, err := policies.Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if old.Labels[managedLabel] != "true" {
		return fmt.Errorf("network policy %s exists and is not the kubernetes adapter's", p.Name)
	}
	err = policies.Delete(ctx, old.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &old.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_, err = policies.Create(ctx, p, metav1.CreateOptions{})
	return err
}

// ListNetworks lists the adapter's network ConfigMaps (selecting server
// side on the pairs of selector that are valid labels, the others client
// side) as networks: their labels as created, Internal from the record,
// no Subnet (the pod network is the cluster's).
func (r *Runtime) ListNetworks(ctx context.Context, selector map[string]string) ([]runtime.Network, error) {
	const op = runtime.OpListNetworks
	set := labels.Set{managedLabel: "true"}
	for k, v := range selector {
		if isLabel(k, v) && k != managedLabel {
			set[k] = v
		}
	}
	list, err := r.cs.CoreV1().ConfigMaps(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(set).String()})
	if err != nil {
		return nil, r.wrap(op, adapterkit.SelectorString(selector), err)
	}
	out := []runtime.Network{}
	for i := range list.Items {
		cm := &list.Items[i]
		if cm.Labels[networkLabel] == "" || cm.Name != configMapName(cm.Labels[networkLabel]) || !matchesMeta(cm.ObjectMeta, selector) {
			continue
		}
		out = append(out, toNetwork(cm))
	}
	slices.SortFunc(out, func(a, b runtime.Network) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}

// toNetwork is the network of its ConfigMap.
func toNetwork(cm *corev1.ConfigMap) runtime.Network {
	return runtime.Network{
		ID:       string(cm.UID),
		Name:     cm.Labels[networkLabel],
		Labels:   joinLabels(cm.ObjectMeta),
		Internal: cm.Data[dataInternal] == "true",
	}
}

// RemoveNetwork deletes the network's NetworkPolicy and ConfigMap; an
// absent network is not an error. While a pod (in any state) still
// carries the network's label, the network is left as it is and the
// error is runtime.ErrInUse.
func (r *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	const op = runtime.OpRemoveNetwork
	if name == DefaultNetwork {
		return nil // the cluster's, not sandboxer's to remove
	}
	cm, err := r.getNetwork(ctx, name)
	switch {
	case isNotFound(err):
		return nil
	case err != nil:
		return r.wrap(op, name, err)
	}
	pods, err := r.cs.CoreV1().Pods(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{networkLabel: name}).String()})
	if err != nil {
		return r.wrap(op, name, fmt.Errorf("pods on the network: %w", err))
	}
	if n := len(pods.Items); n > 0 {
		return r.wrap(op, name, adapterkit.WithKind(runtime.ErrInUse, "pod %s (and %d more) is still on the network", pods.Items[0].Name, n-1))
	}
	if err := r.deletePolicy(ctx, name); err != nil {
		return r.wrap(op, name, fmt.Errorf("network policy %s: %w", policyName(name), err))
	}
	return r.wrap(op, name, r.deleteConfigMap(ctx, cm))
}

// deletePolicy deletes network's NetworkPolicy if it is the adapter's
// (exactly the one it read: its UID a precondition); absent is nil. The
// garbage collector would remove it after its ConfigMap too, in its own
// time: a network is gone when RemoveNetwork returns.
func (r *Runtime) deletePolicy(ctx context.Context, network string) error {
	policies := r.cs.NetworkingV1().NetworkPolicies(r.namespace)
	p, err := policies.Get(ctx, policyName(network), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case p.Labels[managedLabel] != "true":
		return nil // not the adapter's: never removed
	}
	err = policies.Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// deleteConfigMap deletes exactly cm (its UID a precondition); absent is
// nil.
func (r *Runtime) deleteConfigMap(ctx context.Context, cm *corev1.ConfigMap) error {
	err := r.cs.CoreV1().ConfigMaps(r.namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// getNetwork is the ConfigMap of network name, if it is the adapter's: a
// ConfigMap of that name that is not is runtime.ErrNotFound.
func (r *Runtime) getNetwork(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	if validNetworkName(name) != nil {
		return nil, adapterkit.WithKind(runtime.ErrNotFound, "no network %s", name)
	}
	cm, err := r.cs.CoreV1().ConfigMaps(r.namespace).Get(ctx, configMapName(name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && cm.Labels[managedLabel] != "true" {
		return nil, adapterkit.WithKind(runtime.ErrNotFound, "no network %s in namespace %s", name, r.namespace)
	}
	return cm, err
}
