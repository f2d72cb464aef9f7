package engines

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// WireChecker is an Engine that can log in to its server over the wire
// with the real Go client a consumer would use (pgx, go-redis,
// mongo-driver), linked with the engine's package only. Every engine of
// engines/all implements it (TestEveryEngineHasALoginCheck): it is the one
// place that knows how to log in to an engine, for the tests, the bench
// and the demo, and the check a readiness probe over the wire can reuse.
type WireChecker interface {
	// Login logs in once to the server at rawURL (the connection URL the
	// engine's Env emits, credentials included), with no client-side
	// retry, runs the cheapest command that proves the session works, and
	// returns what the client saw. A refused connection or rejected
	// credentials fail at once; ctx bounds the attempt (each client also
	// caps it at AttemptTimeout). The error names the engine and the
	// address, and never holds the password.
	Login(ctx context.Context, rawURL string) (Session, error)
}

// Session is what a real client saw when it logged in.
type Session struct {
	// Client names the Go client that logged in: "pgx", "go-redis",
	// "mongo-driver".
	Client string
	// Server is the server's version, as the server reported it.
	Server string
}

// AttemptTimeout caps one login attempt where ctx does not bound it
// sooner. It is generous because a single attempt is also what proves
// readiness in the tests: on a 2-core host under 20 concurrent provisions
// a slow answer is load, not an early "ready", and must not read as one (a
// refused or rejected login still fails at once).
const AttemptTimeout = 15 * time.Second

// ErrNoLogin: the engine asked for does not implement WireChecker.
var ErrNoLogin = errors.New("no login check")

// Login logs in once to the engine registered as name, at rawURL, with its
// real client (WireChecker.Login). An engine that is not linked
// (ErrNotLinked), or one without a login check (ErrNoLogin), is an error.
func (r *Registry) Login(ctx context.Context, name, rawURL string) (Session, error) {
	e, ok := r.Lookup(name)
	if !ok {
		return Session{}, fmt.Errorf("engines: login: %w", r.NotLinked(name))
	}
	wc, ok := e.(WireChecker)
	if !ok {
		return Session{}, fmt.Errorf("engines: login to %s: %w", name, ErrNoLogin)
	}
	return wc.Login(ctx, rawURL)
}

// URLName returns the name of the variable that holds the connection URL
// of the engine registered as name, under the env prefix ("ROBOCO_TEST"
// -> "ROBOCO_TEST_DB_URL" for postgres), or "" for an unknown engine.
func (r *Registry) URLName(name, prefix string) string {
	e, ok := r.Lookup(name)
	if !ok {
		return ""
	}
	v, _ := URLVar(e.Env(prefix, Endpoint{}, Credentials{}))
	return v.Name
}

// URLVar returns the connection URL among an engine's emitted env: the
// variable whose name ends in _URL (every engine emits exactly one,
// TestEveryEngineEmitsOneURL).
func URLVar(env []EnvVar) (EnvVar, bool) {
	for _, v := range env {
		if strings.HasSuffix(v.Name, "_URL") {
			return v, true
		}
	}
	return EnvVar{}, false
}

// LoginError names the engine and the address of rawURL, and keeps err
// (for errors.Is) while its message never shows rawURL's password: a
// client's error may quote its connection string. Every engine's Login
// (and its test kit's clients) wraps its client's errors with it.
func LoginError(engine, rawURL string, err error) error {
	addr, secret := "", ""
	if u, perr := url.Parse(rawURL); perr == nil {
		addr = u.Host
		if u.User != nil {
			secret, _ = u.User.Password()
		}
	}
	return &redactedError{prefix: engine + ": login to " + addr, err: err, secret: secret}
}

// redactedError is a login error whose message has the password removed.
type redactedError struct {
	prefix string
	err    error
	secret string
}

func (e *redactedError) Error() string {
	msg := e.prefix + ": " + e.err.Error()
	if e.secret != "" {
		msg = strings.ReplaceAll(msg, e.secret, "[REDACTED]")
	}
	return msg
}

func (e *redactedError) Unwrap() error { return e.err }
