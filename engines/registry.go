package engines

import (
	"fmt"
	"regexp"
	"slices"
)

// Default is the registry of the engines sandboxer ships. It is the only
// place that lists them.
var Default = MustRegistry(
	Postgres{},
	Redis{},
	Mongo{},
)

// Registry maps service names to engines, in registration order. That order
// is the order sandboxes, containers and env are reported in, whatever order
// a caller listed its services in. A Registry is not safe for concurrent
// Register calls; build it before use.
type Registry struct {
	engines []Engine
	byName  map[string]Engine
}

// NewRegistry returns a registry holding engines, in that order.
func NewRegistry(engines ...Engine) (*Registry, error) {
	r := &Registry{byName: map[string]Engine{}}
	for _, e := range engines {
		if err := r.Register(e); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// MustRegistry is NewRegistry for package-level registries: it panics on an
// invalid engine.
func MustRegistry(engines ...Engine) *Registry {
	r, err := NewRegistry(engines...)
	if err != nil {
		panic(err)
	}
	return r
}

var (
	nameRE  = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
	shortRE = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
)

// Register adds e. The name and the short name must be unique, lower-case
// letters and digits; the image, port and ready timeout must be set.
func (r *Registry) Register(e Engine) error {
	s := e.Spec()
	switch {
	case !nameRE.MatchString(s.Name):
		return fmt.Errorf("engines: register %q: name must be lower-case letters and digits", s.Name)
	case !shortRE.MatchString(s.Short):
		return fmt.Errorf("engines: register %s: short name %q must be lower-case letters and digits", s.Name, s.Short)
	case s.Image == "":
		return fmt.Errorf("engines: register %s: no default image", s.Name)
	case s.Port <= 0 || s.Port > 65535:
		return fmt.Errorf("engines: register %s: port %d out of range", s.Name, s.Port)
	case s.ReadyTimeout <= 0:
		return fmt.Errorf("engines: register %s: no ready timeout", s.Name)
	}
	for _, o := range r.engines {
		os := o.Spec()
		if os.Name == s.Name {
			return fmt.Errorf("engines: register %s: name already registered", s.Name)
		}
		if os.Short == s.Short {
			return fmt.Errorf("engines: register %s: short name %q already used by %s", s.Name, s.Short, os.Name)
		}
	}
	r.engines = append(r.engines, e)
	r.byName[s.Name] = e
	return nil
}

// Lookup returns the engine registered under name.
func (r *Registry) Lookup(name string) (Engine, bool) {
	e, ok := r.byName[name]
	return e, ok
}

// Names lists the registered service names in registration order.
func (r *Registry) Names() []string {
	names := make([]string, len(r.engines))
	for i, e := range r.engines {
		names[i] = e.Spec().Name
	}
	return names
}

// All lists the registered engines in registration order.
func (r *Registry) All() []Engine {
	return slices.Clone(r.engines)
}

// Index is the position of name in registration order, or -1.
func (r *Registry) Index(name string) int {
	for i, e := range r.engines {
		if e.Spec().Name == name {
			return i
		}
	}
	return -1
}
