package adapterkit

import (
	"context"
	"sync"
)

// NameLocks serialises work on one name within a process (a network's
// create: its check for a taken name and the create itself), while work
// on other names goes on. The zero value is ready to use.
type NameLocks struct {
	mu    sync.Mutex
	locks map[string]*nameLock
}

// nameLock is one name's lock: a one-slot channel, so that a waiter can
// give up with its context, and how many hold or wait for it.
type nameLock struct {
	slot  chan struct{}
	users int
}

// Lock takes name's lock, waiting at most until ctx ends (then ctx's
// error), and returns the function that releases it.
func (l *NameLocks) Lock(ctx context.Context, name string) (unlock func(), err error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*nameLock{}
	}
	n := l.locks[name]
	if n == nil {
		n = &nameLock{slot: make(chan struct{}, 1)}
		l.locks[name] = n
	}
	n.users++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if n.users--; n.users == 0 {
			delete(l.locks, name)
		}
		l.mu.Unlock()
	}
	select {
	case n.slot <- struct{}{}:
		return func() { <-n.slot; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
