package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
)

// mismatched is an engine whose server is set up with another password
// than the one it hands out: the real server never accepts the handed-out
// credentials. It records the handed-out passwords.
type mismatched struct {
	engines.Engine
	mu        *sync.Mutex
	handedOut *[]string
}

func (m mismatched) Container(cred engines.Credentials, lim engines.Limits, img engines.Image) engines.Container {
	m.mu.Lock()
	*m.handedOut = append(*m.handedOut, cred.Password)
	m.mu.Unlock()
	cred.Password = strings.Repeat("0", len(cred.Password))
	return m.Engine.Container(cred, lim, img)
}

func (m mismatched) Login(ctx context.Context, rawURL string) (engines.Session, error) {
	return m.Engine.(engines.WireChecker).Login(ctx, rawURL)
}

// TestWireCheckOfAServerThatNeverAcceptsThePassword: over the wire, a
// server that runs but never accepts the handed-out password fails the
// provision at its deadline with the real client's last error, the
// password redacted, and nothing left behind.
func TestWireCheckOfAServerThatNeverAcceptsThePassword(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx := testkit.Context(t, 3*time.Minute)
		e.Warm()
		for _, name := range engines.Default.Names() {
			t.Run(name, func(t *testing.T) {
				eng, ok := engines.Default.Lookup(name)
				require.True(t, ok)
				var handedOut []string
				m := mismatched{Engine: eng, mu: &sync.Mutex{}, handedOut: &handedOut}
				p, err := provision.New(e.RT, provision.Options{
					LabelPrefix:  e.Prefix,
					Images:       map[string]string{name: e.Images[name]},
					Getenv:       func(string) string { return "" },
					Registry:     engines.MustRegistry(m),
					Readiness:    provision.ReadinessWire,
					ReadyTimeout: 4 * time.Second,
				})
				require.NoError(t, err)
				id := e.Owner("wrongpw-" + name)
				_, err = p.Provision(ctx, id, []string{name})
				require.Error(t, err)
				assert.ErrorIs(t, err, provision.ErrNotReady)
				assert.ErrorContains(t, err, "over the wire")
				assert.ErrorContains(t, err, name+": login to 127.0.0.1:", "the real client's last error")
				m.mu.Lock()
				require.Len(t, handedOut, 1)
				assert.NotContains(t, err.Error(), handedOut[0], "the handed-out password in the error")
				m.mu.Unlock()
				assert.Empty(t, e.Owned(ctx, p, id), "rolled back")
				t.Logf("%s: %v", name, err)
			})
		}
	})
}
