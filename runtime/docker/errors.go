package docker

import (
	"regexp"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
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
	return translator(endpoint).Translate(op, object, err)
}

// translator is this adapter's translation point for the daemon at
// endpoint: the rules every adapter shares (adapterkit.Translator.Kind),
// then the two decisions below, which are Docker's own.
func translator(endpoint string) adapterkit.Translator {
	return adapterkit.Translator{Runtime: Name, Endpoint: endpoint, Unreachable: unreachable, Classify: classify}
}

// kindOf is the kind translate gives err for verb op.
func kindOf(op string, err error) error {
	return translator("").Kind(op, err)
}

// unreachable: the client could not connect, or the daemon said it cannot
// serve (503).
func unreachable(err error) bool {
	return client.IsErrConnectionFailed(err) || cerrdefs.IsUnavailable(err)
}

// classify reads the errdefs interfaces the docker client attaches to every
// API error (from the HTTP status), never the message, with one exception:
// a 404 from container create is either the image or the network, and only
// the message tells which.
func classify(op string, err error) error {
	switch {
	case op == runtime.OpRemoveNetwork && (cerrdefs.IsPermissionDenied(err) || cerrdefs.IsConflict(err)):
		// 20.10 answers a network with endpoints left with a 403 ("has
		// active endpoints"); a conflict is the same refusal.
		return runtime.ErrInUse
	case cerrdefs.IsNotFound(err):
		if adapterkit.CreatesContainer(op) && isMissingImage(err) || adapterkit.ReadsImage(op) {
			return runtime.ErrImageNotFound
		}
		return runtime.ErrNotFound
	case cerrdefs.IsConflict(err), cerrdefs.IsAlreadyExists(err):
		// 409 means "name taken" only for verbs that create something;
		// elsewhere it is a state conflict (e.g. exec in a stopped
		// container), which has no kind of its own.
		if adapterkit.CreatesNamed(op) {
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
	if addr, port, found := adapterkit.FindBusyPort(msg, busyPortPatterns); found {
		return addr, port, true
	}
	lower := strings.ToLower(msg)
	if strings.Contains(lower, "address already in use") || strings.Contains(lower, "port is already allocated") {
		return "", 0, true
	}
	return "", 0, false
}
