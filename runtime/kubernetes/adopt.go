package kubernetes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

var _ runtime.Adopter = (*Runtime)(nil)

// Adopt gives each sandbox pod an ownerReference to the owner pod (by name,
// in the adapter's namespace; not a controller, not blocking the owner's
// deletion), so that the cluster's garbage collector deletes the sandbox
// pod, and with it the Secret the pod owns, once the owner pod is deleted:
// no sandboxer process needs to run then.
//
// Only the pods listed are touched: a pod whose UID is not the listed
// container's ID (a newer pod under the same name) is left alone, as is one
// that is gone. A pod that already names the owner pod (same UID) is left
// as it is. An owner pod that does not exist is runtime.ErrNotFound, and
// nothing is changed. Should the owner be deleted between its lookup and a
// sandbox's update, the garbage collector finds the reference dangling and
// deletes the sandbox: the lifetime rule holds either way.
func (r *Runtime) Adopt(ctx context.Context, owner string, containers []runtime.Container) error {
	o, err := r.cs.CoreV1().Pods(r.namespace).Get(ctx, owner, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return r.wrap(runtime.OpAdopt, owner, adapterkit.WithKind(runtime.ErrNotFound, "no owner pod %s in namespace %s", owner, r.namespace))
	}
	if err != nil {
		return r.wrap(runtime.OpAdopt, owner, err)
	}
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: o.Name, UID: o.UID}
	for _, c := range containers {
		if err := r.adoptOne(ctx, c, ref); err != nil {
			return r.wrap(runtime.OpAdopt, c.Name, fmt.Errorf("by %s: %w", owner, err))
		}
	}
	return nil
}

// adoptOne adds ref to the listed container's pod, with the API server's
// optimistic concurrency (a conflicting update is read again and retried).
func (r *Runtime) adoptOne(ctx context.Context, c runtime.Container, ref metav1.OwnerReference) error {
	pods := r.cs.CoreV1().Pods(r.namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(ctx, c.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if string(p.UID) != c.ID || hasOwner(p, ref.UID) {
			return nil
		}
		p.OwnerReferences = append(p.OwnerReferences, ref)
		_, err = pods.Update(ctx, p, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// hasOwner reports whether p's ownerReferences name the object uid.
func hasOwner(p *corev1.Pod, uid types.UID) bool {
	for _, o := range p.OwnerReferences {
		if o.UID == uid {
			return true
		}
	}
	return false
}

// adoptedBy is the name of the pod that owns p (an ownerReference of kind
// Pod, as Adopt sets it), or "".
func adoptedBy(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Kind == "Pod" && o.APIVersion == "v1" {
			return o.Name
		}
	}
	return ""
}
