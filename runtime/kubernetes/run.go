package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// imagePullReasons are the waiting reasons of a container whose image the
// kubelet cannot have.
var imagePullReasons = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}

// failedStartReasons are the waiting reasons of a container that will not
// start: the pod is deleted and the reason returned.
var failedStartReasons = []string{"CreateContainerError", "RunContainerError", "StartError"}

// Run creates the pod of spec and its env Secret and returns once its
// container runs (or has already ended). The kubelet pulls the image; one
// that cannot be pulled is runtime.ErrImageNotFound. A pod that cannot
// start (pull failure, unschedulable, a container that cannot be created)
// is deleted, Secret and all, before the error is returned.
func (r *Runtime) Run(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	pod, err := r.make(ctx, runtime.OpRun, spec, false)
	if err != nil {
		return runtime.Container{}, err
	}
	c, err := r.waitStarted(ctx, pod)
	if err != nil {
		_ = adapterkit.Discard(ctx, r.log, Name, runtime.OpRun, pod.Name, r.discard(pod))
		return runtime.Container{}, r.wrap(runtime.OpRun, spec.Name, err)
	}
	return c, nil
}

// Create makes the pod of spec held back by a scheduling gate, so that it
// stays Pending (runtime.StateCreated) and its container never starts:
// what a provisioner killed between create and start leaves behind.
func (r *Runtime) Create(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	pod, err := r.make(ctx, runtime.OpCreate, spec, true)
	if err != nil {
		return runtime.Container{}, err
	}
	return toContainer(pod), nil
}

// make checks spec and creates its pod, then the pod's Secret, owned by
// it. The pod comes first: its name is the lock that two runs under one
// name contend for, so that the loser never touches the winner's Secret.
// If the Secret cannot be made, the pod is deleted.
func (r *Runtime) make(ctx context.Context, op string, spec runtime.RunSpec, created bool) (*corev1.Pod, error) {
	spec, err := spec.Normalize()
	if err != nil {
		return nil, r.wrap(op, spec.Name, adapterkit.WithKind(runtime.ErrInvalid, "%w", err))
	}
	if err := checkSpec(spec); err != nil {
		return nil, r.wrap(op, spec.Name, r.internalPorts(ctx, spec, err))
	}
	if spec.Network != "" && spec.Network != DefaultNetwork {
		if _, err := r.getNetwork(ctx, spec.Network); err != nil {
			return nil, r.wrap(op, spec.Name, fmt.Errorf("network %s: %w", spec.Network, err))
		}
	}
	pod, err := r.buildPod(spec, created)
	if err != nil {
		return nil, r.wrap(op, spec.Name, err)
	}
	pod, err = r.cs.CoreV1().Pods(r.namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, r.wrap(op, spec.Name, err)
	}
	if len(spec.Env) > 0 {
		if err := r.putSecret(ctx, r.buildSecret(pod, spec.Env)); err != nil {
			_ = adapterkit.Discard(ctx, r.log, Name, op, pod.Name, r.discard(pod))
			return nil, r.wrap(op, spec.Name, fmt.Errorf("env secret: %w", err))
		}
	}
	r.names.remember(pod)
	return pod, nil
}

// internalPorts is checkSpec's refusal err of spec, which is also
// runtime.ErrInvalid when spec publishes ports on an internal network (a
// pod publishes nothing anyway, runtime.ErrUnsupported; the port refuses
// published ports on an internal network as invalid).
func (r *Runtime) internalPorts(ctx context.Context, spec runtime.RunSpec, err error) error {
	if len(spec.Ports) == 0 || spec.Network == "" || spec.Network == DefaultNetwork {
		return err
	}
	if cm, gerr := r.getNetwork(ctx, spec.Network); gerr == nil && cm.Data[dataInternal] == "true" {
		return adapterkit.WithKind(runtime.ErrInvalid, "%w; and network %s is internal: nothing on it is published", err, spec.Network)
	}
	return err
}

// putSecret creates s, or replaces a Secret of the same name that an
// earlier pod of this name left (the garbage collector removes it in its
// own time): the new pod owns the name now.
func (r *Runtime) putSecret(ctx context.Context, s *corev1.Secret) error {
	secrets := r.cs.CoreV1().Secrets(r.namespace)
	_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	old, err := secrets.Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if old.Labels[managedLabel] != "true" {
		return fmt.Errorf("secret %s exists and is not the kubernetes adapter's", s.Name)
	}
	// Delete the stale one (exactly that version of it) and create ours,
	// rather than update it in place: an update would keep the stale
	// Secret's UID, which the garbage collector's pending delete of it
	// (preconditioned on that UID) would then take, our env with it.
	err = secrets.Delete(ctx, old.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &old.UID, ResourceVersion: &old.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_, err = secrets.Create(ctx, s, metav1.CreateOptions{})
	return err
}

// discard is Run's clean-up of the pod it made: that very pod (its UID a
// precondition), never a newer one that took the name meanwhile.
func (r *Runtime) discard(pod *corev1.Pod) func(context.Context, string) error {
	return func(ctx context.Context, _ string) error {
		_, err := r.deletePod(ctx, pod, 0)
		return err
	}
}

// waitStarted polls pod until its container runs or has ended, and
// returns it then; a start that fails for good is an error with the
// kubelet's reason.
func (r *Runtime) waitStarted(ctx context.Context, pod *corev1.Pod) (runtime.Container, error) {
	ctx, cancel := context.WithTimeout(ctx, r.startTimeout)
	defer cancel()
	last := "pending"
	pause := firstPoll
	for {
		p, err := r.cs.CoreV1().Pods(r.namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return runtime.Container{}, fmt.Errorf("the pod was deleted while it started (%s)", last)
		case err != nil && ctx.Err() == nil:
			return runtime.Container{}, err
		case err == nil && p.UID != pod.UID:
			return runtime.Container{}, errors.New("the pod was replaced while it started")
		case err == nil:
			done, why, err := startState(p)
			if err != nil || done {
				return toContainer(p), err
			}
			last = why
		}
		select {
		case <-ctx.Done():
			return runtime.Container{}, fmt.Errorf("not running within %s (last: %s): %w", r.startTimeout, last, ctx.Err())
		case <-time.After(pause):
			pause = nextPoll(pause)
		}
	}
}

// startState reads a starting pod: done once its container runs and the
// pod has its IP, or once it has ended; an error when it will not start;
// else why it waits.
func startState(p *corev1.Pod) (done bool, why string, err error) {
	switch p.Status.Phase {
	case corev1.PodRunning:
		// Running, with the address the caller will dial.
		if st := containerStatus(p); p.Status.PodIP != "" && (st == nil || st.State.Running != nil || st.State.Terminated != nil) {
			return true, "", nil
		}
	case corev1.PodSucceeded, corev1.PodFailed:
		if st := containerStatus(p); st != nil && st.State.Terminated != nil {
			return true, "", nil // it ran, and ended
		}
		// Refused before its container ran (the kubelet's admission:
		// OutOfmemory, OutOfcpu, a node affinity it does not match).
		return false, "", fmt.Errorf("the pod failed before its container started: %s: %s", p.Status.Reason, p.Status.Message)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return false, "", fmt.Errorf("unschedulable: %s", c.Message)
		}
	}
	st := containerStatus(p)
	if st == nil || st.State.Waiting == nil {
		return false, string(p.Status.Phase), nil
	}
	w := st.State.Waiting
	switch {
	case slices.Contains(imagePullReasons, w.Reason):
		return false, "", adapterkit.WithKind(runtime.ErrImageNotFound, "image %s: %s: %s", p.Spec.Containers[0].Image, w.Reason, w.Message)
	case slices.Contains(failedStartReasons, w.Reason):
		return false, "", fmt.Errorf("%s: %s", w.Reason, w.Message)
	}
	return false, w.Reason + ": " + w.Message, nil
}

// containerStatus is the status of the pod's sandbox container, nil
// before the kubelet reports one.
func containerStatus(p *corev1.Pod) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == containerName {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}
