package adapterkit

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/roboco/sandboxer/runtime"
)

const (
	// CleanupTimeout bounds the removal of a container that Run or Create
	// made but could not complete; it goes on even when the caller's
	// context is done, so that a failed run leaves nothing behind.
	CleanupTimeout = 30 * time.Second
	// MaxRunAttempts bounds how many containers Runner.Run creates for one
	// spec whose ephemeral host port was taken before the backend bound it.
	MaxRunAttempts = 3
)

// Runner is Run for a backend that creates and starts a container in two
// steps and picks an ephemeral host port that another process can take
// before the start binds it (Docker picks it at the start by its own
// bookkeeping, Podman at create). When the start fails on a taken port and
// Retryable says fresh ephemeral ports may succeed, Run removes the
// container and makes it again, up to MaxRunAttempts times; either way a
// taken port's error names the port and the number of attempts.
//
// Every field must be set. Errors of Create, Inspect and Discard are
// returned as they are (the adapter has translated them); the start's is
// passed to Wrap.
type Runner struct {
	// Runtime is the adapter's name, for the log.
	Runtime string
	// Log receives a line for each retry.
	Log *slog.Logger
	// Create makes the container of spec and returns its ID.
	Create func(ctx context.Context) (id string, err error)
	// Start starts a created container; attempt counts from 1.
	Start func(ctx context.Context, attempt int, id string) error
	// Inspect reports the started container.
	Inspect func(ctx context.Context, id string) (runtime.Container, error)
	// Discard removes a container that could not be started or seen, even
	// when ctx is done (see Discard), and says whether it is gone.
	Discard func(ctx context.Context, id string) error
	// PortBusy reports whether a start's error says that a host port to
	// publish was taken and, when the backend tells, which one (addr as
	// the backend names it, port 0 when unknown).
	PortBusy func(err error) (addr string, port int, busy bool)
	// Retryable reports whether a start that failed on the taken host
	// port may succeed with fresh ephemeral ports: the backend's own rule.
	Retryable func(ports []runtime.PortSpec, taken int) bool
	// Wrap translates a start's error for the object given.
	Wrap func(object string, err error) error
}

// Run creates and starts a container from spec and reports it as Inspect
// sees it after the start. If the start fails, the container is removed
// before the error is returned; if it failed on a taken ephemeral host
// port, Run may try again (see Runner).
func (r Runner) Run(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	for attempt := 1; ; attempt++ {
		id, err := r.Create(ctx)
		if err != nil {
			return runtime.Container{}, err
		}
		err = r.Start(ctx, attempt, id)
		if err == nil {
			c, err := r.Inspect(ctx, id)
			if err != nil {
				// A container the caller cannot see is one it cannot tear down.
				_ = r.Discard(ctx, id)
				return runtime.Container{}, err
			}
			return c, nil
		}
		removed := r.Discard(ctx, id) == nil
		obj := Object(spec, id)
		addr, port, busy := r.PortBusy(err)
		if !busy {
			return runtime.Container{}, r.Wrap(obj, err)
		}
		if !removed || attempt == MaxRunAttempts || ctx.Err() != nil || !r.Retryable(spec.Ports, port) {
			return runtime.Container{}, r.Wrap(obj, PortBusyError(addr, attempt, err))
		}
		r.Log.DebugContext(ctx, r.Runtime+": an ephemeral host port was taken before the start; retrying with fresh ports",
			"container", obj, "attempt", attempt, "port", addr, "error", err)
	}
}

// PortBusyError says which published host port was taken (addr, when the
// backend named it) and how many containers Run tried.
func PortBusyError(addr string, attempts int, err error) error {
	what := "a published host port"
	if addr != "" {
		what = "published host port " + addr
	}
	if attempts > 1 {
		return fmt.Errorf("%s is already in use (%d attempts, each with fresh ephemeral host ports): %w", what, attempts, err)
	}
	return fmt.Errorf("%s is already in use: %w", what, err)
}

// FindBusyPort finds the taken host address in msg, a backend's answer to
// a start whose host port was taken, with the first of patterns that
// matches. A pattern's first group is the address ("127.0.0.1:38389"), or
// the port alone ("8080"), or, with a second group, the IP with the port
// as that group. port is 0 when the address has none.
func FindBusyPort(msg string, patterns []*regexp.Regexp) (addr string, port int, found bool) {
	for _, re := range patterns {
		m := re.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		addr = m[1]
		if len(m) > 2 && m[2] != "" {
			addr = net.JoinHostPort(strings.Trim(m[1], "[]"), m[2])
		}
		p := addr
		if _, hp, err := net.SplitHostPort(addr); err == nil {
			p = hp
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return addr, 0, true
		}
		return addr, n, true
	}
	return "", 0, false
}

// Discard removes a container (by id, with remove) that verb op made but
// could not complete, even when ctx is already done, within
// CleanupTimeout. A failure is logged, and returned for callers that must
// know the container is gone.
func Discard(ctx context.Context, log *slog.Logger, rt, op, id string, remove func(ctx context.Context, id string) error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
	defer cancel()
	err := remove(cctx, id)
	if err != nil {
		log.WarnContext(ctx, rt+": could not remove a half-made container", "op", op, "container", id, "error", err)
	}
	return err
}

// Object names a container in errors: the spec's name, else fallback
// (its ID, once it has one).
func Object(spec runtime.RunSpec, fallback string) string {
	if spec.Name != "" {
		return spec.Name
	}
	return fallback
}

// FillOOMKilled sets OOMKilled on the exited containers among cs, for
// backends whose list does not report it: oom asks the backend for one
// container (its inspect). A container that cannot be asked (removed
// meanwhile, a failed call) keeps what the list said: its state and exit
// code stand, and a list never fails for want of this detail.
func FillOOMKilled(ctx context.Context, cs []runtime.Container, oom func(ctx context.Context, id string) (bool, error)) {
	for i := range cs {
		if cs[i].State != runtime.StateExited {
			continue
		}
		if killed, err := oom(ctx, cs[i].ID); err == nil {
			cs[i].OOMKilled = killed
		}
	}
}
