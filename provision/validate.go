package provision

import (
	"regexp"
	"slices"
	"strings"

	"github.com/roboco/sandboxer/engines"
)

// ownerIDRE: 1..64 letters, digits, '_', '.', '-', starting with a letter or
// digit, so that every name derived from it is a valid container name.
var ownerIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Validate checks an owner id and a service list against reg and returns
// the engines in registry order. Errors match ErrInvalid, name the
// offending value and list the valid services.
func Validate(reg *engines.Registry, ownerID string, services []string) ([]engines.Engine, error) {
	if !ownerIDRE.MatchString(ownerID) {
		return nil, invalid("owner id", ownerID, "want 1..64 letters, digits, '_', '.' or '-', starting with a letter or digit")
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
			return nil, invalid("service", s, "unknown service; "+valid)
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

// ParseServices splits a comma- or space-separated service list
// ("postgres,redis"), dropping empty items. It does not validate.
func ParseServices(list string) []string {
	return strings.FieldsFunc(list, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n'
	})
}
