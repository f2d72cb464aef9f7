package kubernetes

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// networkPrefix starts the name of a network's ConfigMap.
const networkPrefix = "sandboxer-network."

// configMapName is the name of network's ConfigMap.
func configMapName(network string) string { return networkPrefix + network }

// CreateNetwork is the Kubernetes form of a network: the pod network is
// flat, so a network is a record, a ConfigMap labelled as the adapter's,
// which makes its name unique (a second create is
// runtime.ErrAlreadyExists); a pod joins it by a label (RunSpec.Network)
// and is reached at its pod IP. The name must be a DNS-1123 label.
func (r *Runtime) CreateNetwork(ctx context.Context, spec runtime.NetworkSpec) (runtime.Network, error) {
	const op = runtime.OpCreateNetwork
	if spec.Name == DefaultNetwork {
		return runtime.Network{}, r.wrap(op, spec.Name, adapterkit.WithKind(runtime.ErrAlreadyExists, "%q is the cluster's own pod network, which every pod is on", DefaultNetwork))
	}
	if err := validNetworkName(spec.Name); err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, adapterkit.WithKind(runtime.ErrInvalid, "%w", err))
	}
	labels, annotations, err := splitLabels(spec.Labels)
	if err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, adapterkit.WithKind(runtime.ErrInvalid, "%w", err))
	}
	labels[managedLabel] = "true"
	labels[networkLabel] = spec.Name
	cm, err := r.cs.CoreV1().ConfigMaps(r.namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: configMapName(spec.Name), Namespace: r.namespace, Labels: labels, Annotations: annotations},
		Data:       map[string]string{"network": spec.Name},
	}, metav1.CreateOptions{})
	if err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, err)
	}
	return runtime.Network{ID: string(cm.UID), Name: spec.Name}, nil
}

// RemoveNetwork deletes the network's ConfigMap; an absent network is not
// an error. Pods that joined it keep running (the pod network is the
// cluster's).
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
	err = r.cs.CoreV1().ConfigMaps(r.namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return r.wrap(op, name, err)
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

// ListNetworks is not implemented yet (issue 25).
func (r *Runtime) ListNetworks(ctx context.Context, selector map[string]string) ([]runtime.Network, error) {
	return nil, r.wrap(runtime.OpListNetworks, "", runtime.ErrUnsupported)
}
