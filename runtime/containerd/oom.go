package containerd

import (
	"context"

	v1 "github.com/containerd/cgroups/v3/cgroup1/stats"
	v2 "github.com/containerd/cgroups/v3/cgroup2/stats"
	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/typeurl/v2"

	"github.com/roboco/sandboxer/runtime"
)

// oomKilled tells, for the stopped tasks among ids, which ones the
// kernel's OOM killer fired in, from the counters of their cgroups
// (memory.oom_control's oom_kill on cgroup v1, memory.events' oom_kill on
// v2). A stopped task keeps its cgroup until the task is deleted, and the
// shim reads it for the task metrics, so this works wherever the daemon
// answers, in one call. The shim's OOM event would say the same, but only
// to a subscriber that was listening when it happened; the counter is
// still there when someone asks.
//
// A failed read is not an error of the caller's verb: the container's
// state and exit code stand, and OOMKilled stays false (the exit code,
// 137, still tells of a kill).
func (r *Runtime) oomKilled(ctx context.Context, ids []string) map[string]bool {
	if len(ids) == 0 {
		return nil
	}
	filters := make([]string, len(ids))
	for i, id := range ids {
		filters[i] = "id==" + id
	}
	resp, err := r.client.TaskService().Metrics(ctx, &tasks.MetricsRequest{Filters: filters})
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, m := range resp.GetMetrics() {
		v, err := typeurl.UnmarshalAny(m.GetData())
		if err != nil {
			continue
		}
		switch s := v.(type) {
		case *v1.Metrics:
			out[m.GetID()] = s.GetMemoryOomControl().GetOomKill() > 0
		case *v2.Metrics:
			out[m.GetID()] = s.GetMemoryEvents().GetOomKill() > 0
		}
	}
	return out
}

// withOOM fills the OOM verdict of the stopped tasks among states.
func (r *Runtime) withOOM(ctx context.Context, states map[string]taskState) {
	var stopped []string
	for id, ts := range states {
		if ts.state == runtime.StateExited {
			stopped = append(stopped, id)
		}
	}
	for id, killed := range r.oomKilled(ctx, stopped) {
		if ts, ok := states[id]; ok {
			ts.oomKilled = killed
			states[id] = ts
		}
	}
}
