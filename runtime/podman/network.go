package podman

import (
	"context"
	"errors"
	"maps"
	"net/http"

	"github.com/roboco/sandboxer/runtime"
)

// networkCreate is the body of POST /networks/create (the fields of
// libpod's network type that the adapter sets) and the part of its answer
// that it reads.
type networkCreate struct {
	Name   string            `json:"name"`
	ID     string            `json:"id,omitempty"`
	Driver string            `json:"driver"`
	Labels map[string]string `json:"labels,omitempty"`
}

// CreateNetwork creates a bridge network (with a subnet the service picks
// and name resolution between its containers). A name that is already
// taken is runtime.ErrAlreadyExists.
func (r *Runtime) CreateNetwork(ctx context.Context, spec runtime.NetworkSpec) (runtime.Network, error) {
	const op = runtime.OpCreateNetwork
	conn, svc, err := r.connect(ctx, op, spec.Name)
	if err != nil {
		return runtime.Network{}, err
	}
	if spec.Name == "" {
		return runtime.Network{}, runtime.NewError(Name, op, spec.Name, nil, errors.New("no network name given"))
	}
	var out networkCreate
	err = call(ctx, conn, svc, request{
		method: http.MethodPost,
		path:   "/networks/create",
		body:   networkCreate{Name: spec.Name, Driver: "bridge", Labels: maps.Clone(spec.Labels)},
	}, &out)
	if err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, err)
	}
	return runtime.Network{ID: out.ID, Name: out.Name}, nil
}

// RemoveNetwork deletes a network; an absent network is not an error. A
// network that containers still use is not removed (an error).
func (r *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	const op = runtime.OpRemoveNetwork
	conn, svc, err := r.connect(ctx, op, name)
	if err != nil {
		return err
	}
	err = call(ctx, conn, svc, request{method: http.MethodDelete, path: "/networks/%s", pathValues: []string{name}}, nil)
	if err != nil {
		if errors.Is(kindOf(op, err), runtime.ErrNotFound) {
			return nil
		}
		return r.wrap(op, name, err)
	}
	return nil
}
