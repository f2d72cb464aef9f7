package provision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/roboco/sandboxer/runtime"
)

// ownerNetworkMax is the longest owner network name: a DNS-1123 label, so
// that the name is valid on every runtime (a Kubernetes NetworkPolicy's
// name included).
const ownerNetworkMax = 63

// OwnerNetworkName is the name of owner's network (owner is the owner
// container's name, the owner label's value): "sbx-" + owner, or, when
// that exceeds 63 characters, "sbx-" + the first 50 characters of owner +
// "-" + the first 8 hex digits of owner's SHA-256, so that two long owners
// that share a beginning still get networks of their own.
func OwnerNetworkName(owner string) string {
	name := "sbx-" + owner
	if len(name) <= ownerNetworkMax {
		return name
	}
	sum := sha256.Sum256([]byte(owner))
	return "sbx-" + owner[:50] + "-" + hex.EncodeToString(sum[:])[:8]
}

// ownerNet is one call's owner network: the name, whether this call
// created it, and the one recreate a Run may ask for.
type ownerNet struct {
	name string
	// ready is closed once the create-if-absent is done; err is its
	// outcome, read only after ready.
	ready chan struct{}
	err   error

	mu        sync.Mutex
	made      bool // this call created it (read after the errgroup)
	recreated bool
	recErr    error
}

// hostMode reports whether the sandboxes' ports are published (neither a
// caller's network nor private network mode).
func (p *Provisioner) hostMode() bool { return p.opts.Network == "" && !p.opts.Private }

// ownsNetwork reports whether the sandboxes join their owner's network
// (host mode and private network mode) rather than the caller's.
func (p *Provisioner) ownsNetwork() bool { return p.opts.Network == "" }

// networkLabels are the labels of owner's network: the caller's extra
// labels (a process owner's identity, which the janitor judges it by),
// the sandbox marker, the owner, the network role and the creation time.
func (p *Provisioner) networkLabels(owner string) map[string]string {
	l := maps.Clone(p.opts.Labels)
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, p.keys.NetworkOf(owner))
	l[p.keys.Created] = strconv.FormatInt(p.opts.Now().Unix(), 10)
	return l
}

// kind names a network's mode for messages.
func kind(internal bool) string {
	if internal {
		return "private (internal)"
	}
	return "host-mode (plain)"
}

// ensureNetwork creates the owner's network unless it exists already: an
// existing one (ErrAlreadyExists) is reused once ListNetworks confirms it
// is this owner's and of this mode; one of the other mode, or not the
// owner's, is an ErrConflict error (a runtime that cannot list networks,
// runtime.ErrUnsupported, reuses it unchecked). Each runtime call is bounded by
// CallTimeout; the create runs to its end even when ctx ends first, so that
// whether this call made the network is always known.
func (p *Provisioner) ensureNetwork(ctx context.Context, owner string, n *ownerNet) error {
	spec := runtime.NetworkSpec{Name: n.name, Labels: p.networkLabels(owner), Internal: p.opts.Private}
	// Twice at most: a network that a concurrent teardown removes between
	// the create and the list is created again.
	for attempt := 0; ; attempt++ {
		// Not cancelled with ctx (a sibling's failure cancels it): a
		// create cut short may still have made the network, and the
		// rollback removes only what it knows this call made.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.CallTimeout)
		_, err := p.rt.CreateNetwork(cctx, spec)
		cancel()
		if err == nil {
			n.mu.Lock()
			n.made = true
			n.mu.Unlock()
			p.emit(ctx, Event{Kind: EventNetworkCreated, Owner: owner, Network: n.name})
			return nil
		}
		if !errors.Is(err, runtime.ErrAlreadyExists) {
			return fmt.Errorf("provision %s: create network %s: %w", owner, n.name, err)
		}
		lctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
		nets, err := p.rt.ListNetworks(lctx, p.keys.NetworkOf(owner))
		cancel()
		if errors.Is(err, runtime.ErrUnsupported) {
			// A runtime that cannot list its networks cannot say whose
			// this one is: it is taken for the owner's, as its name says.
			if p.opts.Logger != nil {
				p.opts.Logger.Debug("owner network exists and the runtime cannot list networks: reused unchecked", "owner", owner, "network", n.name, "runtime", p.rt.Name())
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("provision %s: network %s exists; list it: %w", owner, n.name, err)
		}
		for _, x := range nets {
			if x.Name != n.name {
				continue
			}
			if x.Internal != p.opts.Private {
				return fmt.Errorf("%w: owner %s has a %s network %s and this provision is %s: an owner is in one mode at a time (tear it down first)",
					ErrConflict, owner, kind(x.Internal), n.name, kind(p.opts.Private))
			}
			return nil
		}
		if attempt == 1 {
			return fmt.Errorf("%w: network %s exists and is not owner %s's (its labels do not say so): it is left alone", ErrConflict, n.name, owner)
		}
	}
}

// recreateNetwork creates the owner's network again after a Run found it
// gone (a concurrent teardown of the owner's last sandbox removed it): once
// per call, whichever service asks first; the others share its outcome.
func (p *Provisioner) recreateNetwork(ctx context.Context, owner string, n *ownerNet) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.recreated {
		n.recreated = true
		n.mu.Unlock()
		err := p.ensureNetwork(ctx, owner, n)
		n.mu.Lock()
		n.recErr = err
	}
	return n.recErr
}

// removeOwnerNetwork removes owner's network, which its last sandbox has
// left, if it is there (ListNetworks by the owner's labels; a runtime that
// cannot list removes by name), each call within CallTimeout even after
// ctx has ended. A container still on
// it (the agent) is runtime.ErrInUse: the network is left for the janitor,
// and that is not an error.
func (p *Provisioner) removeOwnerNetwork(ctx context.Context, owner string) error {
	name := OwnerNetworkName(owner)
	// Listed first, so that only a network that was there is reported
	// removed (a second teardown says nothing) and only the owner's own.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.CallTimeout)
	nets, err := p.rt.ListNetworks(lctx, p.keys.NetworkOf(owner))
	cancel()
	listed := !errors.Is(err, runtime.ErrUnsupported)
	if err != nil && listed {
		return fmt.Errorf("list network %s: %w", name, err)
	}
	if listed && !slices.ContainsFunc(nets, func(n runtime.Network) bool { return n.Name == name }) {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.CallTimeout)
	err = p.rt.RemoveNetwork(rctx, name)
	cancel()
	switch {
	case err == nil:
		if listed {
			p.emit(ctx, Event{Kind: EventNetworkRemoved, Owner: owner, Network: name})
		}
		return nil
	case errors.Is(err, runtime.ErrInUse):
		p.emit(ctx, Event{Kind: EventNetworkKept, Owner: owner, Network: name})
		return nil
	default:
		return fmt.Errorf("remove network %s: %w", name, err)
	}
}

// removeIfLast removes owner's network when no sandbox of owner is left
// (one List within CallTimeout).
func (p *Provisioner) removeIfLast(ctx context.Context, owner string) error {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.CallTimeout)
	left, err := p.rt.List(lctx, p.keys.OwnedBy(owner))
	cancel()
	if err != nil {
		return fmt.Errorf("list what is left of %s: %w", owner, err)
	}
	if len(left) > 0 {
		return nil
	}
	return p.removeOwnerNetwork(ctx, owner)
}
