package containerd

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/runtime"
)

// TestUnreachableAddress: New succeeds for a daemon that is not there, and
// every verb then fails within 2 s with ErrUnavailable naming the address.
func TestUnreachableAddress(t *testing.T) {
	open := func(t *testing.T, ep adaptertest.Endpoint, address string) runtime.ContainerRuntime {
		var opts []Option
		if option := ep.Place(t, EnvAddress, address); option != "" {
			opts = append(opts, WithAddress(option))
		}
		opts = append(opts, WithStateDir(t.TempDir()))
		r, err := New(opts...)
		require.NoError(t, err, "New must not contact the daemon")
		assert.Equal(t, address, r.Endpoint())
		return r
	}
	adaptertest.Unreachable(t, open,
		adaptertest.Endpoint{Name: "MissingSocketFromEnv", Addr: missingSocket, Env: true},
		adaptertest.Endpoint{Name: "MissingSocketFromOption", Addr: missingSocket},
		adaptertest.Endpoint{Name: "NotASocket", Addr: func(t *testing.T) string { return t.TempDir() }},
		adaptertest.Endpoint{Name: "HungDaemon", Addr: hungSocket},
	)
}

// missingSocket is a socket path where nothing is.
func missingSocket(t *testing.T) string {
	return filepath.Join(t.TempDir(), "containerd.sock")
}

// hungSocket is the path of a unix socket that accepts connections and
// never answers.
func hungSocket(t *testing.T) string {
	return strings.TrimPrefix(adaptertest.Hung(t, "unix"), "unix://")
}
