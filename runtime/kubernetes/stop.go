package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/roboco/sandboxer/runtime"
)

// Stop is the Kubernetes form of a stop: a pod cannot be stopped and
// kept, so a running pod is deleted with gracePeriodSeconds = grace
// (rounded up to a second; the kubelet sends SIGTERM, then SIGKILL once
// the grace is over) and Stop returns once it is gone. A pod that has
// ended, or was only created, is left as it is (nil). An absent pod is
// runtime.ErrNotFound.
func (r *Runtime) Stop(ctx context.Context, ref string, grace time.Duration) error {
	return r.end(ctx, runtime.OpStop, ref, int64(math.Ceil(grace.Seconds())))
}

// Kill deletes a running pod with grace 0 (SIGKILL, no grace) and returns
// once it is gone; see Stop.
func (r *Runtime) Kill(ctx context.Context, ref string) error {
	return r.end(ctx, runtime.OpKill, ref, 0)
}

// end deletes ref's pod with grace seconds unless it has ended, and waits
// until it is gone.
func (r *Runtime) end(ctx context.Context, op, ref string, grace int64) error {
	p, err := r.getPod(ctx, op, ref)
	if err != nil {
		return err
	}
	if toContainer(p).State == runtime.StateExited || len(p.Spec.SchedulingGates) > 0 {
		return nil
	}
	if _, err := r.deletePod(ctx, p, grace); err != nil {
		return r.wrap(op, ref, err)
	}
	return nil
}

// Remove deletes the pod (grace 0) and its env Secret, and returns once
// the pod is gone. An absent pod is no error (a Secret it left is removed
// all the same).
func (r *Runtime) Remove(ctx context.Context, ref string) error {
	const op = runtime.OpRemove
	p, err := r.getPod(ctx, op, ref)
	switch {
	case isNotFound(err):
		if validatePodName(ref) == nil {
			return r.wrap(op, ref, r.deleteSecret(ctx, ref, ""))
		}
		return nil
	case err != nil:
		return err
	}
	if _, err := r.deletePod(ctx, p, 0); err != nil {
		return r.wrap(op, ref, err)
	}
	return nil
}

// deletePod deletes p (this very pod: its UID is a precondition) with
// grace seconds, waits until it is gone and removes its Secret. absent
// reports that no pod had p's name and UID when the delete came (another
// caller's delete, or a newer pod under the name).
func (r *Runtime) deletePod(ctx context.Context, p *corev1.Pod, grace int64) (absent bool, err error) {
	err = r.cs.CoreV1().Pods(r.namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      &metav1.Preconditions{UID: &p.UID},
	})
	absent = apierrors.IsNotFound(err) || apierrors.IsConflict(err)
	if err != nil && !absent {
		return false, err
	}
	if err := r.waitGone(ctx, p.Name, p.UID, time.Duration(grace)*time.Second+goneTimeout); err != nil {
		return absent, err
	}
	return absent, r.deleteSecret(ctx, p.Name, p.UID)
}

// waitGone polls until no pod named name has the UID uid.
func (r *Runtime) waitGone(ctx context.Context, name string, uid types.UID, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pause := firstPoll
	for {
		p, err := r.cs.CoreV1().Pods(r.namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), err == nil && p.UID != uid:
			return nil
		case err != nil && ctx.Err() == nil:
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s still there after %s: %w", name, timeout, ctx.Err())
		case <-time.After(pause):
			pause = nextPoll(pause)
		}
	}
}

// deleteSecret removes pod's env Secret if it is the adapter's and, when
// owner is set, owned by that pod (a Secret a newer pod of the same name
// owns is that pod's); when owner is empty, only if no pod owns it. Absent
// is no error.
func (r *Runtime) deleteSecret(ctx context.Context, pod string, owner types.UID) error {
	secrets := r.cs.CoreV1().Secrets(r.namespace)
	s, err := secrets.Get(ctx, secretName(pod), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.Labels[managedLabel] != "true" {
		return nil
	}
	if owner != "" && (len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != owner) {
		return nil
	}
	if owner == "" && len(s.OwnerReferences) > 0 {
		// No pod to match it with: an owned Secret is a live pod's (one
		// made meanwhile) or the garbage collector's to remove.
		return nil
	}
	err = secrets.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// isNotFound reports whether err is runtime.ErrNotFound.
func isNotFound(err error) bool { return errors.Is(err, runtime.ErrNotFound) }
