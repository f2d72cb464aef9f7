package bench

import (
	"context"
	"fmt"
	neturl "net/url"
	"strings"
	"time"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/poll"
)

// PollInterval is how often a baseline retries its client login.
const PollInterval = 20 * time.Millisecond

// Login is one real client login with a query, no client-side retry.
type Login func(ctx context.Context, url string) error

// Logins are the clients a baseline logs in with, by engine name: each
// engine's own login (engines.WireChecker: pgx, go-redis, mongo-driver),
// for every engine of engines.Default (each has one,
// engines.TestEveryEngineHasALoginCheck).
var Logins = logins(engines.Default)

// logins maps the name of every engine of reg that can log in to its
// login.
func logins(reg *engines.Registry) map[string]Login {
	out := map[string]Login{}
	for _, e := range reg.All() {
		if wc, ok := e.(engines.WireChecker); ok {
			out[e.Spec().Name] = func(ctx context.Context, url string) error {
				_, err := wc.Login(ctx, url)
				return err
			}
		}
	}
	return out
}

// URLVar returns the connection URL among an engine's emitted env
// (engines.URLVar).
func URLVar(env []engines.EnvVar) (engines.EnvVar, bool) { return engines.URLVar(env) }

// PollLogin tries login every PollInterval until it succeeds or timeout
// passes; it returns the error of the last attempt on timeout, and ctx's
// error when ctx ends first.
func PollLogin(ctx context.Context, login Login, url string, timeout time.Duration) error {
	err := poll.Until(ctx, timeout, PollInterval, func() error { return login(ctx, url) })
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("login: %s", redact(err.Error(), url))
}

// redact removes url's password from msg: a client's error may quote
// its connection string (the engines' logins redact their own errors;
// this guards any other Login).
func redact(msg, rawURL string) string {
	u, err := neturl.Parse(rawURL)
	if err != nil || u.User == nil {
		return msg
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "[REDACTED]")
	}
	return msg
}
