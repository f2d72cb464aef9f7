package lifetime

import (
	"context"
	"fmt"

	"github.com/roboco/sandboxer/runtime"
)

// Owner is who a sandbox belongs to, as its labels say. It is comparable,
// so it can key a map.
type Owner struct {
	// Name is the value of the "<prefix>.sandbox.owner" label: by
	// convention the owner container's name ("roboco-agent-42").
	Name string
	// Process, when not zero, is the process that owns the sandbox; it
	// alone then decides whether the owner lives, and Name is informative.
	Process Process
	// Run, when not zero, is the run that owns the sandbox (the
	// processes that share it); it alone then decides whether the owner
	// lives.
	Run Run
}

// IsContainer reports whether a container owns the sandbox (not a
// process, nor a run): the only kind of owner a runtime can adopt by.
func (o Owner) IsContainer() bool { return o.Process.IsZero() && o.Run.IsZero() }

// String names the owner for reports and logs.
func (o Owner) String() string {
	if !o.Run.IsZero() {
		if o.Name != "" {
			return fmt.Sprintf("%s (%s)", o.Name, o.Run)
		}
		return o.Run.String()
	}
	if !o.Process.IsZero() {
		if o.Name != "" {
			return fmt.Sprintf("%s (%s)", o.Name, o.Process)
		}
		return o.Process.String()
	}
	return o.Name
}

// Liveness decides which owners are alive. A sweep calls it at most once,
// with the distinct owners of the sandboxes that are past their grace
// window (never an owner with an empty identity: those sandboxes are kept
// and reported).
//
// The returned map holds a verdict per owner it could decide. An owner
// without a verdict is undecided: its sandboxes are neither removed nor
// kept but reported as errors, with err as the cause when err is non-nil.
// So an implementation that fails part-way returns what it decided so far
// together with the error, and nothing is removed on a guess.
type Liveness interface {
	Alive(ctx context.Context, owners []Owner) (map[Owner]bool, error)
}

// LivenessFunc adapts a function to Liveness.
type LivenessFunc func(ctx context.Context, owners []Owner) (map[Owner]bool, error)

// Alive calls f.
func (f LivenessFunc) Alive(ctx context.Context, owners []Owner) (map[Owner]bool, error) {
	return f(ctx, owners)
}

// ContainerLiveness judges owners by container, as a sweep does by
// default: an owner is alive while a container that the runtime's own
// tools know by Owner.Name exists, in any state (created, running, paused,
// exited: an agent created while its image pulls, or stopped to be
// restarted, still owns its databases); it is gone once removed. It makes
// one runtime.Snapshot call per Alive call, whatever the number of owners,
// and compares references exactly, so that a name is never mistaken for
// an ID prefix. Owners with a Process are judged the same way by name; use
// Judge to judge them by process.
func ContainerLiveness(rt runtime.ContainerRuntime) Liveness {
	return LivenessFunc(func(ctx context.Context, owners []Owner) (map[Owner]bool, error) {
		snap, err := rt.Snapshot(ctx, map[string]string{})
		if err != nil {
			return nil, fmt.Errorf("lifetime: list owner containers: %w", err)
		}
		out := make(map[Owner]bool, len(owners))
		for _, o := range owners {
			out[o] = snap.Exists(o.Name)
		}
		return out, nil
	})
}

// ProcessLiveness judges owners by their Process, as seen from the calling
// process's /proc (see CurrentProcess). Rules:
//   - a different boot id: dead (the host rebooted: a host-mode sandbox is
//     only usable from the runtime's own host, so that is where its owner
//     runs);
//   - same boot, same pid namespace: alive exactly while a process with
//     that pid and that start time exists (a reused pid is not the owner);
//   - same boot, another pid namespace (e.g. the owner runs in a CI job
//     container): alive while such a process is visible in that namespace;
//     when it is not, dead only if the janitor sees every process of the
//     host (initial pid namespace), otherwise kept, because the owner
//     cannot be observed from here.
//
// Owners with a zero Process get no verdict. Limitation: on a /proc
// mounted with hidepid, another user's live process looks gone; run the
// janitor as the same user as the owners, or as root.
func ProcessLiveness() Liveness { return processLiveness{localProc} }

type processLiveness struct{ fs *procfs }

func (l processLiveness) Alive(_ context.Context, owners []Owner) (map[Owner]bool, error) {
	ps := make([]Process, 0, len(owners))
	for _, o := range owners {
		if !o.Process.IsZero() {
			ps = append(ps, o.Process)
		}
	}
	verdicts, err := l.fs.alive(ps)
	out := make(map[Owner]bool, len(owners))
	for _, o := range owners {
		if v, ok := verdicts[o.Process]; ok && !o.Process.IsZero() {
			out[o] = v
		}
	}
	if err != nil {
		err = fmt.Errorf("lifetime: process owners: %w", err)
	}
	return out, err
}
