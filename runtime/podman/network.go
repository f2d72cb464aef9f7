package podman

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// defaultNetwork is the network libpod puts a container on when it names
// none (containers.conf's default_network, which the API does not report).
// ListNetworks never reports it unless a selector matches its labels.
const defaultNetwork = "podman"

// maxSubnetAttempts bounds how many subnets CreateNetwork tries when the
// service says that the one it picked is in use (another network made
// between the list and the create, or a host route it did not see).
const maxSubnetAttempts = 8

// The values of libpod's "isolate" network option: strict also drops
// traffic between the network and the networks without the option.
const (
	isolateStrict = "strict"
	isolateTrue   = "true"
)

// warnLooseIsolation says, once per Runtime, that the service's isolation
// does not cover its default network: before Podman 4.6 (netavark 1.7)
// "isolate" is a boolean, and "true" drops traffic only between networks
// that have it, which leaves the default network's containers and the
// network's reaching each other.
func (r *Runtime) warnLooseIsolation(ctx context.Context) {
	r.looseIsolation.Do(func() {
		r.opts.Logger.WarnContext(ctx, "podman: the service has no strict network isolation (Podman 4.6 / netavark 1.7 and later): "+
			"containers on its default network can reach sandboxes on plain networks and be reached from them, "+
			"and with netavark 1.4 plain networks reach each other whenever the last container of any isolated network has gone, until the next start", "endpoint", r.endpoint)
	})
}

// CreateNetwork creates a bridge network with spec.Labels and a /26 of
// sandboxer's pool (adapterkit.SubnetPool) that none of the service's
// networks and, for a local service, none of the host's routes overlap;
// a create the service fails because a host interface went away during its
// own subnet check is tried again, a bounded number of times. It is created with libpod's "isolate" option, "strict" where the service
// knows it (netavark drops traffic between the network and every other
// one), else "true" (only between isolated networks: a warning, once);
// spec.Internal makes
// it internal (no gateway route, no NAT, and no address of the host's on
// its bridge). A name that is already taken is
// runtime.ErrAlreadyExists.
func (r *Runtime) CreateNetwork(ctx context.Context, spec runtime.NetworkSpec) (runtime.Network, error) {
	const op = runtime.OpCreateNetwork
	if spec.Name == "" {
		return runtime.Network{}, r.wrap(op, spec.Name, adapterkit.WithKind(runtime.ErrInvalid, "no network name given"))
	}
	pool, err := adapterkit.SubnetPool(nil)
	if err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, adapterkit.WithKind(runtime.ErrInvalid, "%w", err))
	}
	c, err := r.connect(ctx, op, spec.Name)
	if err != nil {
		return runtime.Network{}, err
	}
	existing, err := c.listNetworks(ctx, nil)
	if err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, err)
	}
	var taken []netip.Prefix
	for _, n := range existing {
		if n.Name == spec.Name {
			return runtime.Network{}, r.wrap(op, spec.Name, adapterkit.WithKind(runtime.ErrAlreadyExists, "a network of that name exists"))
		}
		taken = append(taken, subnets(n)...)
	}
	if r.local() {
		taken = append(taken, adapterkit.HostRoutes()...)
	}
	isolate := isolateStrict
	if !c.svc.strictIsolation() {
		// An internal network needs no more: its containers have no
		// route to another network, so neither side's connection
		// completes (measured on Podman 4.3.1, rootful and rootless).
		if !spec.Internal {
			r.warnLooseIsolation(ctx)
		}
		isolate = isolateTrue
	}
	for attempt := 1; ; attempt++ {
		subnet, err := adapterkit.FreeSubnet(pool, spec.Name, taken)
		if err != nil {
			return runtime.Network{}, r.wrap(op, spec.Name, adapterkit.WithKind(runtime.ErrUnavailable, "%w", err))
		}
		sn := networkSubnet{Subnet: subnet.String(), Gateway: adapterkit.Gateway(subnet).String()}
		if spec.Internal {
			// No gateway: libpod then gives the bridge no address, so
			// that the host has none on the network that its containers
			// could reach.
			sn.Gateway = ""
		}
		out, err := c.createNetwork(ctx, networkCreate{
			Name:     spec.Name,
			Driver:   "bridge",
			Labels:   maps.Clone(spec.Labels),
			Internal: spec.Internal,
			Options:  map[string]string{"isolate": isolate},
			Subnets:  []networkSubnet{sn},
		})
		if err == nil {
			return toNetwork(out), nil
		}
		if isolate == isolateStrict && strictUnknown(err) {
			// A service that reads the option as a boolean after all
			// (a backport without it).
			if !spec.Internal {
				r.warnLooseIsolation(ctx)
			}
			isolate = isolateTrue
			continue
		}
		if interfaceGone(err) && attempt < maxSubnetAttempts {
			r.opts.Logger.DebugContext(ctx, "podman: a host interface went away during the subnet check, trying again", "network", spec.Name, "subnet", subnet, "error", err)
			continue
		}
		if !subnetInUse(err) || attempt == maxSubnetAttempts {
			return runtime.Network{}, r.wrap(op, spec.Name, err)
		}
		r.opts.Logger.DebugContext(ctx, "podman: subnet in use, trying another", "network", spec.Name, "subnet", subnet, "error", err)
		taken = append(taken, subnet)
	}
}

// ListNetworks returns the service's networks whose labels contain every
// pair of selector (the service filters, runtime.MatchLabels checks again),
// but never the service's default network unless the selector matches it.
func (r *Runtime) ListNetworks(ctx context.Context, selector map[string]string) ([]runtime.Network, error) {
	const op = runtime.OpListNetworks
	obj := adapterkit.SelectorString(selector)
	c, err := r.connect(ctx, op, obj)
	if err != nil {
		return nil, err
	}
	listed, err := c.listNetworks(ctx, labelFilters(selector))
	if err != nil {
		return nil, r.wrap(op, obj, err)
	}
	out := make([]runtime.Network, 0, len(listed))
	for _, n := range listed {
		if !runtime.MatchLabels(n.Labels, selector) || (n.Name == defaultNetwork && len(selector) == 0) {
			continue
		}
		out = append(out, toNetwork(n))
	}
	return out, nil
}

// RemoveNetwork deletes a network; an absent network is not an error. A
// network that a container still uses is left as it is:
// runtime.ErrInUse.
func (r *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	const op = runtime.OpRemoveNetwork
	c, err := r.connect(ctx, op, name)
	if err != nil {
		return err
	}
	if err := c.removeNetwork(ctx, name); err != nil {
		if errors.Is(kindOf(op, err), runtime.ErrNotFound) {
			return nil
		}
		return r.wrap(op, name, err)
	}
	return nil
}

// checkNetwork refuses, before anything is made, a spec that publishes
// ports of a container on an internal network (runtime.ErrInvalid). A
// network that does not exist is left to the create to report.
func (r *Runtime) checkNetwork(ctx context.Context, c *client, op, obj string, spec runtime.RunSpec) error {
	if spec.Network == "" || len(spec.Ports) == 0 {
		return nil
	}
	n, err := c.inspectNetwork(ctx, spec.Network)
	if err != nil {
		if errors.Is(kindOf(op, err), runtime.ErrNotFound) {
			return nil
		}
		return r.wrap(op, obj, err)
	}
	if n.Internal {
		return r.wrap(op, obj, adapterkit.WithKind(runtime.ErrInvalid,
			"network %q is internal: a container on it publishes no ports", spec.Network))
	}
	return nil
}

// toNetwork is the port's view of a libpod network: its first IPv4
// subnet.
func toNetwork(n networkReport) runtime.Network {
	out := runtime.Network{ID: n.ID, Name: n.Name, Labels: maps.Clone(n.Labels), Internal: n.Internal}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for _, p := range subnets(n) {
		if p.Addr().Is4() {
			out.Subnet = p
			break
		}
	}
	return out
}

// subnets are the parseable subnets of n.
func subnets(n networkReport) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range n.Subnets {
		if p, err := netip.ParsePrefix(s.Subnet); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// labelFilters are the service's label filters for selector: the pairs it
// reads as they are (it trims and globs; the others are left to
// runtime.MatchLabels).
func labelFilters(selector map[string]string) []string {
	var labels []string
	for _, k := range slices.Sorted(maps.Keys(selector)) {
		v := selector[k]
		if v == "" || strings.TrimSpace(v) != v || strings.ContainsAny(k+v, "*?[") {
			continue
		}
		labels = append(labels, k+"="+v)
	}
	return labels
}

// local reports whether the service runs on this host (a unix socket), so
// that the host's routes are its routes too.
func (r *Runtime) local() bool { return strings.HasPrefix(r.endpoint, "unix:") }
