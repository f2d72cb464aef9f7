package lifetime

import (
	"context"
	"errors"
	"fmt"

	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/runtime"
)

// Errors of FromLabels (errors.Is): why a sandbox's owner cannot be
// judged. Such a sandbox is never removed.
var (
	// ErrNoOwner: the sandbox carries no owner label. Sandboxer always
	// writes one, so such a container is not one of ours to judge.
	ErrNoOwner = errors.New("no owner label")
	// ErrMalformedOwner: the owner labels cannot be read (a process owner
	// with a missing or unparsable field).
	ErrMalformedOwner = errors.New("malformed owner label")
)

// FromLabels reads the owner of a sandbox from its labels (the keys of
// k): the owner container's name, the owning process when the
// process-owner keys are present, and the owning run when the run-owner
// keys are. The error (ErrNoOwner,
// ErrMalformedOwner) says why the owner cannot be judged.
func FromLabels(k labels.Keys, lbls map[string]string) (Owner, error) {
	proc, hasProc, err := processFromLabels(k, lbls)
	if err != nil {
		return Owner{}, fmt.Errorf("%w: %w", ErrMalformedOwner, err)
	}
	run, hasRun, err := runFromLabels(k, lbls)
	if err != nil {
		return Owner{}, fmt.Errorf("%w: %w", ErrMalformedOwner, err)
	}
	o := Owner{Name: lbls[k.Owner], Process: proc, Run: run}
	if o.Name == "" && !hasProc && !hasRun {
		return o, fmt.Errorf("%w %q", ErrNoOwner, k.Owner)
	}
	return o, nil
}

// Judge is the default judgement of owners, from one snapshot of the
// runtime: an owner with a Run by RunLiveness, one with a Process by
// ProcessLiveness, any other by whether snap knows a container by its
// Name (it exists, in any state).
// As with Liveness, an owner missing from the result is undecided, with
// err as the cause when it is non-nil.
func Judge(ctx context.Context, owners []Owner, snap runtime.Snapshot) (map[Owner]bool, error) {
	out := make(map[Owner]bool, len(owners))
	var procs, runs []Owner
	for _, o := range owners {
		switch {
		case !o.Run.IsZero():
			runs = append(runs, o)
		case !o.Process.IsZero():
			procs = append(procs, o)
		default:
			out[o] = snap.Exists(o.Name)
		}
	}
	var errs []error
	for _, j := range []struct {
		owners []Owner
		l      Liveness
	}{{procs, ProcessLiveness()}, {runs, RunLiveness()}} {
		if len(j.owners) == 0 {
			continue
		}
		verdicts, err := j.l.Alive(ctx, j.owners)
		for o, v := range verdicts {
			out[o] = v
		}
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// Verdict reads the verdict on o from what a Liveness (or Judge) returned:
// whether o is alive, or, when there is no verdict on o, an error: err,
// the call's own, or "no verdict".
func Verdict(verdicts map[Owner]bool, err error, o Owner) (bool, error) {
	alive, ok := verdicts[o]
	switch {
	case ok:
		return alive, nil
	case err != nil:
		return false, err
	default:
		return false, errors.New("liveness gave no verdict")
	}
}
