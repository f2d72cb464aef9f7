package adapterkit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/roboco/sandboxer/runtime"
)

// Translator is the scaffolding of an adapter's translation point, where
// an error of its backend becomes a *runtime.Error naming the runtime, the
// verb and the object, with a kind. The adapter supplies the two decisions
// that are its backend's own (Unreachable, Classify) in its errors.go; the
// rules that read the same on every backend are applied here, in Kind.
type Translator struct {
	// Runtime is the adapter's name, e.g. "docker".
	Runtime string
	// Endpoint is the address the adapter talks to; an ErrUnavailable
	// error always names it. Its credentials (runtime.EndpointSecrets) are
	// redacted from every error Translate returns, object and cause.
	Endpoint string
	// Unreachable reports whether err means that the backend could not
	// be reached at all (socket absent, connection refused, daemon down).
	Unreachable func(err error) bool
	// Classify gives the kind of any other error of verb op, or nil for
	// an error that has none.
	Classify func(op string, err error) error
	// Cause, when set, rewrites the cause that the *runtime.Error keeps,
	// once it is classified (e.g. to name the HTTP status in the message).
	Cause func(err error) error
}

// Translate turns err, returned by the backend for verb op on object, into
// a *runtime.Error with the kind Kind gives. An error that already is a
// *runtime.Error of this runtime is returned unchanged; nil stays nil. The
// cause stays reachable through errors.Is and errors.As.
func (t Translator) Translate(op, object string, err error) error {
	if err == nil {
		return nil
	}
	var re *runtime.Error
	if errors.As(err, &re) && re.Runtime == t.Runtime {
		return err
	}
	kind := t.Kind(op, err)
	if t.Cause != nil {
		err = t.Cause(err)
	}
	if errors.Is(kind, runtime.ErrUnavailable) {
		err = AtEndpoint(t.Endpoint, err)
	}
	object = runtime.RedactEndpoint(t.Endpoint, object)
	return runtime.NewError(t.Runtime, op, object, kind, runtime.RedactEndpointError(t.Endpoint, err))
}

// Fail builds the *runtime.Error of an adapter's connection plumbing that
// runs before its Runtime exists (New, the parsing of its options)
// talking to endpoint, with endpoint's credentials redacted from object
// and cause, as Translate does. Once a Runtime exists, its methods use its
// wrap (Translate) instead: see the package doc.
func Fail(rt, endpoint, op, object string, kind, cause error) error {
	return runtime.NewError(rt, op, runtime.RedactEndpoint(endpoint, object), kind, runtime.RedactEndpointError(endpoint, cause))
}

// ConnectError is an adapter's error for an endpoint it cannot use
// (unparsable, refused by the client library): runtime.ErrUnavailable,
// naming the endpoint with its credentials redacted.
func ConnectError(rt, endpoint string, cause error) error {
	return Fail(rt, endpoint, runtime.OpConnect, endpoint, runtime.ErrUnavailable, cause)
}

// Kind classifies err, returned for verb op, by the rules every backend
// shares, in this order:
//   - an error that the adapter made with WithKind has that kind;
//   - a caller that gave up (context canceled or deadline exceeded) says
//     nothing about the backend: no kind;
//   - a backend that cannot be reached is runtime.ErrUnavailable;
//   - any other failure of a pull (unknown repository or tag, registry
//     unreachable or refusing, an error inside the progress stream) means
//     the image cannot be had: runtime.ErrImageNotFound;
//   - anything else is the backend's to classify (Classify).
func (t Translator) Kind(op string, err error) error {
	var k kinded
	switch {
	case errors.As(err, &k):
		return k.kind
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil
	case t.Unreachable != nil && t.Unreachable(err):
		return runtime.ErrUnavailable
	case op == runtime.OpPull:
		return runtime.ErrImageNotFound
	case t.Classify != nil:
		return t.Classify(op, err)
	default:
		return nil
	}
}

// CreatesNamed reports whether verb op makes something under a name the
// caller chose (a container or a network), so that a conflict it meets is
// that name being taken (runtime.ErrAlreadyExists). For other verbs a
// conflict is a state conflict (exec in a stopped container, kill of a
// container that is not running), which has no kind of its own.
func CreatesNamed(op string) bool {
	return CreatesContainer(op) || op == runtime.OpCreateNetwork
}

// CreatesContainer reports whether verb op creates a container (Run or
// Create), the verbs for which a missing image is runtime.ErrImageNotFound
// rather than runtime.ErrNotFound.
func CreatesContainer(op string) bool {
	return op == runtime.OpRun || op == runtime.OpCreate
}

// AtEndpoint makes sure err names endpoint (backends' connection errors
// do not always), so that "runtime unavailable" says where it looked, and
// that it names it with its credentials redacted (runtime.ShowEndpoint).
func AtEndpoint(endpoint string, err error) error {
	err = runtime.RedactEndpointError(endpoint, err)
	shown := runtime.ShowEndpoint(endpoint)
	if endpoint == "" || strings.Contains(err.Error(), shown) {
		return err
	}
	return fmt.Errorf("endpoint %s: %w", shown, err)
}

// kinded is an error of an adapter's own plumbing that already knows its
// kind, or knows that it has none (kind nil); Kind keeps it.
type kinded struct {
	kind error
	err  error
}

func (k kinded) Error() string { return k.err.Error() }

func (k kinded) Unwrap() []error {
	if k.kind == nil {
		return []error{k.err}
	}
	return []error{k.kind, k.err}
}

// WithKind is an error of the given kind (one of the runtime.Err* kinds)
// for an adapter's own checks, which its translation point keeps as it is.
// A nil kind says that the error has none (e.g. "no command given"): the
// translation point then gives it none either, where it would otherwise
// read it as a backend's error (any failed pull is ErrImageNotFound). Its
// message is fmt.Errorf(format, args...)'s, and %w keeps a cause
// reachable.
func WithKind(kind error, format string, args ...any) error {
	return kinded{kind: kind, err: fmt.Errorf(format, args...)}
}
