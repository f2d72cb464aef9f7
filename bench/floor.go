package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/runtime"
)

// Floor is the runtime's own API, with none of sandboxer's lifecycle code:
// what baselines are measured with. It runs a container as a sandbox's
// run spec describes it and reports where a client reaches it.
type Floor interface {
	// Describe names the floor for the report ("Docker Engine API").
	Describe() string
	// Run creates and starts spec's container and returns its ID and
	// where a client dials it: in host mode 127.0.0.1 and the host port
	// of spec.Ports[0]; in network mode (no Ports, spec.Network set) the
	// container's address on spec.Network, with Port 0 (the client dials
	// the service's own port there).
	Run(ctx context.Context, spec runtime.RunSpec) (id string, at engines.Endpoint, err error)
	// Remove force-removes a container with its anonymous volumes.
	Remove(ctx context.Context, id string) error
	// ImageExists reports whether ref is present.
	ImageExists(ctx context.Context, ref string) (bool, error)
	// List counts the containers whose labels match selector.
	List(ctx context.Context, selector map[string]string) (int, error)
	// Close releases the floor's connections.
	Close() error
}

// AdapterFloor is a Floor on sandboxer's own adapter, for runtimes that
// have no separate client in the driver: it measures the adapter's verbs
// directly, without the provisioner. Its Close does not close the runtime.
type AdapterFloor struct {
	RT runtime.ContainerRuntime
}

// Describe names the floor.
func (f AdapterFloor) Describe() string {
	return "sandboxer's " + f.RT.Name() + " adapter verbs (no provisioner)"
}

// Run runs spec through the adapter. Like the provisioner, it asks
// Inspect only when Run's result lacks the port or the address.
func (f AdapterFloor) Run(ctx context.Context, spec runtime.RunSpec) (string, engines.Endpoint, error) {
	c, err := f.RT.Run(ctx, spec)
	if err != nil {
		return "", engines.Endpoint{}, err
	}
	id := c.ID
	if len(spec.Ports) == 0 {
		if spec.Network == "" {
			return id, engines.Endpoint{}, nil
		}
		if c.Networks[spec.Network] == "" {
			if c, err = f.RT.Inspect(ctx, id); err != nil {
				return id, engines.Endpoint{}, err
			}
		}
		if ip := c.Networks[spec.Network]; ip != "" {
			return id, engines.Endpoint{Host: ip}, nil
		}
		return id, engines.Endpoint{}, fmt.Errorf("no address reported on network %q", spec.Network)
	}
	if len(c.Ports) == 0 {
		if c, err = f.RT.Inspect(ctx, id); err != nil {
			return id, engines.Endpoint{}, err
		}
	}
	if len(c.Ports) == 0 {
		return id, engines.Endpoint{}, errors.New("no published port reported")
	}
	return id, engines.Endpoint{Host: runtime.DefaultHostIP, Port: c.Ports[0].HostPort}, nil
}

// Remove removes through the adapter.
func (f AdapterFloor) Remove(ctx context.Context, id string) error { return f.RT.Remove(ctx, id) }

// ImageExists asks the adapter's image store (false on a runtime without
// one: the image is not there to be asked about).
func (f AdapterFloor) ImageExists(ctx context.Context, ref string) (bool, error) {
	store, ok := runtime.As[runtime.ImageStore](f.RT)
	if !ok {
		return false, fmt.Errorf("%s has no image store: %w", f.RT.Name(), runtime.ErrUnsupported)
	}
	return store.ImageExists(ctx, ref)
}

// List lists through the adapter.
func (f AdapterFloor) List(ctx context.Context, selector map[string]string) (int, error) {
	cs, err := f.RT.List(ctx, selector)
	return len(cs), err
}

// Close does nothing: the runtime belongs to the caller.
func (AdapterFloor) Close() error { return nil }
