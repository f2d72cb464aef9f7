package containerd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/roboco/sandboxer/runtime"
)

// wrap is the one place where an error of the containerd client (or of the
// adapter's own plumbing) becomes a *runtime.Error naming the runtime, the
// verb and the object, with a kind from kindOf. An error that already is a
// containerd *runtime.Error is returned unchanged; nil stays nil.
func (r *Runtime) wrap(op, object string, err error) error {
	if err == nil {
		return nil
	}
	var re *runtime.Error
	if errors.As(err, &re) && re.Runtime == Name {
		return err
	}
	kind := kindOf(op, err)
	if errors.Is(kind, runtime.ErrUnavailable) && !strings.Contains(err.Error(), r.address) {
		err = fmt.Errorf("containerd at %s: %w", r.address, err)
	}
	return runtime.NewError(Name, op, object, kind, err)
}

// fail builds a *runtime.Error of the given kind for the adapter's own
// checks.
func fail(op, object string, kind error, format string, args ...any) error {
	var cause error
	if format != "" {
		cause = fmt.Errorf(format, args...)
	}
	return runtime.NewError(Name, op, object, kind, cause)
}

// kinded is an error of the adapter's own plumbing that already knows its
// kind (wrap keeps it).
type kinded struct {
	kind error
	err  error
}

func (k kinded) Error() string   { return k.err.Error() }
func (k kinded) Unwrap() []error { return []error{k.kind, k.err} }

// withKind is an error of the given kind for wrap to classify.
func withKind(kind error, format string, args ...any) error {
	return kinded{kind: kind, err: fmt.Errorf(format, args...)}
}

// kindOf classifies err: by the kind it already carries, else with
// containerd's errdefs (the client turns every gRPC status into one), never
// by parsing messages.
func kindOf(op string, err error) error {
	var k kinded
	if errors.As(err, &k) {
		return k.kind
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The caller gave up; that says nothing about the daemon.
		return nil
	case cerrdefs.IsUnavailable(err):
		return runtime.ErrUnavailable
	case op == runtime.OpPull:
		// Unknown repository or tag, registry unreachable or refusing: the
		// image cannot be had.
		return runtime.ErrImageNotFound
	case cerrdefs.IsNotFound(err):
		return runtime.ErrNotFound
	case cerrdefs.IsAlreadyExists(err):
		// "Already exists" means "name taken" only for verbs that create.
		if op == runtime.OpRun || op == runtime.OpCreate || op == runtime.OpCreateNetwork {
			return runtime.ErrAlreadyExists
		}
		return nil
	case cerrdefs.IsNotImplemented(err):
		return runtime.ErrUnsupported
	default:
		return nil
	}
}
