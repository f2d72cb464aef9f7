package runtime

import (
	"fmt"
	"regexp"
)

// MaxNameLength is the longest container name every supported runtime
// takes: containerd's identifiers stop at 76 characters (Docker and Podman
// have no limit of their own that is shorter, a Kubernetes pod name 253).
const MaxNameLength = 76

// NameRule says which container names ValidateName accepts, for messages.
const NameRule = "lower-case letters and digits, with single '.' or '-' between them (not first, last or twice in a row), at most 76 characters (the strictest rule of the supported runtimes: containerd's identifiers and Kubernetes' pod names together)"

// nameRE is what every supported runtime accepts as a container name:
// containerd's identifier pattern (pkg/identifiers:
// [A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*, which refuses "a..b" and "a-" that
// Docker and Podman take) intersected with a Kubernetes pod name's (a
// DNS-1123 subdomain: lower case, no '_').
var nameRE = regexp.MustCompile(`^[a-z0-9]+(?:[.-][a-z0-9]+)*$`)

// ValidateName reports whether name is a container name that every
// supported runtime accepts (NameRule), so that a name one backend would
// refuse is refused before anything is pulled or started, on every backend.
// The error matches ErrInvalid.
func ValidateName(name string) error {
	switch {
	case len(name) > MaxNameLength:
		return fmt.Errorf("%w: container name %q is %d characters long: %s", ErrInvalid, name, len(name), NameRule)
	case !nameRE.MatchString(name):
		return fmt.Errorf("%w: container name %q: %s", ErrInvalid, name, NameRule)
	}
	return nil
}
