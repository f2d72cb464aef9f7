package kubernetes

import (
	"errors"
	"net"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// wrap is the one place where an error of client-go becomes a
// *runtime.Error (adapterkit.Translator, with the two decisions below).
func (r *Runtime) wrap(op, object string, err error) error {
	return translator(r.config.Host).Translate(op, object, err)
}

// translator is this adapter's translation point for the API server at
// endpoint.
func translator(endpoint string) adapterkit.Translator {
	return adapterkit.Translator{Runtime: Name, Endpoint: endpoint, Unreachable: unreachable, Classify: classify}
}

// unreachable: the API server could not be reached (refused, no route,
// an unresolvable or silent host), or said it cannot serve (503).
func unreachable(err error) bool {
	var ne net.Error
	var oe *net.OpError
	var de *net.DNSError
	switch {
	case apierrors.IsServiceUnavailable(err):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return true
	case errors.As(err, &oe), errors.As(err, &de):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	}
	return false
}

// classify reads the API's status reason, never the message.
func classify(op string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return runtime.ErrNotFound
	case apierrors.IsAlreadyExists(err) && adapterkit.CreatesNamed(op):
		return runtime.ErrAlreadyExists
	case apierrors.IsInvalid(err):
		return runtime.ErrInvalid
	}
	return nil
}
