package provision

import "sync"

// flights counts, per owner, the Provision calls of one Provisioner that
// are in flight, so that overlapping calls of one owner share the owner
// network's fate: a losing call's rollback must not remove the network
// that a sibling call (which found it made, and has not run its
// sandboxes yet) is about to join. Only the last call of the owner to
// leave removes the network, and only if one of the overlapping calls
// made it and the owner then has no sandbox left. Calls of other
// processes are not counted: the Run that finds the network gone creates
// it again once (recreateNetwork). The zero value is ready.
type flights struct {
	mu     sync.Mutex
	owners map[string]*flight
}

// flight is one owner's overlapping calls.
type flight struct {
	calls int
	// made: one of the overlapping calls created the owner network and
	// none that left has removed it.
	made bool
}

// enter counts one more call of owner in flight.
func (f *flights) enter(owner string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owners == nil {
		f.owners = map[string]*flight{}
	}
	fl := f.owners[owner]
	if fl == nil {
		fl = &flight{}
		f.owners[owner] = fl
	}
	fl.calls++
}

// leave counts one call of owner out; made says whether it created the
// owner network and leaves its removal to the calls still in flight. It
// reports whether the caller is the last call out of a flight in which
// some call made the network: the one that must see to its removal.
func (f *flights) leave(owner string, made bool) (last bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.owners[owner]
	fl.made = fl.made || made
	fl.calls--
	if fl.calls > 0 {
		return false
	}
	delete(f.owners, owner)
	return fl.made
}
