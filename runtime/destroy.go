package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultCallTimeout bounds one runtime call of the lifecycle's cleanup
// paths (a list, an identity check, a kill, a remove) when the caller sets
// no other bound: generous for a loaded daemon, finite for a hung one.
const DefaultCallTimeout = 30 * time.Second

// Outcome is what Destroy did to the container it was given.
type Outcome int

// Destroy outcomes.
const (
	// Removed: the listed container was killed (where it ran) and removed.
	Removed Outcome = iota
	// Gone: the listed container no longer existed; nothing was done.
	Gone
	// Replaced: another container now answers to the listed one's
	// reference (a same-named container created after the list, on a
	// backend whose ID is the name); it was left alone.
	Replaced
)

// String names the outcome for reports and logs.
func (o Outcome) String() string {
	switch o {
	case Removed:
		return "removed"
	case Gone:
		return "gone"
	case Replaced:
		return "replaced"
	default:
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
}

// SameContainer reports whether now, as the runtime reports a container at
// this moment, is the container was, as a caller listed it earlier: the
// same ID, every label was carried still present with the same value (a
// provisioner's call label tells two of its runs apart), and the same
// creation time where both report one. A creation time on a whole second
// may be truncated (Docker's list), so two times are compared at the
// coarser of their precisions.
func SameContainer(was, now Container) bool {
	if was.ID == "" || was.ID != now.ID || !MatchLabels(now.Labels, was.Labels) {
		return false
	}
	if was.Created.IsZero() || now.Created.IsZero() {
		return true
	}
	a, b := was.Created, now.Created
	if a.Nanosecond() == 0 || b.Nanosecond() == 0 {
		a, b = a.Truncate(time.Second), b.Truncate(time.Second)
	}
	return a.Equal(b)
}

// Destroy kills then force-removes (with its anonymous volumes) the
// container a caller listed, and only that container.
//
// Where rt's container IDs are never reused (it is an IDRemover: Docker,
// Podman, Kubernetes' pod UIDs), that takes one call: a forced remove by
// the listed full ID,
// which kills the container first and can only find that container or
// none (Gone). Elsewhere (containerd, whose ID is the name, and any
// wrapper that does not forward IDRemover) a same-named container made
// after the list answers to the listed ID, so Destroy checks: right before
// a kill, and again before the remove, it inspects the listed ID and
// leaves alone a container that is not the listed one any more
// (SameContainer, outcome Replaced). The data of a sandbox is on tmpfs, so
// nothing waits a graceful stop out.
//
// It is best-effort in the way teardown needs: a kill that fails or hangs
// does not stop the remove. Each step (the one forced remove, or the
// checked kill and the checked remove) gets its own deadline of timeout
// (DefaultCallTimeout when timeout <= 0), derived from ctx without its
// cancellation, so that cleanup still happens for a caller whose context
// has just ended (a signal, a failed sibling) and never waits forever on a
// hung runtime.
//
// The error, when not nil, names the container and says which steps failed;
// the outcome is then meaningless.
func Destroy(ctx context.Context, rt ContainerRuntime, listed Container, timeout time.Duration) (Outcome, error) {
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	ref := listed.ID
	name := listed.Name
	if name == "" {
		name = ref
	}
	if ref == "" {
		return Gone, fmt.Errorf("destroy %s: no container ID was listed", name)
	}
	base := context.WithoutCancel(ctx)

	if _, ok := rt.(IDRemover); ok {
		rctx, cancel := context.WithTimeout(base, timeout)
		err := RemoveByID(rctx, rt, ref)
		cancel()
		switch {
		case err == nil:
			return Removed, nil
		case errors.Is(err, ErrNotFound):
			return Gone, nil
		case !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrInvalid):
			return Removed, fmt.Errorf("destroy %s: remove: %w", name, err)
		}
		// A wrapper whose runtime does not say its IDs are never reused,
		// or a listed ID that is not one the runtime removes by (not a
		// full ID): nothing was asked of the runtime; take the checked
		// path.
	}

	// check inspects ref and says whether it is still the listed container.
	check := func(ctx context.Context) (Outcome, bool, error) {
		now, err := rt.Inspect(ctx, ref)
		switch {
		case errors.Is(err, ErrNotFound):
			return Gone, false, nil
		case err != nil:
			return Removed, false, err
		case !SameContainer(listed, now):
			return Replaced, false, nil
		}
		return Removed, true, nil
	}

	kctx, cancel := context.WithTimeout(base, timeout)
	outcome, same, killErr := check(kctx)
	if killErr != nil {
		killErr = fmt.Errorf("identity check before kill: %w", killErr)
	}
	// killed: this call's kill reached the listed container.
	killed := false
	if same {
		killErr = rt.Kill(kctx, ref)
		switch {
		case killErr == nil:
			killed = true
		case errors.Is(killErr, ErrNotFound):
			killErr = nil
		default:
			killErr = fmt.Errorf("kill: %w", killErr)
		}
	}
	cancel()
	if killErr == nil && !same {
		return outcome, nil
	}

	rctx, cancel := context.WithTimeout(base, timeout)
	defer cancel()
	step := "identity check before remove"
	outcome, same, err := check(rctx)
	if err == nil && outcome == Gone && killed {
		// The kill took the container away (a pod, whose kill deletes it:
		// runtime.Forms.StopRemoves): this call removed it.
		return Removed, nil
	}
	if err == nil && same {
		step = "remove"
		err = rt.Remove(rctx, ref)
	}
	if err != nil {
		if killErr != nil {
			return outcome, fmt.Errorf("destroy %s: %s: %w (after %w)", name, step, err, killErr)
		}
		return outcome, fmt.Errorf("destroy %s: %s: %w", name, step, err)
	}
	return outcome, nil
}

// IDRemover is implemented by adapters whose container IDs are never
// reused: an ID is chosen at random (Docker's and Podman's 64 hex digits,
// a Kubernetes pod's UID) and no later container gets it, so a container's full ID
// names that container and no other, ever. It is not part of the port:
// Destroy uses it to tear a listed container down in one forced remove by
// its listed ID, where a backend whose ID is the name (containerd) needs
// an identity check around a kill and a remove. A wrapper that embeds a
// ContainerRuntime does not have it, and so gets the checked path; one
// that wants the single remove forwards it with RemoveByID.
type IDRemover interface {
	// RemoveByID force-removes the container whose full ID is id,
	// killing it first where it runs, with its anonymous volumes. No
	// container with that ID gives an error matching ErrNotFound (another
	// caller removed it). id must be a full ID as the adapter reports it
	// (Container.ID): a name or a prefix is ErrInvalid and removes
	// nothing, since either may come to mean another container. (Docker
	// and Podman resolve a reference as an ID first, then as a name: only
	// a container deliberately named like another's removed ID could be
	// reached instead, and no tool names one so; Kubernetes deletes with
	// the UID as a precondition.) A wrapper whose own runtime is no
	// IDRemover returns ErrUnsupported having asked the runtime nothing.
	RemoveByID(ctx context.Context, id string) error
}

// RemoveByID is rt's IDRemover.RemoveByID, or, where rt is none, an
// ErrUnsupported error without a call to the runtime. Wrappers forward
// IDRemover with it, so that they say what the runtime they wrap says.
func RemoveByID(ctx context.Context, rt ContainerRuntime, id string) error {
	if r, ok := rt.(IDRemover); ok {
		return r.RemoveByID(ctx, id)
	}
	return NewError(rt.Name(), OpRemove, id, ErrUnsupported, errors.New("container IDs may be reused: remove after an identity check"))
}

// IsFullID reports whether id has the shape of a Docker or Podman full
// container ID: 64 lower-case hex digits. IDRemover implementations accept
// nothing else.
func IsFullID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
