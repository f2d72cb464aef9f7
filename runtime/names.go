package runtime

import (
	"fmt"
	"regexp"
)

// MaxNameLength is the longest container name every supported runtime
// takes: containerd's identifiers stop at 76 characters (Docker and Podman
// have no limit of their own that is shorter).
const MaxNameLength = 76

// NameRule says which container names ValidateName accepts, for messages.
const NameRule = "letters and digits, with single '.', '_' or '-' between them (not first, last or twice in a row), at most 76 characters (containerd's identifier rule, the strictest of the supported runtimes)"

// nameRE is containerd's identifier pattern (pkg/identifiers): Docker and
// Podman accept every name it accepts ([a-zA-Z0-9][a-zA-Z0-9_.-]+), but
// also "a..b" and "a-", which containerd refuses.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$`)

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
