package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultCallTimeout bounds one runtime call of the lifecycle's cleanup
// paths (a list, a look-up, a remove) when the caller sets no other bound:
// generous for a loaded daemon, finite for a hung one.
const DefaultCallTimeout = 30 * time.Second

// Outcome is what Destroy did to the container it was given.
type Outcome int

// Destroy outcomes.
const (
	// Removed: the listed container was there, and was removed.
	Removed Outcome = iota
	// Gone: the listed container no longer existed; nothing was done.
	Gone
)

// String names the outcome for reports and logs.
func (o Outcome) String() string {
	switch o {
	case Removed:
		return "removed"
	case Gone:
		return "gone"
	default:
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
}

// Destroy force-removes (killing it where it runs, with its anonymous
// volumes) the container a caller listed, by its listed ID, and only that
// container. No backend ever gives a container's ID to another container
// (Docker's, Podman's and containerd's are 64 random hex digits, a pod's
// is its UID), so a same-named container made after the list has another
// ID and is never touched: there is nothing to check. The data of a
// sandbox is on tmpfs, so nothing waits a graceful stop out.
//
// Before the remove, one look-up by the same ID tells the caller whether
// the container was still there (Removed) or had gone meanwhile (Gone:
// removed by another caller); it decides nothing else, and a look-up that
// fails does not stop the remove.
//
// Each of the two calls gets its own deadline of timeout
// (DefaultCallTimeout when timeout <= 0), derived from ctx without its
// cancellation, so that cleanup still happens for a caller whose context
// has just ended (a signal, a failed sibling) and never waits forever on a
// hung runtime.
//
// The error, when not nil, names the container; the outcome is then
// meaningless.
func Destroy(ctx context.Context, rt ContainerRuntime, listed Container, timeout time.Duration) (Outcome, error) {
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	name := listed.Name
	if name == "" {
		name = listed.ID
	}
	if listed.ID == "" {
		return Gone, fmt.Errorf("destroy %s: no container ID was listed", name)
	}
	base := context.WithoutCancel(ctx)

	ictx, cancel := context.WithTimeout(base, timeout)
	_, err := rt.Inspect(ictx, listed.ID)
	cancel()
	if errors.Is(err, ErrNotFound) {
		return Gone, nil
	}

	rctx, cancel := context.WithTimeout(base, timeout)
	defer cancel()
	if rerr := rt.Remove(rctx, listed.ID); rerr != nil {
		if err != nil {
			return Removed, fmt.Errorf("destroy %s: remove: %w (after the look-up: %w)", name, rerr, err)
		}
		return Removed, fmt.Errorf("destroy %s: remove: %w", name, rerr)
	}
	return Removed, nil
}
