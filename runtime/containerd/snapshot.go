package containerd

import (
	"context"
	"sort"

	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// NerdctlNameLabel is the label in which nerdctl keeps the name a user gave
// a container (`nerdctl run --name`); the container's ID is then a random
// 64-hex string. Owners are looked up by it as well as by ID.
const NerdctlNameLabel = "nerdctl/name"

// Snapshot looks at every namespace of the daemon: one list of the
// namespaces, then one unfiltered list of the containers of each (and, in
// the adapter's own namespace, one list of the tasks, for the states of
// the matched containers). A container's references are its ID and, where
// it has one, its nerdctl name, whatever its namespace: an agent started
// by nerdctl (namespace "default") or by another tool is found by the name
// its users know it by. Kubernetes' CRI containers (namespace "k8s.io") are
// found by ID only; pods are the Kubernetes adapter's business.
func (r *Runtime) Snapshot(ctx context.Context, selector map[string]string) (runtime.Snapshot, error) {
	const op = runtime.OpSnapshot
	obj := adapterkit.SelectorString(selector)
	if err := r.ready(ctx, op, obj); err != nil {
		return runtime.Snapshot{}, err
	}
	nss, err := r.client.NamespaceService().List(ctx)
	if err != nil {
		return runtime.Snapshot{}, r.wrap(op, obj, err)
	}
	snap := runtime.Snapshot{Refs: map[string]bool{}}
	for _, ns := range nss {
		nctx := namespaces.WithNamespace(ctx, ns)
		infos, err := r.client.ContainerService().List(nctx)
		if err != nil {
			return runtime.Snapshot{}, r.wrap(op, obj, err)
		}
		for _, info := range infos {
			snap.Refs[info.ID] = true
			if n := info.Labels[NerdctlNameLabel]; n != "" {
				snap.Refs[n] = true
			}
		}
		if ns != r.namespace {
			continue
		}
		var states map[string]taskState
		for _, info := range infos {
			rec, err := recordOf(info)
			if err != nil {
				return runtime.Snapshot{}, r.wrap(op, info.ID, err)
			}
			if !runtime.MatchLabels(userLabels(info.Labels, rec), selector) {
				continue
			}
			if states == nil {
				if states, err = r.taskStates(nctx); err != nil {
					return runtime.Snapshot{}, r.wrap(op, obj, err)
				}
			}
			ts, ok := states[info.ID]
			if !ok {
				ts = taskState{state: runtime.StateCreated}
			}
			c, err := toContainer(info, ts, false)
			if err != nil {
				return runtime.Snapshot{}, r.wrap(op, info.ID, err)
			}
			snap.Matched = append(snap.Matched, c)
		}
	}
	sort.Slice(snap.Matched, func(i, j int) bool { return snap.Matched[i].Name < snap.Matched[j].Name })
	return snap, nil
}
