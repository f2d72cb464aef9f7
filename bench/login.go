package bench

import (
	"context"
	"fmt"
	neturl "net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/roboco/sandboxer/engines"
)

// PollInterval is how often a baseline retries its client login.
const PollInterval = 20 * time.Millisecond

// mongoSelection bounds one mongo login attempt's server selection: the
// driver only re-checks a server it found down after 500 ms, so a fresh
// client with a short selection per attempt is what keeps polling at
// PollInterval.
const mongoSelection = 100 * time.Millisecond

// Login is one real client login with a query, no client-side retry.
type Login func(ctx context.Context, url string) error

// Logins are the clients a baseline logs in with, by engine name: pgx,
// go-redis and the mongo driver.
var Logins = map[string]Login{
	"postgres": pgLogin,
	"redis":    redisLogin,
	"mongo":    mongoLogin,
}

// URLVar returns the connection URL among an engine's emitted env (the
// variable whose name ends in _URL).
func URLVar(env []engines.EnvVar) (engines.EnvVar, bool) {
	for _, v := range env {
		if strings.HasSuffix(v.Name, "_URL") {
			return v, true
		}
	}
	return engines.EnvVar{}, false
}

// PollLogin tries login every PollInterval until it succeeds or timeout
// passes; it returns the error of the last attempt on timeout.
func PollLogin(ctx context.Context, login Login, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := login(ctx, url)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no login within %s: %s", timeout, redact(err.Error(), url))
		}
		t := time.NewTimer(PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// redact removes url's password from msg: a client's error may quote
// its connection string.
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

// attemptTimeout bounds one login attempt. It is generous because a single
// attempt is also what the fault tests use to prove readiness: on a 2-core
// host under 20 concurrent provisions, a slow answer is load, not an early
// "ready", and must not read as one (a refused or rejected login still fails
// at once).
const attemptTimeout = 15 * time.Second

func pgLogin(ctx context.Context, url string) error {
	cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	conn, err := pgx.Connect(cctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var one int
	return conn.QueryRow(cctx, "select 1").Scan(&one)
}

func redisLogin(ctx context.Context, url string) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	opts.MaxRetries = -1
	opts.DialTimeout = attemptTimeout
	opts.ReadTimeout = attemptTimeout
	opts.WriteTimeout = attemptTimeout
	c := redis.NewClient(opts)
	defer c.Close()
	return c.Ping(ctx).Err()
}

func mongoLogin(ctx context.Context, url string) error {
	c, err := mongo.Connect(options.Client().ApplyURI(url).
		SetServerSelectionTimeout(mongoSelection).SetConnectTimeout(attemptTimeout).
		SetRetryReads(false).SetRetryWrites(false))
	if err != nil {
		return err
	}
	defer c.Disconnect(context.WithoutCancel(ctx))
	return c.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
}
