package janitor

import (
	"errors"
	"fmt"
	"time"

	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/runtime"
)

// Sandbox is one sandbox container as a sweep saw it.
type Sandbox struct {
	ID     string
	Name   string
	Engine string // the "<prefix>.sandbox.engine" label
	Owner  lifetime.Owner
	State  runtime.State
	// Status is State with why an exited sandbox ended ("exited (OOM
	// killed)", "exited (code 1)"): a sandbox killed for memory says so
	// in the report that removes it.
	Status  string
	Created time.Time // the runtime's creation time
	// Age is the sweep's clock minus Created; for a Created on a whole
	// second, which may be truncated, minus the end of that second.
	Age time.Duration
}

// Failure is a sandbox the sweep could not decide on or could not remove.
type Failure struct {
	Sandbox Sandbox
	Err     error
}

// Report is the outcome of one sweep. Every listed sandbox appears in
// exactly one of its lists, each sorted by container name.
type Report struct {
	// Removed: orphans (owner container removed, owner process ended)
	// past the grace window, killed and removed. In a dry run: what would
	// be removed.
	Removed []Sandbox
	// Vanished: orphans that were gone by the time the sweep came to
	// remove them (removed by another caller; a newer container that
	// took the name meanwhile has another ID and is left alone); nothing
	// was done to them.
	Vanished []Sandbox
	// Kept: the owner is alive.
	Kept []Sandbox
	// Skipped: younger than the grace window; not judged yet.
	Skipped []Sandbox
	// Errors: sandboxes kept because nothing proves their owner gone (no
	// or a malformed owner label, an owner that could not be judged), and
	// those whose removal failed; they are left in place and judged again
	// by the next sweep.
	Errors []Failure
	// DryRun reports that nothing was removed.
	DryRun bool
	// Adopted: sandboxes (also in Kept or Skipped) that this sweep handed
	// to their owner, on a runtime that then removes them itself when the
	// owner is deleted (runtime.Adopter). Not counted by Total. Never
	// filled in a dry run.
	Adopted []Sandbox

	// NetworksRemoved: owner networks (provision.OwnerNetworkName) whose
	// owner is gone, past the grace window from their created label, that
	// no sandbox of the snapshot used, removed. In a dry run: what would
	// be removed.
	NetworksRemoved []Network
	// NetworksKept: owner networks left in place, each with why (Network.
	// Why): in grace, a sandbox still on it, the owner alive or undecided,
	// a container (the agent) still attached (runtime.ErrInUse), or a
	// removal that failed (Network.Err, also in Err).
	NetworksKept []Network
}

// Network is one owner network as a sweep saw it.
type Network struct {
	Name  string
	Owner lifetime.Owner
	// Created is the network's created label (zero when it has none).
	Created time.Time
	Age     time.Duration
	// Why says why a kept network was kept ("" for a removed one).
	Why string
	// Err is set when the owner could not be read or judged, or the
	// removal failed (not for runtime.ErrInUse, which is no failure).
	Err error
}

// Total is the number of sandboxes the sweep listed.
func (r Report) Total() int {
	return len(r.Removed) + len(r.Vanished) + len(r.Kept) + len(r.Skipped) + len(r.Errors)
}

// String summarises the report on one line.
func (r Report) String() string {
	verb := "removed"
	if r.DryRun {
		verb = "would remove"
	}
	line := fmt.Sprintf("%s %d, vanished %d, kept %d, skipped %d (in grace), errors %d",
		verb, len(r.Removed), len(r.Vanished), len(r.Kept), len(r.Skipped), len(r.Errors))
	if len(r.Adopted) > 0 {
		line += fmt.Sprintf(", adopted %d", len(r.Adopted))
	}
	return line
}

// NetworksString summarises the owner networks of the report on one line
// ("" when the sweep saw none).
func (r Report) NetworksString() string {
	if len(r.NetworksRemoved)+len(r.NetworksKept) == 0 {
		return ""
	}
	verb := "removed"
	if r.DryRun {
		verb = "would remove"
	}
	return fmt.Sprintf("networks: %s %d, kept %d", verb, len(r.NetworksRemoved), len(r.NetworksKept))
}

// Err joins the per-container errors and the kept networks' (nil when
// there are none).
func (r Report) Err() error {
	errs := make([]error, len(r.Errors))
	for i, f := range r.Errors {
		errs[i] = f.Err
	}
	for _, n := range r.NetworksKept {
		errs = append(errs, n.Err)
	}
	return errors.Join(errs...)
}

func names(sbs []Sandbox) []string {
	out := make([]string, len(sbs))
	for i, s := range sbs {
		out[i] = s.Name
	}
	return out
}
