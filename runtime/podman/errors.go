package podman

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// Root causes as libpod reports them in its error model's "cause" (the
// text of its sentinel errors, stable across 4.x and 5.x). They are the
// only messages this adapter reads, and only here.
const (
	causeNoSuchContainer = "no such container"
	causeNoSuchExec      = "no such exec session"
	causeNoSuchNetwork   = "network not found"
	causeNoSuchImage     = "image not known"
	causeNameInUse       = "that name is already in use"
	causeCtrExists       = "container already exists"
	causeNetworkExists   = "network already exists"
	causeStateImproper   = "container state improper"
	causeCtrStopped      = "container is stopped"
	// causeNetworkInUse is libpod's ErrNetworkInUse: a network that
	// containers still use (HTTP 500 up to Podman 4.x, 409 later).
	causeNetworkInUse = "network is being used"
	// causeSubnetInUse is what libpod's network create says of a subnet
	// that another network or a host route already has (no sentinel).
	causeSubnetInUse = "is already used on the host or by another config"
	// causeStrictUnknown is how a service that reads "isolate" as a
	// boolean refuses "strict" (strconv.ParseBool's error).
	causeStrictUnknown = `parsing "strict": invalid syntax`
	// causeInterfaceGone is what libpod's network create says when a
	// host interface went away while it read the host's addresses to
	// check the subnet against (net.Interfaces, then each one's Addrs:
	// "route ip+net: no such network interface"), another network's
	// bridge or veth torn down meanwhile: the same create may be tried
	// again.
	causeInterfaceGone = "no such network interface"
	// causeAddrInUse is EADDRINUSE: the start could not bind a host port
	// to publish (rootful Podman binds them in the service, rootless in
	// rootlessport or pasta).
	causeAddrInUse = "address already in use"
)

// wrap is the one place where an error of the libpod API becomes a
// *runtime.Error: see translate.
func (r *Runtime) wrap(op, object string, err error) error {
	err = translate(r.endpoint, op, object, err)
	if errors.Is(err, runtime.ErrUnavailable) {
		r.forget()
	}
	return err
}

// translate turns err, returned by the service for verb op on object, into
// a *runtime.Error naming the runtime, the verb and the object, with a
// kind from kindOf and the service's error model read as "<message> (HTTP
// <code>)". An error that is already a podman *runtime.Error is returned
// unchanged; nil stays nil.
func translate(endpoint, op, object string, err error) error {
	return translator(endpoint).Translate(op, object, err)
}

// translator is this adapter's translation point for the service at
// endpoint: the rules every adapter shares (adapterkit.Translator.Kind),
// then the two decisions below, which are libpod's own.
func translator(endpoint string) adapterkit.Translator {
	return adapterkit.Translator{Runtime: Name, Endpoint: endpoint, Unreachable: isConnectionError, Classify: classify, Cause: apiError}
}

// kindOf is the kind translate gives err for verb op.
func kindOf(op string, err error) error {
	return translator("").Kind(op, err)
}

// classify reads the HTTP status of the service's answer and, where one
// status means several things (a 404 from create is the image or the
// network; a 500 from create may be a name conflict), libpod's root cause.
func classify(op string, err error) error {
	code, cause := status(err)
	switch {
	case hasCause(cause, causeNameInUse, causeCtrExists, causeNetworkExists):
		return runtime.ErrAlreadyExists
	case op == runtime.OpRemoveNetwork && (code == http.StatusConflict || hasCause(cause, causeNetworkInUse)):
		return runtime.ErrInUse
	case adapterkit.CreatesContainer(op) && hasCause(cause, causeNoSuchImage):
		return runtime.ErrImageNotFound
	case adapterkit.ReadsImage(op) && (code == http.StatusNotFound || hasCause(cause, causeNoSuchImage)):
		return runtime.ErrImageNotFound
	case code == http.StatusNotFound,
		hasCause(cause, causeNoSuchContainer, causeNoSuchExec, causeNoSuchNetwork):
		return runtime.ErrNotFound
	case code == http.StatusConflict && adapterkit.CreatesNamed(op):
		return runtime.ErrAlreadyExists
	default:
		return nil
	}
}

// subnetInUse reports whether err, from a network create, says that the
// subnet asked for overlaps another network's or a host route.
func subnetInUse(err error) bool {
	_, cause := status(err)
	return hasCause(cause, causeSubnetInUse)
}

// interfaceGone reports whether err, from a network create, is the
// service's race with a host interface that went away (causeInterfaceGone).
func interfaceGone(err error) bool {
	_, cause := status(err)
	return hasCause(cause, causeInterfaceGone)
}

// strictUnknown reports whether err, from a network create, says that the
// service reads the "isolate" option as a boolean (before Podman 4.6), so
// that "strict" is not one of its values.
func strictUnknown(err error) bool {
	_, cause := status(err)
	return hasCause(cause, causeStrictUnknown)
}

// errorModel is libpod's error answer (the JSON of an unsuccessful
// status; its bindings' errorhandling.ErrorModel).
type errorModel struct {
	// Because is the root cause, for machines.
	Because string `json:"cause"`
	// Message is for humans.
	Message string `json:"message"`
	// ResponseCode is the HTTP status.
	ResponseCode int `json:"response"`
}

func (e *errorModel) Error() string { return e.Message }

// status returns the HTTP status and libpod's root cause of an API error
// (0 and "" for other errors).
func status(err error) (int, string) {
	var em *errorModel
	if errors.As(err, &em) {
		return em.ResponseCode, strings.ToLower(em.Because + ": " + em.Message)
	}
	return 0, ""
}

// hasCause reports whether the root cause text contains any of causes.
func hasCause(cause string, causes ...string) bool {
	for _, c := range causes {
		if strings.Contains(cause, c) {
			return true
		}
	}
	return false
}

// isConnectionError reports whether err means the service could not be
// reached at all.
func isConnectionError(err error) bool {
	var de *dialError
	var oe *net.OpError
	switch {
	case errors.As(err, &de), errors.As(err, &oe):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNRESET):
		return true
	}
	return false
}

// apiError makes a libpod error model read as "<message> (HTTP <code>)";
// other errors are returned unchanged.
func apiError(err error) error {
	code, _ := status(err)
	if code == 0 {
		return err
	}
	return fmt.Errorf("%w (HTTP %d)", err, code)
}

// busyPortPatterns find the taken address (or port) in the root causes
// of a start whose host port is taken, lower-cased:
//   - rootful libpod: "cannot listen on the TCP port: listen tcp4
//     127.0.0.1:38389: bind: address already in use";
//   - rootlessport: "rootlessport listen tcp 127.0.0.1:54322: bind: ...";
//   - pasta (Podman 5 rootless): "failed to bind port 8080 (address
//     already in use) for option '-t 8080-8080:80-80'".
var busyPortPatterns = []*regexp.Regexp{
	regexp.MustCompile(`listen (?:tcp|udp)[46]? (\S+): bind: address already in use`),
	regexp.MustCompile(`failed to bind port (\d+) \(address already in use\)`),
}

// hostPortBusy reports whether err, from a container start, says that a
// host port to publish was already taken (by another process, container
// or runtime) and, when the message tells, which one: addr is
// "127.0.0.1:38389" (or only "8080" where the backend names no address)
// and port 38389, or "" and 0.
func hostPortBusy(err error) (addr string, port int, busy bool) {
	if err == nil {
		return "", 0, false
	}
	_, cause := status(err)
	if !hasCause(cause, causeAddrInUse) {
		return "", 0, false
	}
	if addr, port, found := adapterkit.FindBusyPort(cause, busyPortPatterns); found {
		return addr, port, true
	}
	return "", 0, true
}
