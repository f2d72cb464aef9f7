package fakeruntime

import (
	"context"

	"github.com/roboco/sandboxer/runtime"
)

// Adopting is the fake with runtime.Adopter, for unit tests of adoption:
// a container it adopts is removed, as a cluster's garbage collector would
// remove it, when its owner container is removed.
type Adopting struct{ *Runtime }

var _ runtime.Adopter = Adopting{}

// NewAdopting returns an empty fake that can adopt.
func NewAdopting() Adopting { return Adopting{New()} }

// Adopt marks each container that still exists as adopted by owner (the
// name or ID of a container of the fake, kept as given). An absent owner gives ErrNotFound and
// changes nothing.
func (a Adopting) Adopt(ctx context.Context, owner string, containers []runtime.Container) error {
	end, err := a.begin(ctx, Call{Verb: VerbAdopt, Object: owner})
	if err != nil {
		return err
	}
	defer end()
	a.mu.Lock()
	defer a.mu.Unlock()
	o := a.lookup(owner)
	if o == nil {
		return a.err(VerbAdopt, owner, runtime.ErrNotFound, nil)
	}
	for _, c := range containers {
		if d, ok := a.containers[c.ID]; ok {
			d.c.AdoptedBy = owner
		}
	}
	return nil
}
