package kubernetes

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// maxNames bounds the names an adapter remembers by UID: beyond it the
// memo starts again empty, and a UID it forgot costs one list again.
const maxNames = 4096

// uidNames remembers the name of each pod the adapter made or read, by
// its UID, so that a verb given a UID (the readiness probe's Inspect and
// Exec, every few milliseconds) costs one get by name, not a list of the
// namespace. It cannot go stale: a pod's name never changes and its UID
// is never reused, so the pod a get by the remembered name returns is
// the UID's pod when its UID matches, and the UID's pod is gone when it
// does not (or when the get finds none). The zero value is ready.
type uidNames struct {
	mu    sync.Mutex
	names map[string]string
}

// remember records the pods' names by UID.
func (n *uidNames) remember(pods ...*corev1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range pods {
		if p == nil || p.UID == "" {
			continue
		}
		if n.names == nil || len(n.names) >= maxNames {
			n.names = make(map[string]string)
		}
		n.names[string(p.UID)] = p.Name
	}
}

// name is the remembered name of the pod with uid, if any.
func (n *uidNames) name(uid string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name, ok := n.names[uid]
	return name, ok
}
