package podman

import (
	"context"
	"errors"
	"maps"

	"github.com/roboco/sandboxer/runtime"
)

// CreateNetwork creates a bridge network (with a subnet the service picks
// and name resolution between its containers). A name that is already
// taken is runtime.ErrAlreadyExists.
func (r *Runtime) CreateNetwork(ctx context.Context, spec runtime.NetworkSpec) (runtime.Network, error) {
	const op = runtime.OpCreateNetwork
	c, err := r.connect(ctx, op, spec.Name)
	if err != nil {
		return runtime.Network{}, err
	}
	if spec.Name == "" {
		return runtime.Network{}, runtime.NewError(Name, op, spec.Name, nil, errors.New("no network name given"))
	}
	out, err := c.createNetwork(ctx, networkCreate{Name: spec.Name, Driver: "bridge", Labels: maps.Clone(spec.Labels)})
	if err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, err)
	}
	return runtime.Network{ID: out.ID, Name: out.Name}, nil
}

// RemoveNetwork deletes a network; an absent network is not an error. A
// network that containers still use is not removed (an error).
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

// ListNetworks is not implemented yet (issue 25).
func (r *Runtime) ListNetworks(ctx context.Context, selector map[string]string) ([]runtime.Network, error) {
	return nil, r.wrap(runtime.OpListNetworks, "", runtime.ErrUnsupported)
}
