package containerd

import (
	cerrdefs "github.com/containerd/errdefs"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// wrap is the one place where an error of the containerd client (or of the
// adapter's own plumbing) becomes a *runtime.Error naming the runtime, the
// verb and the object, with a kind: the rules every adapter shares
// (adapterkit.Translator.Kind), then classify, which is containerd's own.
// An error that already is a containerd *runtime.Error is returned
// unchanged; nil stays nil. The adapter's own checks give their kind with
// adapterkit.WithKind.
func (r *Runtime) wrap(op, object string, err error) error {
	return translator(r.address).Translate(op, object, err)
}

// translator is this adapter's translation point for the daemon at address.
func translator(address string) adapterkit.Translator {
	return adapterkit.Translator{Runtime: Name, Endpoint: address, Unreachable: cerrdefs.IsUnavailable, Classify: classify}
}

// classify reads containerd's errdefs (the client turns every gRPC status
// into one), never messages.
func classify(op string, err error) error {
	switch {
	case cerrdefs.IsNotFound(err) && adapterkit.ReadsImage(op):
		return runtime.ErrImageNotFound
	case cerrdefs.IsNotFound(err):
		return runtime.ErrNotFound
	case cerrdefs.IsAlreadyExists(err):
		// "Already exists" means "name taken" only for verbs that create.
		if adapterkit.CreatesNamed(op) {
			return runtime.ErrAlreadyExists
		}
		return nil
	case cerrdefs.IsNotImplemented(err):
		return runtime.ErrUnsupported
	default:
		return nil
	}
}
