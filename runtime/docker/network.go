package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

const (
	// maxSubnetAttempts bounds how many subnets CreateNetwork tries when
	// the daemon says the one it picked overlaps another network's (one
	// made between the list and the create).
	maxSubnetAttempts = 8
	// inhibitIPv4 is the bridge driver's option that leaves the bridge
	// without an IPv4 address. An internal network gets it: Docker's
	// Internal alone only drops forwarded traffic, and the host answers a
	// container on its bridge's address, and through it (the container
	// keeps a default route via the gateway) on every other address of
	// the host. Without an address on the bridge the host is not on the
	// network at all: "no route to host" from inside.
	inhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"
)

// predefined are the networks every daemon has, which are the runtime's
// and never the adapter's.
var predefined = []string{network.NetworkBridge, network.NetworkHost, network.NetworkNone}

// CreateNetwork creates a bridge network with spec's labels and a /26 of
// sandboxer's pool (adapterkit.SubnetPool) that none of the daemon's
// networks and, for a local daemon, none of the host's routes overlap;
// when the daemon says it overlaps anyway (a concurrent create took it),
// the next free one is tried, a bounded number of times. spec.Internal
// makes it Docker-internal (no NAT, no forwarding out) with no address of
// the host's on it (inhibitIPv4). A name that is already taken is
// runtime.ErrAlreadyExists: this process's creates of one name take turns,
// and a concurrent create of another process's is settled after the fact
// (settleDuplicateName), since pre-1.44 daemons check duplicate names
// best-effort only.
func (r *Runtime) CreateNetwork(ctx context.Context, spec runtime.NetworkSpec) (runtime.Network, error) {
	const op = runtime.OpCreateNetwork
	pool, err := adapterkit.SubnetPool(nil)
	if err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, adapterkit.WithKind(runtime.ErrInvalid, "%w", err))
	}
	if err := r.negotiate(ctx, op, spec.Name); err != nil {
		return runtime.Network{}, err
	}
	unlock, err := r.netCreates.Lock(ctx, spec.Name)
	if err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, fmt.Errorf("wait for another create of the same name: %w", err))
	}
	defer unlock()
	existing, err := r.cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, err)
	}
	var taken []netip.Prefix
	for _, n := range existing {
		if n.Name == spec.Name {
			return runtime.Network{}, r.wrap(op, spec.Name, adapterkit.WithKind(runtime.ErrAlreadyExists, "a network of that name exists"))
		}
		taken = append(taken, subnets(n.IPAM)...)
	}
	if r.local() {
		taken = append(taken, adapterkit.HostRoutes()...)
	}
	opts := network.CreateOptions{
		Driver:   "bridge",
		Internal: spec.Internal,
		Labels:   maps.Clone(spec.Labels),
	}
	if spec.Internal {
		opts.Options = map[string]string{inhibitIPv4: "true"}
	}
	for attempt := 1; ; attempt++ {
		subnet, err := adapterkit.FreeSubnet(pool, spec.Name, taken)
		if err != nil {
			return runtime.Network{}, r.wrap(op, spec.Name, err)
		}
		opts.IPAM = &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{
			Subnet:  subnet.String(),
			Gateway: adapterkit.Gateway(subnet).String(),
		}}}
		if r.beforeNetworkCreate != nil {
			r.beforeNetworkCreate(ctx, subnet)
		}
		resp, err := r.cli.NetworkCreate(ctx, spec.Name, opts)
		if err == nil {
			if err := r.settleDuplicateName(ctx, spec.Name, resp.ID); err != nil {
				return runtime.Network{}, err
			}
			return runtime.Network{ID: resp.ID, Name: spec.Name, Labels: maps.Clone(spec.Labels), Internal: spec.Internal, Subnet: subnet}, nil
		}
		// The daemon answers an overlapping pool with 403 ("Pool overlaps
		// with other one on this address space").
		if !cerrdefs.IsPermissionDenied(err) || attempt == maxSubnetAttempts {
			return runtime.Network{}, r.wrap(op, spec.Name, fmt.Errorf("subnet %s: %w", subnet, err))
		}
		r.log.DebugContext(ctx, "docker: subnet taken, trying another", "network", spec.Name, "subnet", subnet, "error", err)
		taken = append(taken, subnet)
	}
}

// settleDuplicateName makes a create that raced another of the same name
// lose, as every other backend's does. Daemons before API 1.44 check a
// duplicate name only best-effort: two concurrent creates of one name both
// succeed (seen on Docker 20.10 with two agents of one owner starting at
// once), and the name then means two networks. Each creator lists the
// networks of that name after its create; the first of them (sameName's
// order) stays, and a creator whose network is not that one removes it
// and reports runtime.ErrAlreadyExists, so its caller reuses the survivor.
// Both sides agree on the survivor, whichever lists first. Until the
// loser's removal, Run and RemoveNetwork resolve the ambiguous name by the
// same rule.
func (r *Runtime) settleDuplicateName(ctx context.Context, name, id string) error {
	const op = runtime.OpCreateNetwork
	same, err := r.sameName(ctx, name)
	if err != nil {
		return r.wrap(op, name, fmt.Errorf("list networks named %s after creating %s: %w", name, id, err))
	}
	if len(same) < 2 || same[0].ID == id {
		return nil
	}
	if err := r.cli.NetworkRemove(ctx, id); err != nil && !cerrdefs.IsNotFound(err) {
		return r.wrap(op, name, fmt.Errorf("remove %s, a duplicate of network %s (%s) made by a concurrent create: %w", id, name, same[0].ID, err))
	}
	r.log.DebugContext(ctx, "docker: a concurrent create made the same network first; removed ours", "network", name, "kept", same[0].ID, "removed", id)
	return r.wrap(op, name, adapterkit.WithKind(runtime.ErrAlreadyExists, "a network of that name was created concurrently"))
}

// sameName returns the daemon's networks called exactly name, the one
// created first (then the lower ID) first: the one a duplicate name
// means (settleDuplicateName).
func (r *Runtime) sameName(ctx context.Context, name string) ([]network.Summary, error) {
	listed, err := r.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return nil, err
	}
	var same []network.Summary
	for _, n := range listed {
		if n.Name == name { // the daemon's name filter matches substrings
			same = append(same, n)
		}
	}
	slices.SortFunc(same, func(a, b network.Summary) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return same, nil
}

// ambiguousNetwork reports whether err is the daemon's refusal of a
// network name that two networks have (a concurrent create's duplicate
// before settleDuplicateName removed it).
func ambiguousNetwork(err error) bool {
	return err != nil && strings.Contains(err.Error(), "is ambiguous")
}

// networkOf returns the ID of the network the name means while it is
// ambiguous (sameName's first); ok is false when there is none.
func (r *Runtime) networkOf(ctx context.Context, name string) (id string, ok bool) {
	same, err := r.sameName(ctx, name)
	if err != nil || len(same) == 0 {
		return "", false
	}
	return same[0].ID, true
}

// ListNetworks returns the daemon's networks whose labels contain every
// pair of selector (the daemon filters, runtime.MatchLabels checks again),
// never the daemon's predefined ones (bridge, host, none).
func (r *Runtime) ListNetworks(ctx context.Context, selector map[string]string) ([]runtime.Network, error) {
	const op = runtime.OpListNetworks
	obj := adapterkit.SelectorString(selector)
	if err := r.negotiate(ctx, op, obj); err != nil {
		return nil, err
	}
	f := filters.NewArgs()
	for k, v := range selector {
		f.Add("label", k+"="+v)
	}
	listed, err := r.cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return nil, r.wrap(op, obj, err)
	}
	out := make([]runtime.Network, 0, len(listed))
	for _, n := range listed {
		if slices.Contains(predefined, n.Name) || !runtime.MatchLabels(n.Labels, selector) {
			continue
		}
		var subnet netip.Prefix
		if s := subnets(n.IPAM); len(s) > 0 {
			subnet = s[0]
		}
		labels := n.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		out = append(out, runtime.Network{ID: n.ID, Name: n.Name, Labels: labels, Internal: n.Internal, Subnet: subnet})
	}
	return out, nil
}

// RemoveNetwork deletes a network by name or ID; an absent network is not
// an error. A network with a container on it is runtime.ErrInUse, and the
// daemon leaves it as it was.
func (r *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	if err := r.negotiate(ctx, runtime.OpRemoveNetwork, name); err != nil {
		return err
	}
	err := r.cli.NetworkRemove(ctx, name)
	if ambiguousNetwork(err) {
		// A concurrent create's duplicate, not removed yet: every
		// network of the name goes (each refused while in use).
		err = r.removeSameName(ctx, name)
	}
	if err != nil && !cerrdefs.IsNotFound(err) {
		return r.wrap(runtime.OpRemoveNetwork, name, err)
	}
	return nil
}

// removeSameName removes every network called exactly name, by ID; one
// gone meanwhile is not an error.
func (r *Runtime) removeSameName(ctx context.Context, name string) error {
	same, err := r.sameName(ctx, name)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range same {
		if err := r.cli.NetworkRemove(ctx, n.ID); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lookupNetwork returns the network name means, as the daemon inspects
// it: while a concurrent create's duplicate makes the name ambiguous, the
// one that stays (networkOf). A network the daemon does not know is ok
// false, not an error (the create that follows says it is not found).
func (r *Runtime) lookupNetwork(ctx context.Context, op, name string) (n network.Inspect, ok bool, err error) {
	n, err = r.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if ambiguousNetwork(err) {
		if id, found := r.networkOf(ctx, name); found {
			n, err = r.cli.NetworkInspect(ctx, id, network.InspectOptions{})
		}
	}
	switch {
	case cerrdefs.IsNotFound(err):
		return n, false, nil
	case err != nil:
		return n, false, r.wrap(op, name, err)
	}
	return n, true, nil
}

// subnets returns the IPv4 subnets of an IPAM configuration.
func subnets(ipam network.IPAM) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range ipam.Config {
		if p, err := netip.ParsePrefix(c.Subnet); err == nil && p.Addr().Is4() {
			out = append(out, p.Masked())
		}
	}
	return out
}

// local reports whether the daemon shares this host's network (a unix
// socket, or TCP to a loopback address), so that the host's routes are
// its routes too.
func (r *Runtime) local() bool {
	u, err := url.Parse(r.endpoint)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "unix", "npipe":
		return true
	case "tcp", "http", "https":
		host := u.Hostname()
		if host == "localhost" {
			return true
		}
		ip := net.ParseIP(host)
		return ip != nil && ip.IsLoopback()
	}
	return false
}
