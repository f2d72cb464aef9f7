package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/roboco/sandboxer/runtime"
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
	case op == runtime.OpPull:
		// Unknown repository or tag, registry unreachable or refusing,
		// error inside the progress stream: the image cannot be had.
		return runtime.ErrImageNotFound
	case cerrdefs.IsNotFound(err):
		if (op == runtime.OpRun || op == runtime.OpCreate) && isMissingImage(err) {
			return runtime.ErrImageNotFound
		}
		return runtime.ErrNotFound
	case cerrdefs.IsConflict(err), cerrdefs.IsAlreadyExists(err):
		// 409 means "name taken" only for verbs that create something;
		// elsewhere it is a state conflict (e.g. exec in a stopped
		// container), which has no kind of its own.
		if op == runtime.OpRun || op == runtime.OpCreate || op == runtime.OpCreateNetwork {
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

// busyPortPatterns find the taken host address in the daemon's answer to a
// start whose host port is taken (the first group is the address, or the
// IP with the port as the second group):
//   - 20.10's userland proxy: "driver failed programming external
//     connectivity on endpoint x (...): Error starting userland proxy:
//     listen tcp4 127.0.0.1:38389: bind: address already in use";
//   - its port allocator, for a port another container holds: "... Bind
//     for 127.0.0.1:39872 failed: port is already allocated";
//   - 28's port mapper: "... failed to bind host port for
//     127.0.0.1:3306:172.18.0.3:3306/tcp: address already in use";
//   - the proxy of older daemons: "Bind for 0.0.0.0:80: unexpected error
//     (Failure EADDRINUSE)".
var busyPortPatterns = []*regexp.Regexp{
	regexp.MustCompile(`listen (?:tcp|udp)[46]? (\S+): bind: address already in use`),
	regexp.MustCompile(`Bind for (\S+) failed: port is already allocated`),
	regexp.MustCompile(`failed to bind host port for (\[[0-9a-fA-F:.]+\]|[0-9.]+):(\d+)(?::\S*)?: address already in use`),
	regexp.MustCompile(`Bind for (\S+): unexpected error \(Failure EADDRINUSE\)`),
}

// hostPortBusy reports whether err, from a container start, says that a
// host port to publish was already taken (by another process, container
// or runtime) and, when the message tells, which one: addr is
// "127.0.0.1:38389" and port 38389, or "" and 0. The daemon answers with a
// 500 and no more specific type, so this reads the message.
func hostPortBusy(err error) (addr string, port int, busy bool) {
	if err == nil {
		return "", 0, false
	}
	msg := err.Error()
	for _, re := range busyPortPatterns {
		m := re.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		addr = m[1]
		if len(m) > 2 && m[2] != "" {
			addr = net.JoinHostPort(strings.Trim(m[1], "[]"), m[2])
		}
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			return addr, 0, true
		}
		n, _ := strconv.Atoi(p)
		return addr, n, true
	}
	lower := strings.ToLower(msg)
	if strings.Contains(lower, "address already in use") || strings.Contains(lower, "port is already allocated") {
		return "", 0, true
	}
	return "", 0, false
}
