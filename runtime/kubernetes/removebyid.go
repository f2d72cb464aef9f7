package kubernetes

import (
	"context"
	"sync"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

var _ runtime.IDRemover = (*Runtime)(nil)

// uidNames remembers the name of each pod by UID, as the adapter's own
// Run and Create made them and its last lists saw them, so that a verb
// given a UID (Inspect, Exec, Stop, Kill, Remove, RemoveByID) gets the pod
// by name instead of listing the namespace: a pod's name and UID never
// change, and a UID is never reused.
// A Snapshot (every pod of the namespace) replaces what it holds, which
// keeps it as large as the namespace, and so does a List past
// maxRememberedUIDs.
type uidNames struct {
	mu sync.Mutex
	m  map[string]string
}

// maxRememberedUIDs bounds uidNames between Snapshots: a provisioner that
// lists but never sweeps starts afresh past it (a forgotten pod costs
// RemoveByID one list, nothing more).
const maxRememberedUIDs = 4096

func (u *uidNames) learn(pods []corev1.Pod, all bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if all || u.m == nil || len(u.m) > maxRememberedUIDs {
		u.m = make(map[string]string, len(pods))
	}
	for i := range pods {
		u.m[string(pods[i].UID)] = pods[i].Name
	}
}

func (u *uidNames) name(uid string) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n, ok := u.m[uid]
	return n, ok
}

func (u *uidNames) forget(uid string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m, uid)
}

// RemoveByID implements runtime.IDRemover: a pod's UID is chosen by the
// API server at random and never reused, so a delete with the UID as its
// precondition removes that pod or none. id must be a UID: anything else
// (a name) is ErrInvalid and nothing is asked of the cluster. It deletes
// with grace 0, waits until the pod is gone and removes its Secret, as
// Remove does; no pod with that UID is ErrNotFound. Where the adapter made
// the pod or its own List or Snapshot saw it, that is one delete and the
// wait; otherwise one list of the namespace finds it first.
func (r *Runtime) RemoveByID(ctx context.Context, id string) error {
	const op = runtime.OpRemove
	if _, err := uuid.Parse(id); err != nil {
		return r.wrap(op, id, adapterkit.WithKind(runtime.ErrInvalid, "not a pod UID"))
	}
	name, ok := r.uids.name(id)
	if !ok {
		p, err := r.getPod(ctx, op, id)
		if err != nil {
			return err
		}
		name = p.Name
	}
	defer r.uids.forget(id)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(id)}}
	gone, err := r.deletePod(ctx, p, 0)
	if err != nil {
		return r.wrap(op, id, err)
	}
	if gone {
		return r.wrap(op, id, adapterkit.WithKind(runtime.ErrNotFound, "no pod with UID %s in namespace %s", id, r.namespace))
	}
	return nil
}
