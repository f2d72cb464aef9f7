package engines

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// ModulePath is the import path prefix of sandboxer's packages: an engine's
// package is ModulePath + "/engines/" + its name.
const ModulePath = "github.com/roboco/sandboxer"

// AllImport is the package that links every engine.
const AllImport = ModulePath + "/engines/all"

// Import is the import path of the package of the engine called name.
func Import(name string) string { return ModulePath + "/engines/" + name }

// Default is the registry of the engines this program links: each engine's
// package adds itself from its init (Register), so that a program links,
// and its users can ask for, exactly the engines it imports.
var Default = &Registry{byName: map[string]Engine{}}

// Register adds e to Default, as database/sql.Register does a driver: each
// engine's package calls it from its init. It panics when e is not a valid
// engine or its name, short name or Order is taken (a programming error,
// as in database/sql).
func Register(e Engine) {
	if err := Default.Register(e); err != nil {
		panic(err)
	}
}

// ErrNotLinked: a service was asked for that no engine of the registry
// serves. It is either not one of sandboxer's engines, or its package is
// not linked into this program; the message names the import that links
// it.
var ErrNotLinked = errors.New("no engine of that name is linked into this program")

// NotLinked is the error for a service name no engine of r serves: it
// matches ErrNotLinked, names the import that would link an engine of
// that name, and lists the engines r has. Callers prefix what they were
// doing.
func (r *Registry) NotLinked(name string) error {
	return fmt.Errorf("unknown engine %q: %w (%s; this program links %s)", name, ErrNotLinked, LinkHint(name), strings.Join(r.Names(), ", "))
}

// LinkHint says which import links the engine called name, for a message
// about a service no engine of a program serves.
func LinkHint(name string) string {
	return fmt.Sprintf("if it is one of sandboxer's engines, add import _ %q, or _ %q for every engine", Import(name), AllImport)
}

// Registry maps service names to engines, in report order (Spec.Order).
// That order is the order sandboxes, containers and env are reported in,
// whatever order a caller listed its services or registered its engines
// in. A Registry is not safe for concurrent Register calls; build it
// before use (Default is built by the engines' inits).
type Registry struct {
	engines []Engine
	byName  map[string]Engine
}

// NewRegistry returns a registry holding engines, in report order.
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

// Register adds e at its place in report order (Spec.Order). The name and
// the short name must be unique, lower-case letters and digits; the order
// positive and unique; the image, port and ready timeout set.
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
	case s.Order <= 0:
		return fmt.Errorf("engines: register %s: order %d is not positive", s.Name, s.Order)
	}
	for _, o := range r.engines {
		os := o.Spec()
		if os.Name == s.Name {
			return fmt.Errorf("engines: register %s: name already registered", s.Name)
		}
		if os.Short == s.Short {
			return fmt.Errorf("engines: register %s: short name %q already used by %s", s.Name, s.Short, os.Name)
		}
		if os.Order == s.Order {
			return fmt.Errorf("engines: register %s: order %d already used by %s", s.Name, s.Order, os.Name)
		}
	}
	i, _ := slices.BinarySearchFunc(r.engines, s.Order, func(o Engine, order int) int { return o.Spec().Order - order })
	r.engines = slices.Insert(r.engines, i, e)
	r.byName[s.Name] = e
	return nil
}

// Lookup returns the engine registered under name.
func (r *Registry) Lookup(name string) (Engine, bool) {
	e, ok := r.byName[name]
	return e, ok
}

// Names lists the registered service names in report order.
func (r *Registry) Names() []string {
	names := make([]string, len(r.engines))
	for i, e := range r.engines {
		names[i] = e.Spec().Name
	}
	return names
}

// All lists the registered engines in report order.
func (r *Registry) All() []Engine {
	return slices.Clone(r.engines)
}

// Index is the position of name in report order, or -1.
func (r *Registry) Index(name string) int {
	for i, e := range r.engines {
		if e.Spec().Name == name {
			return i
		}
	}
	return -1
}
