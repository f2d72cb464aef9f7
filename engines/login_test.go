package engines_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	_ "github.com/roboco/sandboxer/engines/all"
	"github.com/roboco/sandboxer/engines/redis"
	"github.com/roboco/sandboxer/internal/testkit"
)

// TestEveryEngineHasALoginCheck: adding an engine is one package that
// registers its type, and that type logs in with its real client: the tests,
// the bench and the demo reach every engine through it.
func TestEveryEngineHasALoginCheck(t *testing.T) {
	for _, e := range engines.Default.All() {
		t.Run(e.Spec().Name, func(t *testing.T) {
			_, ok := e.(engines.WireChecker)
			assert.True(t, ok, "%T implements no engines.WireChecker: nothing can log in to %s with a real client", e, e.Spec().Name)
		})
	}
}

// TestEveryEngineEmitsOneURL: the login takes the URL an engine emits, so
// each emits exactly one, which URLName finds.
func TestEveryEngineEmitsOneURL(t *testing.T) {
	for _, e := range engines.Default.All() {
		name := e.Spec().Name
		t.Run(name, func(t *testing.T) {
			env := e.Env("P", engines.Endpoint{Host: "10.0.0.1", Port: 1}, engines.Credentials{User: "u", Password: "p", Database: "d"})
			var urls []string
			for _, v := range env {
				if _, ok := engines.URLVar([]engines.EnvVar{v}); ok {
					urls = append(urls, v.Name)
					assert.True(t, v.Secret, "%s holds the password", v.Name)
				}
			}
			require.Len(t, urls, 1)
			assert.Equal(t, urls[0], engines.Default.URLName(name, "P"))
		})
	}
	assert.Empty(t, engines.Default.URLName("mysql", "P"), "an unknown engine has no URL")
}

// password is shaped like a generated one, so that a leak would show.
const password = "0123456789abcdef0123456789abcdef"

// loginURL is engine's emitted URL for a server at addr.
func loginURL(t *testing.T, engine, addr string) string {
	t.Helper()
	e, ok := engines.Default.Lookup(engine)
	require.True(t, ok)
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	v, ok := engines.URLVar(e.Env("P", engines.Endpoint{Host: host, Port: p}, engines.Credentials{User: "sandbox", Password: password, Database: "sandbox"}))
	require.True(t, ok)
	return v.Value
}

// TestLoginWhereNoServerIs: a login to a port that refuses, and to one
// that accepts and never answers, fails within its context (at once when
// refused), with an error that names the engine and the address and never
// the password. No server is needed: the logins against real servers are
// the integration and fault tests'.
func TestLoginWhereNoServerIs(t *testing.T) {
	servers := []struct {
		name  string
		addr  func(t *testing.T) string
		limit time.Duration
	}{
		{"Refused", func(t *testing.T) string { return strings.TrimPrefix(testkit.RefusedTCP(t), "tcp://") }, 2 * time.Second},
		{"NeverAnswers", func(t *testing.T) string { return strings.TrimPrefix(testkit.Hung(t, "tcp"), "tcp://") }, 3 * time.Second},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			for _, name := range engines.Default.Names() {
				t.Run(name, func(t *testing.T) {
					addr := srv.addr(t)
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					start := time.Now()
					s, err := engines.Default.Login(ctx, name, loginURL(t, name, addr))
					took := time.Since(start)
					require.Error(t, err)
					t.Logf("after %s: %v", took.Round(time.Millisecond), err)
					assert.Less(t, took, srv.limit)
					assert.Contains(t, err.Error(), name+": login to "+addr)
					assert.NotContains(t, err.Error(), password)
					assert.NotEmpty(t, s.Client, "the session names its client even when the login fails")
				})
			}
		})
	}
}

func TestRegistryLogin(t *testing.T) {
	ctx := context.Background()
	_, err := engines.Default.Login(ctx, "mysql", "mysql://x")
	assert.ErrorContains(t, err, `unknown engine "mysql"`)
	assert.ErrorIs(t, err, engines.ErrNotLinked)

	// Embedding the interface promotes only the Engine methods: no login.
	type noLogin struct{ engines.Engine }
	reg := engines.MustRegistry(noLogin{redis.Engine{}})
	_, err = reg.Login(ctx, "redis", "redis://:pw@127.0.0.1:1/0")
	assert.True(t, errors.Is(err, engines.ErrNoLogin), "%v", err)
}
