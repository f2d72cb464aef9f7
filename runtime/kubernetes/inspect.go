package kubernetes

import (
	"context"
	"maps"
	"slices"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// Inspect reports a pod, by name or UID. An absent one is
// runtime.ErrNotFound.
func (r *Runtime) Inspect(ctx context.Context, ref string) (runtime.Container, error) {
	p, err := r.getPod(ctx, runtime.OpInspect, ref)
	if err != nil {
		return runtime.Container{}, err
	}
	c := toContainer(p)
	c.Mounts = mounts(p)
	return c, nil
}

// getPod finds a pod by UID or by name, as Docker reads a reference: an
// ID first, then a name (one get). A UID the adapter has seen (it made,
// listed or read the pod) costs one get by the pod's remembered name,
// the pod being that UID's only if its UID still matches; a UID it never
// saw costs one list of the namespace, since the API has no look-up by
// UID. A pod's UID is chosen by the API server and never reused, so the
// pod found by a UID is that pod or none. An error is translated for op.
func (r *Runtime) getPod(ctx context.Context, op, ref string) (*corev1.Pod, error) {
	if _, err := uuid.Parse(ref); err == nil {
		p, err := r.podByUID(ctx, ref)
		if err != nil {
			return nil, r.wrap(op, ref, err)
		}
		if p != nil {
			return p, nil
		}
	}
	if len(validation.IsDNS1123Subdomain(ref)) == 0 {
		p, err := r.cs.CoreV1().Pods(r.namespace).Get(ctx, ref, metav1.GetOptions{})
		if err == nil {
			r.names.remember(p)
			return p, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, r.wrap(op, ref, err)
		}
	}
	return nil, r.wrap(op, ref, adapterkit.WithKind(runtime.ErrNotFound, "no pod %s in namespace %s", ref, r.namespace))
}

// podByUID is the pod whose UID is uid, or nil if there is none: one get
// by its remembered name, else one list of the namespace.
func (r *Runtime) podByUID(ctx context.Context, uid string) (*corev1.Pod, error) {
	pods := r.cs.CoreV1().Pods(r.namespace)
	if name, ok := r.names.name(uid); ok {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, err
		case string(p.UID) == uid:
			return p, nil
		default:
			return nil, nil // a newer pod under the name: uid's is gone
		}
	}
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		r.names.remember(&list.Items[i])
	}
	for i := range list.Items {
		if string(list.Items[i].UID) == uid {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// List returns the pods of the namespace whose labels (as the caller set
// them: see the package documentation) contain every pair of selector.
func (r *Runtime) List(ctx context.Context, selector map[string]string) ([]runtime.Container, error) {
	pods, err := r.listPods(ctx, selector)
	if err != nil {
		return nil, r.wrap(runtime.OpList, adapterkit.SelectorString(selector), err)
	}
	out := []runtime.Container{}
	for i := range pods {
		if matches(&pods[i], selector) {
			out = append(out, toContainer(&pods[i]))
		}
	}
	return out, nil
}

// Snapshot is one list of the namespace's pods: those the selector
// matches, and every pod's name and UID as references.
func (r *Runtime) Snapshot(ctx context.Context, selector map[string]string) (runtime.Snapshot, error) {
	pods, err := r.listPods(ctx, nil)
	if err != nil {
		return runtime.Snapshot{}, r.wrap(runtime.OpSnapshot, adapterkit.SelectorString(selector), err)
	}
	snap := runtime.Snapshot{Matched: []runtime.Container{}, Refs: make(map[string]bool, 2*len(pods))}
	for i := range pods {
		p := &pods[i]
		snap.Refs[p.Name] = true
		snap.Refs[string(p.UID)] = true
		if matches(p, selector) {
			snap.Matched = append(snap.Matched, toContainer(p))
		}
	}
	return snap, nil
}

// listPods lists the namespace's pods, selecting server side on the pairs
// of selector that are valid labels (the others are matched by matches).
func (r *Runtime) listPods(ctx context.Context, selector map[string]string) ([]corev1.Pod, error) {
	set := labels.Set{}
	for k, v := range selector {
		if isLabel(k, v) {
			set[k] = v
		}
	}
	list, err := r.cs.CoreV1().Pods(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(set).String()})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		r.names.remember(&list.Items[i])
	}
	return list.Items, nil
}

// matches reports whether pod's labels, as the caller set them, contain
// every pair of selector.
func matches(p *corev1.Pod, selector map[string]string) bool {
	return matchesMeta(p.ObjectMeta, selector)
}

// matchesMeta reports whether an object's labels, as the caller set them,
// contain every pair of selector.
func matchesMeta(meta metav1.ObjectMeta, selector map[string]string) bool {
	if len(selector) == 0 {
		return true
	}
	got := joinLabels(meta)
	for k, v := range selector {
		if g, ok := got[k]; !ok || g != v {
			return false
		}
	}
	return true
}

// toContainer is a pod as the port reports it (Mounts aside).
func toContainer(p *corev1.Pod) runtime.Container {
	c := runtime.Container{
		ID:      string(p.UID),
		Name:    p.Name,
		Labels:  joinLabels(p.ObjectMeta),
		Created: p.CreationTimestamp.Time,
		State:   runtime.StateUnknown,
	}
	if len(p.Spec.Containers) > 0 {
		c.Image = p.Spec.Containers[0].Image
		if sc := p.Spec.Containers[0].SecurityContext; sc != nil && sc.Privileged != nil {
			c.Privileged = *sc.Privileged
		}
	}
	st := containerStatus(p)
	var term *corev1.ContainerStateTerminated
	if st != nil {
		term = st.State.Terminated
	}
	switch p.Status.Phase {
	case corev1.PodPending, "":
		c.State = runtime.StateCreated
	case corev1.PodRunning:
		c.State = runtime.StateRunning
		if term != nil {
			c.State = runtime.StateExited
		}
	case corev1.PodSucceeded, corev1.PodFailed:
		c.State = runtime.StateExited
	}
	if c.State == runtime.StateExited && term != nil {
		c.ExitCode = int(term.ExitCode)
		c.OOMKilled = term.Reason == "OOMKilled"
	}
	c.AdoptedBy = adoptedBy(p)
	if ip := p.Status.PodIP; ip != "" {
		c.Networks = map[string]string{DefaultNetwork: ip}
		if n := p.Labels[networkLabel]; n != "" {
			c.Networks[n] = ip
		}
	}
	return c
}

// mounts are the pod's memory-backed emptyDirs, as tmpfs mounts.
func mounts(p *corev1.Pod) []runtime.Mount {
	tmpfs := map[string]bool{}
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory {
			tmpfs[v.Name] = true
		}
	}
	var out []runtime.Mount
	for _, c := range p.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if tmpfs[m.Name] {
				out = append(out, runtime.Mount{Type: "tmpfs", Source: "tmpfs", Destination: m.MountPath})
			}
		}
	}
	slices.SortFunc(out, func(a, b runtime.Mount) int {
		if a.Destination < b.Destination {
			return -1
		}
		return 1
	})
	return out
}

// keys is the sorted keys of m, for messages.
func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
