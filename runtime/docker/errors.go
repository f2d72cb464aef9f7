package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/roboco/sandboxer/runtime"
)

// Verbs as they appear in error messages ("docker: <verb> <object>: ...").
const (
	opConnect       = "connect"
	opVersion       = "version"
	opImageExists   = "inspect image"
	opPull          = "pull"
	opRun           = "run"
	opCreate        = "create"
	opInspect       = "inspect"
	opExec          = "exec"
	opStop          = "stop"
	opKill          = "kill"
	opRemove        = "remove"
	opList          = "list"
	opCreateNetwork = "create network"
	opRemoveNetwork = "remove network"
)

// wrap is the one place where an error of the docker client becomes a
// *runtime.Error: see translate.
func (r *Runtime) wrap(op, object string, err error) error {
	return translate(r.endpoint, op, object, err)
}

// translate turns err, returned by the docker client for verb op on object,
// into a *runtime.Error naming the runtime, the verb and the object, with a
// kind from kindOf. An error that is already a docker *runtime.Error is
// returned unchanged; nil stays nil.
func translate(endpoint, op, object string, err error) error {
	if err == nil {
		return nil
	}
	var re *runtime.Error
	if errors.As(err, &re) && re.Runtime == Name {
		return err
	}
	kind := kindOf(op, err)
	if errors.Is(kind, runtime.ErrUnavailable) {
		err = withEndpoint(endpoint, err)
	}
	return runtime.NewError(Name, op, object, kind, err)
}

// kindOf classifies err with the errdefs interfaces the docker client
// attaches to every API error (from the HTTP status), never by parsing
// messages, with one exception: a 404 from container create is either the
// image or the network, and only the message tells which.
func kindOf(op string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The caller gave up; that says nothing about the daemon.
		return nil
	case client.IsErrConnectionFailed(err), cerrdefs.IsUnavailable(err):
		return runtime.ErrUnavailable
	case op == opPull:
		// Unknown repository or tag, registry unreachable or refusing,
		// error inside the progress stream: the image cannot be had.
		return runtime.ErrImageNotFound
	case cerrdefs.IsNotFound(err):
		if (op == opRun || op == opCreate) && isMissingImage(err) {
			return runtime.ErrImageNotFound
		}
		return runtime.ErrNotFound
	case cerrdefs.IsConflict(err), cerrdefs.IsAlreadyExists(err):
		// 409 means "name taken" only for verbs that create something;
		// elsewhere it is a state conflict (e.g. exec in a stopped
		// container), which has no kind of its own.
		if op == opRun || op == opCreate || op == opCreateNetwork {
			return runtime.ErrAlreadyExists
		}
		return nil
	default:
		return nil
	}
}

// isMissingImage tells a create that failed for want of its image from one
// that failed for want of its network (both are 404s).
func isMissingImage(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "no such image")
}

// withEndpoint makes sure an unavailable error names the endpoint (the
// client's "Cannot connect to the Docker daemon at ..." does, its other
// connection errors do not).
func withEndpoint(endpoint string, err error) error {
	if endpoint == "" || strings.Contains(err.Error(), endpoint) {
		return err
	}
	return fmt.Errorf("endpoint %s: %w", endpoint, err)
}

// atEndpoint is withEndpoint for the adapter's own errors.
func (r *Runtime) atEndpoint(err error) error {
	return withEndpoint(r.endpoint, err)
}
