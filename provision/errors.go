package provision

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/roboco/sandboxer/runtime"
)

var (
	// ErrInvalid is the kind of every input error (bad owner id, unknown
	// or duplicate service, bad option). Nothing is created when it is
	// returned.
	ErrInvalid = errors.New("invalid input")
	// ErrNotReady: a sandbox did not pass its readiness probe before its
	// deadline, or exited while being probed.
	ErrNotReady = errors.New("not ready")
	// ErrConflict: a same-named sandbox of this owner is younger than the
	// pre-clear grace (another provision may be in flight), or the name
	// was taken while this one ran. It also matches
	// runtime.ErrAlreadyExists.
	ErrConflict = fmt.Errorf("sandbox conflict: %w", runtime.ErrAlreadyExists)
)

// ValidationError is an input error. It names the offending value and,
// for services, lists the valid ones.
type ValidationError struct {
	// Field is what was wrong: "owner id", "services", "service", ...
	Field string
	// Value is the offending value.
	Value string
	// Reason says what is wrong with it.
	Reason string
	// Err is the error of the rule that failed when another package owns
	// it (labels.ErrInvalidPrefix), or nil.
	Err error
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("provision: invalid %s %q: %s", e.Field, e.Value, e.Reason)
}

// Is makes a ValidationError match ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns Err, so that errors.Is also sees the failed rule's kind.
func (e *ValidationError) Unwrap() error { return e.Err }

func invalid(field, value, reason string) *ValidationError {
	return &ValidationError{Field: field, Value: value, Reason: reason}
}

// Error is the one error Provision returns when a service fails, after
// every sandbox the call had started has been torn down. Use errors.As to
// read it; errors.Is sees the cause (ErrNotReady, ErrConflict,
// runtime.ErrImageNotFound, ...). No password ever appears in it.
type Error struct {
	// Owner is the owner container's name.
	Owner string
	// Service is the engine that failed.
	Service string
	// Container is the sandbox's container name.
	Container string
	// Image is the image ref the service ran (or tried to).
	Image string
	// Stage is where it failed: "pull", "pre-clear", "run", "probe" or
	// "publish".
	Stage string
	// Err is the cause, with passwords redacted from its message.
	Err error
	// ProbeOutput is the last probe attempt's output (stdout, then stderr),
	// passwords redacted, trimmed to a few KiB.
	ProbeOutput string
	// Elapsed is how long the service had been at it.
	Elapsed time.Duration
	// Rollback is the error of tearing down the call's other sandboxes
	// (nil when the rollback was clean).
	Rollback error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "provision %s: %s (%s): %s: %v", e.Owner, e.Service, e.Container, e.Stage, e.Err)
	if e.ProbeOutput != "" {
		fmt.Fprintf(&b, "; last probe output: %s", oneLine(e.ProbeOutput))
	}
	if e.Rollback != nil {
		fmt.Fprintf(&b, "; rollback: %v", e.Rollback)
	}
	return b.String()
}

// Unwrap exposes the cause.
func (e *Error) Unwrap() error { return e.Err }

// redactor removes a call's passwords from text.
type redactor []string

const redacted = "[REDACTED]"

func (r redactor) String(s string) string {
	for _, pw := range r {
		if pw != "" {
			s = strings.ReplaceAll(s, pw, redacted)
		}
	}
	return s
}

// Error returns err with passwords redacted from its message; errors.Is and
// errors.As still see the original chain.
func (r redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	return runtime.Reworded(err, r.String(err.Error()))
}

// oneLine joins the non-blank lines of s with " | ", so that an error
// stays one line.
func oneLine(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " | ")
}
