package janitor

import (
	"context"
	"errors"
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
}

// String names the owner for reports and logs.
func (o Owner) String() string {
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
// window (never an owner with an empty identity: those sandboxes are
// orphans by rule).
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

// ContainerLiveness judges owners by container: an owner is alive when a
// container whose name equals Owner.Name is running (or paused: a frozen
// agent resumes and still needs its databases). It makes one List call
// with an empty selector per Alive call — one snapshot of the runtime,
// whatever the number of owners — and compares names exactly, so that a
// name is never mistaken for an ID prefix.
func ContainerLiveness(rt runtime.ContainerRuntime) Liveness {
	return LivenessFunc(func(ctx context.Context, owners []Owner) (map[Owner]bool, error) {
		all, err := rt.List(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("janitor: list owner containers: %w", err)
		}
		live := make(map[string]bool, len(all))
		for _, c := range all {
			if c.State == runtime.StateRunning || c.State == runtime.StatePaused {
				live[c.Name] = true
			}
		}
		out := make(map[Owner]bool, len(owners))
		for _, o := range owners {
			out[o] = live[o.Name]
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
		err = fmt.Errorf("janitor: process owners: %w", err)
	}
	return out, err
}

// DefaultLiveness is what a Janitor uses unless told otherwise: owners with
// a Process are judged by ProcessLiveness, all others by ContainerLiveness
// on rt (which is only asked when there is at least one such owner).
func DefaultLiveness(rt runtime.ContainerRuntime) Liveness {
	return splitLiveness{process: ProcessLiveness(), container: ContainerLiveness(rt)}
}

type splitLiveness struct{ process, container Liveness }

func (l splitLiveness) Alive(ctx context.Context, owners []Owner) (map[Owner]bool, error) {
	var procs, named []Owner
	for _, o := range owners {
		if o.Process.IsZero() {
			named = append(named, o)
		} else {
			procs = append(procs, o)
		}
	}
	out := make(map[Owner]bool, len(owners))
	var errs []error
	for _, part := range []struct {
		owners []Owner
		l      Liveness
	}{{procs, l.process}, {named, l.container}} {
		if len(part.owners) == 0 {
			continue
		}
		verdicts, err := part.l.Alive(ctx, part.owners)
		for o, v := range verdicts {
			out[o] = v
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}
