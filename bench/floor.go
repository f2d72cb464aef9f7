package bench

import (
	"context"
	"errors"

	"github.com/roboco/sandboxer/runtime"
)

// Floor is the runtime's own API, with none of sandboxer's lifecycle code:
// what baselines are measured with. It runs a container as a sandbox's
// run spec describes it and reports the host port of its one published
// port.
type Floor interface {
	// Describe names the floor for the report ("Docker Engine API").
	Describe() string
	// Run creates and starts spec's container and returns its ID and the
	// host port of spec.Ports[0] (0 when nothing is published).
	Run(ctx context.Context, spec runtime.RunSpec) (id string, hostPort int, err error)
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

// Run runs spec through the adapter.
func (f AdapterFloor) Run(ctx context.Context, spec runtime.RunSpec) (string, int, error) {
	c, err := f.RT.Run(ctx, spec)
	if err != nil {
		return "", 0, err
	}
	if len(spec.Ports) == 0 {
		return c.ID, 0, nil
	}
	if len(c.Ports) == 0 {
		if c, err = f.RT.Inspect(ctx, c.ID); err != nil {
			return c.ID, 0, err
		}
	}
	if len(c.Ports) == 0 {
		return c.ID, 0, errors.New("no published port reported")
	}
	return c.ID, c.Ports[0].HostPort, nil
}

// Remove removes through the adapter.
func (f AdapterFloor) Remove(ctx context.Context, id string) error { return f.RT.Remove(ctx, id) }

// ImageExists asks the adapter.
func (f AdapterFloor) ImageExists(ctx context.Context, ref string) (bool, error) {
	return f.RT.ImageExists(ctx, ref)
}

// List lists through the adapter.
func (f AdapterFloor) List(ctx context.Context, selector map[string]string) (int, error) {
	cs, err := f.RT.List(ctx, selector)
	return len(cs), err
}

// Close does nothing: the runtime belongs to the caller.
func (AdapterFloor) Close() error { return nil }
