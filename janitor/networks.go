package janitor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/runtime"
)

// Why a sweep keeps an owner network (Network.Why).
const (
	KeptInGrace    = "in grace"
	KeptSandboxOn  = "a sandbox of the owner is on it"
	KeptOwnerAlive = "owner alive"
	KeptUndecided  = "owner undecided"
	KeptInUse      = "a container is still attached"
	KeptNoCreated  = "no creation time"
	KeptFailed     = "removal failed"
)

// sweepNetworks judges the owner networks (labels.Keys.OwnerNetworks): one
// whose owner is gone (the same verdict as for sandboxes, from the
// sweep's snapshot), past the grace window from its created label, and
// that no sandbox of the snapshot uses (but the ones this sweep removed)
// is removed; a container still on it (runtime.ErrInUse) keeps it. A
// runtime that cannot list networks (runtime.ErrUnsupported) has none to
// sweep. Every runtime call is bounded by CallTimeout.
func (j *Janitor) sweepNetworks(ctx context.Context, snap runtime.Snapshot, now time.Time, rep *Report) error {
	lctx, cancel := context.WithTimeout(ctx, j.opts.CallTimeout)
	nets, err := j.rt.ListNetworks(lctx, j.keys.OwnerNetworks())
	cancel()
	if errors.Is(err, runtime.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("janitor: list owner networks: %w", err)
	}
	gone := map[string]bool{}
	for _, l := range [][]Sandbox{rep.Removed, rep.Vanished} {
		for _, sb := range l {
			gone[sb.ID] = true
		}
	}
	usedBy := map[string]bool{}  // owner label values of the sandboxes left
	usedNet := map[string]bool{} // networks those sandboxes are on
	for _, c := range snap.Matched {
		if gone[c.ID] {
			continue
		}
		usedBy[c.Labels[j.keys.Owner]] = true
		for n := range c.Networks {
			usedNet[n] = true
		}
	}

	var judged []Network
	for _, n := range nets {
		nw := Network{Name: n.Name}
		owner, ownerErr := lifetime.FromLabels(j.keys, n.Labels)
		nw.Owner = owner
		created, cerr := strconv.ParseInt(n.Labels[j.keys.Created], 10, 64)
		if cerr == nil {
			nw.Created = time.Unix(created, 0)
			nw.Age = now.Sub(latestCreation(nw.Created))
		}
		switch {
		case cerr != nil:
			nw.Why = KeptNoCreated
		case nw.Age < j.opts.Grace:
			nw.Why = KeptInGrace
		case ownerErr != nil:
			nw.Why, nw.Err = KeptUndecided, fmt.Errorf("janitor: network %s: kept: %w", n.Name, ownerErr)
		case usedBy[n.Labels[j.keys.Owner]] || usedNet[n.Name]:
			nw.Why = KeptSandboxOn
		default:
			judged = append(judged, nw)
			continue
		}
		rep.NetworksKept = append(rep.NetworksKept, nw)
	}

	if len(judged) > 0 {
		var owners []lifetime.Owner
		for _, nw := range judged {
			if !slices.Contains(owners, nw.Owner) {
				owners = append(owners, nw.Owner)
			}
		}
		actx, cancel := context.WithTimeout(ctx, j.opts.CallTimeout)
		verdicts, lerr := j.alive(actx, owners, snap)
		cancel()
		for _, nw := range judged {
			alive, cause := lifetime.Verdict(verdicts, lerr, nw.Owner)
			switch {
			case cause != nil:
				nw.Why, nw.Err = KeptUndecided, fmt.Errorf("janitor: network %s: kept: %w: %s: %w", nw.Name, ErrUndecided, nw.Owner, cause)
			case alive:
				nw.Why = KeptOwnerAlive
			case j.opts.DryRun:
				rep.NetworksRemoved = append(rep.NetworksRemoved, nw)
				continue
			default:
				rctx, cancel := context.WithTimeout(ctx, j.opts.CallTimeout)
				err := j.rt.RemoveNetwork(rctx, nw.Name)
				cancel()
				switch {
				case err == nil:
					rep.NetworksRemoved = append(rep.NetworksRemoved, nw)
					continue
				case errors.Is(err, runtime.ErrInUse):
					nw.Why = KeptInUse
				default:
					nw.Why, nw.Err = KeptFailed, fmt.Errorf("janitor: remove network %s (owner %s): %w", nw.Name, nw.Owner, err)
				}
			}
			rep.NetworksKept = append(rep.NetworksKept, nw)
		}
	}
	for _, l := range [][]Network{rep.NetworksRemoved, rep.NetworksKept} {
		slices.SortFunc(l, func(a, b Network) int { return cmp.Compare(a.Name, b.Name) })
	}
	return nil
}
