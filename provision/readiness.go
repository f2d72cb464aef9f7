package provision

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/runtime"
)

// Readiness is how a sandbox is judged ready.
type Readiness string

// Readiness modes.
const (
	// ReadinessAuto (the default, also the zero value "") checks over the
	// wire wherever the provisioner can reach the endpoint the consumer
	// will use, and falls back to the exec probe where it cannot (a
	// sibling network of a rootless runtime, which lives in that
	// runtime's own network namespace, is never dialled).
	ReadinessAuto Readiness = "auto"
	// ReadinessWire always checks over the wire: the engine's real client
	// logs in with the handed-out credentials at the handed-out endpoint.
	ReadinessWire Readiness = "wire"
	// ReadinessExec always runs the engine's exec probe inside the sandbox.
	ReadinessExec Readiness = "exec"
)

// ReadinessModes lists the valid values, for flags and messages.
var ReadinessModes = []Readiness{ReadinessAuto, ReadinessWire, ReadinessExec}

// ParseReadiness reads a readiness mode ("" is auto).
func ParseReadiness(s string) (Readiness, error) {
	switch r := Readiness(s); r {
	case "", ReadinessAuto:
		return ReadinessAuto, nil
	case ReadinessWire, ReadinessExec:
		return r, nil
	}
	return "", invalid("readiness", s, "want auto, wire or exec")
}

// Polling of the wire check. A refused dial costs microseconds, and a
// light server (redis) is up within a few tens of milliseconds of its
// start: for the first wireBriskFor the check comes every wireBrisk, so
// it sees such a server up within 5 ms (2.5 ms on average). After that,
// the pause grows to the cap, the bench baseline's own cadence, which
// keeps the average wait after a slower server is up at about 10 ms.
const (
	wireBrisk    = 5 * time.Millisecond
	wireBriskFor = 100 * time.Millisecond
	wireMax      = 20 * time.Millisecond
	// reachTimeout bounds the dial that decides whether the sandbox's
	// address answers from here: a connection or a refusal answers within
	// a round trip; silence this long means "no route from here".
	reachTimeout = 300 * time.Millisecond
	// stateEvery is how often a failing wire check asks the runtime
	// whether the sandbox still runs (an exited one fails at once).
	stateEvery = time.Second
)

// checkPlan is how one service is judged ready, and why.
type checkPlan struct {
	mode Readiness // ReadinessWire or ReadinessExec
	why  string
	// target is the endpoint the wire check logs in at: the one the
	// consumer gets.
	target engines.Endpoint
}

// plan decides how s is judged ready. target is the consumer's endpoint
// (the published port in host mode, the sandbox's address on the sibling
// network otherwise).
func (p *Provisioner) plan(ctx context.Context, s *service, target engines.Endpoint) checkPlan {
	cp := checkPlan{mode: ReadinessExec, target: target}
	if _, ok := s.engine.(engines.WireChecker); !ok {
		cp.why = "the engine has no wire check"
		return cp
	}
	switch {
	case p.opts.Readiness == ReadinessExec:
		cp.why = "forced (readiness exec)"
		return cp
	case p.opts.Readiness == ReadinessWire:
		cp.mode, cp.why = ReadinessWire, "forced (readiness wire)"
		return cp
	case p.opts.Private:
		// An internal network has no address on this host: a dial to a
		// sandbox's address there reaches nothing of it, or something
		// else entirely (another bridge of the same subnet).
		cp.why = fmt.Sprintf("private network: %s is on an internal network, not reachable from here", hostPortOf(target))
		return cp
	case p.hostMode():
		cp.mode, cp.why = ReadinessWire, "host mode: the published 127.0.0.1 port is reachable from here"
		return cp
	}
	if info, err := p.rt.Version(ctx); err == nil && info.Rootless {
		// A rootless runtime's networks live in its own network
		// namespace: their addresses are not this host's to dial, and a
		// dial that seems to answer has reached something else (a
		// same-numbered bridge of a rootful runtime, a transparent
		// proxy).
		cp.why = fmt.Sprintf("%s is rootless: %s is in its own network namespace, not reachable from here", info.Runtime, hostPortOf(target))
		return cp
	}
	ok, err := reachable(ctx, target)
	if ok {
		cp.mode, cp.why = ReadinessWire, fmt.Sprintf("%s answers from here", hostPortOf(target))
	} else {
		cp.why = fmt.Sprintf("%s does not answer from here (%v)", hostPortOf(target), err)
	}
	return cp
}

// reachable is Reachable; tests of the mode decision replace it.
var reachable = Reachable

// Reachable decides, with one dial, whether this process can reach ep: a
// connection, or a refusal (nothing listens yet, but the address answers),
// means yes; a dial that times out, or no route, means no. The error says
// what the dial saw when the answer is no.
func Reachable(ctx context.Context, ep engines.Endpoint) (bool, error) {
	d := net.Dialer{Timeout: reachTimeout}
	conn, err := d.DialContext(ctx, "tcp", hostPortOf(ep))
	if err == nil {
		_ = conn.Close()
		return true, nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return true, nil
	}
	return false, err
}

func hostPortOf(ep engines.Endpoint) string {
	return net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port))
}

// waitWire logs in with the engine's real client at the consumer's URL
// until it succeeds, the sandbox stops running, or rctx's deadline. Every
// failure means "not yet": the init-time servers of the postgres and mongo
// images listen on a unix socket or on 127.0.0.1 inside the container, so
// no login from outside can reach one, and a login that succeeds is the
// real server accepting the handed-out credentials. ctx is the call's
// context, to tell its cancellation from the deadline.
func (p *Provisioner) waitWire(ctx, rctx context.Context, ref string, wc engines.WireChecker, rawURL string, deadline time.Duration) (attempts int, err error) {
	start := time.Now()
	delay := wireBrisk
	var lastErr error
	lastState := start
	for {
		attempts++
		_, lerr := wc.Login(rctx, rawURL)
		if lerr == nil {
			return attempts, nil
		}
		if lastErr == nil || rctx.Err() == nil {
			lastErr = lerr // an attempt cut short by the deadline says less
		}
		if time.Since(lastState) >= stateEvery && rctx.Err() == nil {
			lastState = time.Now()
			if fatal := p.stopped(rctx, ref); fatal != nil {
				return attempts, fmt.Errorf("%w (last login: %w)", fatal, lastErr)
			}
		}
		if err := pause(rctx, delay); err != nil {
			if ctx.Err() != nil {
				return attempts, ctx.Err()
			}
			return attempts, fmt.Errorf("%w after %s (%d logins): %w", ErrNotReady, deadline, attempts, lastErr)
		}
		delay = wireDelay(time.Since(start), delay)
	}
}

// wireDelay is the pause before the next login, elapsed into the wait
// and after a pause of prev: wireBrisk for the first wireBriskFor, then
// growing by half each time, up to wireMax.
func wireDelay(elapsed, prev time.Duration) time.Duration {
	if elapsed < wireBriskFor {
		return wireBrisk
	}
	return min(max(prev, wireBrisk)*3/2, wireMax)
}

// stopped returns an ErrNotReady error when the sandbox is no longer
// running or is gone, nil while it runs (or when the runtime cannot say).
func (p *Provisioner) stopped(ctx context.Context, ref string) error {
	ctr, err := p.rt.Inspect(ctx, ref)
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return fmt.Errorf("%w: sandbox disappeared: %w", ErrNotReady, err)
	case err == nil && !ctr.Running():
		return fmt.Errorf("%w: sandbox is %s (exit code %d)", ErrNotReady, ctr.State, ctr.ExitCode)
	}
	return nil
}

// DescribeReadiness says, for a human, how sandboxes will be judged ready
// under mode, in host mode (network "") or on the sibling network.
func DescribeReadiness(mode Readiness, network string) string {
	switch {
	case mode == ReadinessExec:
		return "exec (forced): each engine's probe runs inside its sandbox"
	case mode == ReadinessWire:
		return "wire (forced): each engine's real client logs in at the endpoint handed out"
	case network == "":
		return "wire: host mode publishes on 127.0.0.1, which is reachable from here; each engine's real client logs in there with the credentials handed out"
	}
	return fmt.Sprintf("decided per sandbox: wire when its address on network %q answers from here (a connection or a refusal), else exec (no route, or a dial that times out: a provisioner in another container, rootless Podman's network namespace)", network)
}
