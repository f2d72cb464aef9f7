package bench

import (
	"context"
	"sync"
	"time"

	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// timedRuntime wraps the runtime the provisioner drives to record how long
// each Run and each probe exec took, so that a provision's time can be
// split into its phases (see phases).
type timedRuntime struct {
	runtime.ContainerRuntime
	mu    sync.Mutex
	execs map[string][]time.Duration // by container reference
	all   []time.Duration            // every exec, in completion order
	runs  map[string]time.Duration   // by the ID of the container run
	// nets are the durations of the CreateNetwork and RemoveNetwork calls
	// that succeeded since the last drainNetworks.
	netCreates, netRemoves []time.Duration
}

func newTimedRuntime(rt runtime.ContainerRuntime) *timedRuntime {
	return &timedRuntime{ContainerRuntime: rt, execs: map[string][]time.Duration{}, runs: map[string]time.Duration{}}
}

// Run runs the spec and records how long the run request took.
func (t *timedRuntime) Run(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	start := time.Now()
	c, err := t.ContainerRuntime.Run(ctx, spec)
	if err == nil {
		t.mu.Lock()
		t.runs[c.ID] = time.Since(start)
		t.mu.Unlock()
	}
	return c, err
}

// CreateNetwork creates the network and records how long the call took
// (an owner network: the provisioner makes one per owner).
func (t *timedRuntime) CreateNetwork(ctx context.Context, spec runtime.NetworkSpec) (runtime.Network, error) {
	start := time.Now()
	n, err := t.ContainerRuntime.CreateNetwork(ctx, spec)
	if err == nil {
		t.mu.Lock()
		t.netCreates = append(t.netCreates, time.Since(start))
		t.mu.Unlock()
	}
	return n, err
}

// RemoveNetwork removes the network and records how long the call took.
func (t *timedRuntime) RemoveNetwork(ctx context.Context, name string) error {
	start := time.Now()
	err := t.ContainerRuntime.RemoveNetwork(ctx, name)
	if err == nil {
		t.mu.Lock()
		t.netRemoves = append(t.netRemoves, time.Since(start))
		t.mu.Unlock()
	}
	return err
}

// drainNetworks returns the durations of the network creations and
// removals recorded since its last call, and forgets them.
func (t *timedRuntime) drainNetworks() (creates, removes []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	creates, removes = t.netCreates, t.netRemoves
	t.netCreates, t.netRemoves = nil, nil
	return creates, removes
}

// runTime is how long the Run that made container id took.
func (t *timedRuntime) runTime(id string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.runs[id]
	return d, ok
}

// Exec runs the exec and records its duration.
func (t *timedRuntime) Exec(ctx context.Context, ref string, spec runtime.ExecSpec) (runtime.ExecResult, error) {
	start := time.Now()
	res, err := t.ContainerRuntime.Exec(ctx, ref, spec)
	d := time.Since(start)
	t.mu.Lock()
	t.execs[ref] = append(t.execs[ref], d)
	t.all = append(t.all, d)
	t.mu.Unlock()
	return res, err
}

// mark returns a position in the sequence of every exec, for since.
func (t *timedRuntime) mark() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.all)
}

// since returns the durations of the execs completed after mark.
func (t *timedRuntime) since(mark int) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Duration(nil), t.all[mark:]...)
}

// execTotal is the time spent in every exec in ref.
func (t *timedRuntime) execTotal(ref string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var sum time.Duration
	for _, d := range t.execs[ref] {
		sum += d
	}
	return sum
}

// lastExecs returns the durations of the last n execs in ref.
func (t *timedRuntime) lastExecs(ref string, n int) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	all := t.execs[ref]
	return append([]time.Duration(nil), all[max(0, len(all)-n):]...)
}

// events records the provisioner's lifecycle events by owner and service.
type events struct {
	mu  sync.Mutex
	evs map[[2]string][]provision.Event
}

func newEvents() *events { return &events{evs: map[[2]string][]provision.Event{}} }

func (e *events) record(ev provision.Event) {
	if ev.Kind == provision.EventPullProgress {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k := [2]string{ev.Owner, ev.Service}
	e.evs[k] = append(e.evs[k], ev)
}

// find returns the last event of kind for owner and service.
func (e *events) find(owner, service string, kind provision.EventKind) (provision.Event, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	evs := e.evs[[2]string{owner, service}]
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == kind {
			return evs[i], true
		}
	}
	return provision.Event{}, false
}

// Unwrap returns the wrapped runtime (runtime.Unwrapper), so that the
// provisioner finds its optional interfaces (its image store) as on the
// bare runtime.
func (t *timedRuntime) Unwrap() runtime.ContainerRuntime { return t.ContainerRuntime }
