package provision

import (
	"fmt"
	"slices"
	"strings"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/runtime"
)

// Validate checks an owner id (under the default label prefix; see
// Options.ValidateOwnerID) and a service list against reg and returns the
// engines in registry order. Errors match ErrInvalid, name the offending
// value and list the valid services.
func Validate(reg *engines.Registry, ownerID string, services []string) ([]engines.Engine, error) {
	if err := (Options{Registry: reg}).ValidateOwnerID(ownerID); err != nil {
		return nil, err
	}
	return ValidateServices(reg, services)
}

// ValidateServices checks a service list against reg on its own (no
// owner, no runtime): at least one service, each known and listed once. It
// returns the engines in registry order. Errors match ErrInvalid, name the
// offending value and list the valid services; an unknown service also
// matches engines.ErrNotLinked and names the import that would link it.
func ValidateServices(reg *engines.Registry, services []string) ([]engines.Engine, error) {
	if reg == nil {
		reg = engines.Default
	}
	valid := "valid services: " + strings.Join(reg.Names(), ", ")
	if len(services) == 0 {
		return nil, invalid("services", "", "no service asked for; "+valid)
	}
	seen := make(map[string]bool, len(services))
	out := make([]engines.Engine, 0, len(services))
	for _, s := range services {
		e, ok := reg.Lookup(s)
		if !ok {
			// Not a typo only: an engine this program does not import.
			return nil, &ValidationError{Field: "service", Value: s, Reason: "unknown service; " + valid + " (" + engines.LinkHint(s) + ")", Err: engines.ErrNotLinked}
		}
		if seen[s] {
			return nil, invalid("service", s, "listed twice; "+valid)
		}
		seen[s] = true
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b engines.Engine) int {
		return reg.Index(a.Spec().Name) - reg.Index(b.Spec().Name)
	})
	return out, nil
}

// ValidateOwnerID checks an owner id under these options' label prefix and
// registry: every sandbox name derived from it (ContainerName, for every
// engine, whichever services a call asks for, so that an id is valid or not
// once and for all) must be a container name that every supported runtime
// accepts (runtime.ValidateName: containerd's identifier rule and a
// Kubernetes pod name's together, so no upper case and no '_'). So an id
// one runtime would refuse is refused before anything is pulled or any
// runtime contacted, on every runtime. The error matches ErrInvalid and says the
// rule, with the longest id the prefix allows (MaxOwnerIDLength).
func (o Options) ValidateOwnerID(id string) error {
	o = o.withDefaults()
	rule := fmt.Sprintf("want 1..%d lower-case letters and digits, with single '.' or '-' between them (not first, last or twice in a row)", o.MaxOwnerIDLength())
	for _, e := range o.Registry.All() {
		name := ContainerName(o.LabelPrefix, e.Spec().Short, id)
		if err := runtime.ValidateName(name); err != nil {
			return &ValidationError{Field: "owner id", Value: id, Reason: rule + fmt.Sprintf(": sandbox name %q breaks the container name rule every runtime accepts", name), Err: err}
		}
	}
	return nil
}

// MaxOwnerIDLength is the longest owner id these options accept: what the
// longest sandbox name (the prefix and the engine with the longest short
// name) leaves of runtime.MaxNameLength. With the default prefix "roboco"
// and the longest short name "redis" or "mongo" ("roboco-sandbox-redis-"),
// 55 characters.
func (o Options) MaxOwnerIDLength() int {
	o = o.withDefaults()
	longest := 0
	for _, e := range o.Registry.All() {
		longest = max(longest, len(ContainerName(o.LabelPrefix, e.Spec().Short, "")))
	}
	return runtime.MaxNameLength - longest
}

// ParseServices splits a comma- or space-separated service list
// ("postgres,redis"), dropping empty items. It does not validate.
func ParseServices(list string) []string {
	return strings.FieldsFunc(list, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n'
	})
}
