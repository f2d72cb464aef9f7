package containerd

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/containerd/api/services/tasks/v1"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// List returns the namespace's containers whose labels contain every pair
// of selector, filtered by the daemon (`labels."k"=="v"`, comma = AND) and
// checked again here, with their states from one list of the tasks.
func (r *Runtime) List(ctx context.Context, selector map[string]string) ([]runtime.Container, error) {
	const op = runtime.OpList
	ctx = r.ctx(ctx)
	obj := adapterkit.SelectorString(selector)
	if err := r.ready(ctx, op, obj); err != nil {
		return nil, err
	}
	var filters []string
	if f := labelFilter(selector); f != "" {
		filters = append(filters, f)
	}
	infos, err := r.client.ContainerService().List(ctx, filters...)
	if err != nil && cerrdefs.IsInvalidArgument(err) {
		// A label the filter syntax cannot express: filter here alone.
		infos, err = r.client.ContainerService().List(ctx)
	}
	if err != nil {
		return nil, r.wrap(op, obj, err)
	}
	states, err := r.taskStates(ctx)
	if err != nil {
		return nil, r.wrap(op, obj, err)
	}
	out := make([]runtime.Container, 0, len(infos))
	for _, info := range infos {
		ts, ok := states[info.ID]
		if !ok {
			ts = taskState{state: runtime.StateCreated}
		}
		c, err := toContainer(info, ts, false)
		if err != nil {
			return nil, r.wrap(op, info.ID, err)
		}
		if runtime.MatchLabels(c.Labels, selector) {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// taskStates lists every task of the namespace, by container id.
func (r *Runtime) taskStates(ctx context.Context) (map[string]taskState, error) {
	resp, err := r.client.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err != nil {
		return nil, errgrpc.ToNative(err)
	}
	out := make(map[string]taskState, len(resp.GetTasks()))
	for _, p := range resp.GetTasks() {
		out[p.GetID()] = stateOf(p.GetStatus(), p.GetExitStatus())
	}
	r.withOOM(ctx, out)
	return out, nil
}

// labelFilter renders selector in containerd's filter syntax, keys and
// values quoted, pairs joined by commas (AND), in key order. Pairs with an
// empty value are left to the caller: containerd does not store empty
// labels (the adapter's record does).
func labelFilter(selector map[string]string) string {
	keys := make([]string, 0, len(selector))
	for k, v := range selector {
		if v != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, "labels."+strconv.Quote(k)+"=="+strconv.Quote(selector[k]))
	}
	return strings.Join(parts, ",")
}
