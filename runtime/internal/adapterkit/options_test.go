package adapterkit

import (
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultSettings(t *testing.T) {
	s := DefaultSettings()
	assert.Equal(t, Settings{DialTimeout: DefaultDialTimeout, Logger: slog.Default()}, s)
}

func TestEndpoint(t *testing.T) {
	const env = "SANDBOXER_ADAPTERKIT_TEST_HOST"
	called := false
	fallback := func() string { called = true; return "unix:///default.sock" }

	t.Setenv(env, "unix:///env.sock")
	assert.Equal(t, "unix:///asked.sock", Endpoint("unix:///asked.sock", env, fallback), "asked beats the environment")
	assert.Equal(t, "unix:///env.sock", Endpoint("", env, fallback), "the environment beats the default")
	assert.False(t, called, "the default is not looked for when not needed")

	t.Setenv(env, "")
	assert.Equal(t, "unix:///default.sock", Endpoint("", env, fallback))
}

func TestDialer(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	t.Run("FixedAddressWhateverIsPassed", func(t *testing.T) {
		c, err := Dialer("unix", sock, time.Second)(t.Context(), "tcp", "api.moby.localhost:80")
		require.NoError(t, err)
		c.Close()
	})
	t.Run("PassedAddress", func(t *testing.T) {
		c, err := Dialer("unix", "", time.Second)(t.Context(), "unix", sock)
		require.NoError(t, err)
		c.Close()
	})
}

func TestSelectorString(t *testing.T) {
	assert.Equal(t, "", SelectorString(nil))
	assert.Equal(t, "a=1,b=,c=x y", SelectorString(map[string]string{"c": "x y", "a": "1", "b": ""}))
}

func TestEnvList(t *testing.T) {
	assert.Nil(t, EnvList(nil))
	assert.Equal(t, []string{"A=1", "B=two words", "C="}, EnvList(map[string]string{"C": "", "B": "two words", "A": "1"}))
}
