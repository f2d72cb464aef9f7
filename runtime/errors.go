package runtime

import (
	"errors"
	"fmt"
)

// Error kinds. Adapters wrap every error they return in an *Error whose Kind
// is one of these (or nil for an unclassified failure), so callers classify
// with errors.Is and never parse messages.
var (
	// ErrNotFound: the container (or network) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: the name is already taken.
	ErrAlreadyExists = errors.New("already exists")
	// ErrUnavailable: the runtime did not answer (socket absent, daemon
	// down, connection refused).
	ErrUnavailable = errors.New("runtime unavailable")
	// ErrImageNotFound: the image is neither present nor pullable.
	ErrImageNotFound = errors.New("image not found")
	// ErrUnsupported: the backend cannot honour a requested setting (a
	// limit is never silently dropped).
	ErrUnsupported = errors.New("unsupported")
	// ErrUnenforceableLimits: the backend cannot enforce the memory, CPU
	// or pids limits asked for (rootless Podman on cgroup v1), and refused
	// the container rather than run it unbounded. It is an ErrUnsupported
	// (errors.Is matches both); the one an explicit opt-out
	// (podman.WithUnenforcedLimits) turns into a warning.
	ErrUnenforceableLimits = fmt.Errorf("%w: limits cannot be enforced", ErrUnsupported)
	// ErrInvalid: the request itself breaks a rule of the port (a run spec
	// without an image, a negative limit, a port out of range; see
	// RunSpec.Normalize): no backend would accept it, and nothing was made.
	ErrInvalid = errors.New("invalid spec")
	// ErrInUse: the object is still used and was left as it was (a
	// network that a container is still on).
	ErrInUse = errors.New("in use")
)

// Error is the error every adapter returns: it names the runtime, the verb
// and the object, and carries a kind for errors.Is.
type Error struct {
	Runtime string // "docker"
	Op      string // "run", "pull", "inspect", ...
	Object  string // container name/ID, image ref or network name
	Kind    error  // one of the Err* kinds, or nil
	Err     error  // the underlying cause, or nil
}

// NewError builds an *Error. cause may be nil, in which case the kind is the
// message.
func NewError(runtime, op, object string, kind, cause error) *Error {
	return &Error{Runtime: runtime, Op: op, Object: object, Kind: kind, Err: cause}
}

// Error renders "docker: run roboco-sandbox-pg-a42: image not found: <cause>".
func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %s", e.Runtime, e.Op)
	if e.Object != "" {
		msg += " " + e.Object
	}
	switch {
	case e.Kind != nil && e.Err != nil:
		return fmt.Sprintf("%s: %v: %v", msg, e.Kind, e.Err)
	case e.Kind != nil:
		return fmt.Sprintf("%s: %v", msg, e.Kind)
	case e.Err != nil:
		return fmt.Sprintf("%s: %v", msg, e.Err)
	default:
		return msg + ": failed"
	}
}

// Unwrap exposes both the kind and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// Verbs as every adapter's errors name them ("docker: run <name>: ..."),
// so that messages read the same whatever the backend.
const (
	OpConnect       = "connect"
	OpVersion       = "version"
	OpImageExists   = "inspect image"
	OpPull          = "pull"
	OpImageID       = "inspect image id"
	OpImageConfig   = "inspect image config"
	OpSaveImage     = "save image"
	OpLoadImage     = "load image"
	OpRemoveImage   = "remove image"
	OpRun           = "run"
	OpCreate        = "create"
	OpInspect       = "inspect"
	OpExec          = "exec"
	OpStop          = "stop"
	OpKill          = "kill"
	OpRemove        = "remove"
	OpList          = "list"
	OpSnapshot      = "snapshot"
	OpCreateNetwork = "create network"
	OpRemoveNetwork = "remove network"
	OpListNetworks  = "list networks"
	OpAdopt         = "adopt"
)
