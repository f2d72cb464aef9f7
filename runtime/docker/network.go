package docker

import (
	"context"
	"maps"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"

	"github.com/roboco/sandboxer/runtime"
)

// CreateNetwork creates a bridge network with spec's labels. A name that is
// already taken is runtime.ErrAlreadyExists (the client asks pre-1.44
// daemons, which would otherwise accept duplicate names, to check).
func (r *Runtime) CreateNetwork(ctx context.Context, spec runtime.NetworkSpec) (runtime.Network, error) {
	if err := r.negotiate(ctx, runtime.OpCreateNetwork, spec.Name); err != nil {
		return runtime.Network{}, err
	}
	resp, err := r.cli.NetworkCreate(ctx, spec.Name, network.CreateOptions{
		Driver: "bridge",
		Labels: maps.Clone(spec.Labels),
	})
	if err != nil {
		return runtime.Network{}, r.wrap(runtime.OpCreateNetwork, spec.Name, err)
	}
	return runtime.Network{ID: resp.ID, Name: spec.Name}, nil
}

// RemoveNetwork deletes a network by name or ID; an absent network is not
// an error.
func (r *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	if err := r.negotiate(ctx, runtime.OpRemoveNetwork, name); err != nil {
		return err
	}
	if err := r.cli.NetworkRemove(ctx, name); err != nil && !cerrdefs.IsNotFound(err) {
		return r.wrap(runtime.OpRemoveNetwork, name, err)
	}
	return nil
}

// ListNetworks is not implemented yet (issue 25).
func (r *Runtime) ListNetworks(ctx context.Context, selector map[string]string) ([]runtime.Network, error) {
	return nil, r.wrap(runtime.OpListNetworks, "", runtime.ErrUnsupported)
}
