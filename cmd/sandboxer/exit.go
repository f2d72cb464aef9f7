package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
)

// Exit codes. `run` exits with its command's status instead (see runCmd).
const (
	// ExitOK: success.
	ExitOK = 0
	// ExitFailure: any other failure (a teardown or sweep that failed, an
	// output file that could not be written, ...).
	ExitFailure = 1
	// ExitUsage: bad flags, arguments or input (unknown service, bad
	// owner id, bad image override; for spawn, a switch value that is not
	// a boolean while the project lists services). Nothing was started.
	ExitUsage = 2
	// ExitUnavailable: no container runtime answered (or not the one asked
	// for): nothing was started. For down, ls and gc without --runtime,
	// also: a present runtime did not answer (they acted on the others).
	ExitUnavailable = 3
	// ExitProvision: provisioning failed (image, including an image no
	// sandbox can be laid out on, run, readiness, or a port published
	// beyond loopback); what the call had started was rolled back.
	ExitProvision = 4
	// ExitCannotExec and ExitNotFound: `run` could not start its command
	// (not executable, not found), as sh(1) reports them.
	ExitCannotExec = 126
	ExitNotFound   = 127
	// ExitSignal + n: interrupted by signal n (SIGHUP: 129, SIGINT: 130,
	// SIGQUIT: 131, SIGTERM: 143), after rollback or teardown; for `run`,
	// its command was killed by n.
	ExitSignal = 128
)

const exitCodesHelp = `Exit codes:
  0    success
  1    failure (teardown, sweep or output failed)
  2    usage error: bad flags, arguments or input (nothing was started)
  3    container runtime unavailable (nothing was started); down, ls, gc:
       a present runtime did not answer (the others were acted on)
  4    provisioning failed: image, start or readiness (rolled back)
  126  run: CMD could not be executed
  127  run: CMD not found
  128+n  interrupted by signal n (129 SIGHUP, 130 SIGINT, 131 SIGQUIT,
         143 SIGTERM), after rollback or teardown
  run: otherwise CMD's own exit status (128+n when CMD was killed by signal n)
  spawn: 0 when provisioned and when not participating (switch off, no
       services): its JSON report's "status" tells them apart`

// usageError is an input error: exit code ExitUsage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// exitError carries an exit code chosen by a command (run: CMD's status).
// A nil err prints nothing.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// exitCode classifies err.
func exitCode(err error, sig os.Signal) int {
	var ee *exitError
	var ue *usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	case sig != nil:
		// A command that fails after a caught signal failed because of it.
		return signalCode(sig)
	case errors.As(err, &ue), errors.Is(err, provision.ErrInvalid), errors.Is(err, janitor.ErrInvalid), errors.Is(err, detect.ErrUnknownRuntime):
		return ExitUsage
	case errors.Is(err, runtime.ErrUnavailable):
		return ExitUnavailable
	}
	var pe *provision.Error
	if errors.As(err, &pe) || errors.Is(err, provision.ErrNotReady) || errors.Is(err, runtime.ErrImageNotFound) ||
		errors.Is(err, engines.ErrImageLayout) {
		return ExitProvision
	}
	return ExitFailure
}

func signalCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return ExitSignal + int(s)
	}
	return ExitFailure
}

// oneLine flattens a message to a single line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// signalRouter hands the caught signals (caughtSignals: SIGINT, SIGTERM,
// SIGQUIT, SIGHUP) to whoever needs them: by default they cancel the
// command's context (provisioning then rolls back); while `run`'s command
// runs, they are forwarded to it.
type signalRouter struct {
	mu       sync.Mutex
	cancel   context.CancelFunc
	forward  func(os.Signal)
	received os.Signal
	pending  []os.Signal // delivered before a cancel func was set
}

func newSignalRouter() *signalRouter { return &signalRouter{} }

// deliver routes one signal.
func (r *signalRouter) deliver(s os.Signal) {
	r.mu.Lock()
	if r.received == nil {
		r.received = s
	}
	if f := r.forward; f != nil {
		r.mu.Unlock()
		f(s)
		return
	}
	cancel := r.cancel
	if cancel == nil {
		r.pending = append(r.pending, s)
	}
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// attach sets the context cancel func; a signal that came before cancels
// at once.
func (r *signalRouter) attach(cancel context.CancelFunc) {
	r.mu.Lock()
	r.cancel = cancel
	early := len(r.pending) > 0
	r.mu.Unlock()
	if early {
		cancel()
	}
}

// setForward installs f (nil: back to cancelling) and reports the first
// signal received so far, so that a caller can tell whether one arrived
// before it took over.
func (r *signalRouter) setForward(f func(os.Signal)) os.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forward = f
	return r.received
}

// signal is the first signal received (nil: none).
func (r *signalRouter) signal() os.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.received
}

// signalName renders "SIGINT".
func signalName(s os.Signal) string {
	if sig, ok := s.(syscall.Signal); ok {
		switch sig {
		case syscall.SIGINT:
			return "SIGINT"
		case syscall.SIGTERM:
			return "SIGTERM"
		case syscall.SIGKILL:
			return "SIGKILL"
		case syscall.SIGHUP:
			return "SIGHUP"
		case syscall.SIGQUIT:
			return "SIGQUIT"
		}
	}
	return s.String()
}
