package containerd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPlainHTTP(t *testing.T) {
	r := &Runtime{insecure: []string{"registry.internal:5000", "mirror.lan"}}
	cases := []struct {
		host string
		want bool
	}{
		{"127.0.0.1:5055", true},
		{"127.3.2.1:80", true},
		{"127.0.0.1", true},
		{"localhost:5000", true},
		{"[::1]:5000", true},
		{"registry.internal:5000", true},
		{"mirror.lan:443", true},
		{"mirror.lan", true},
		{"registry.internal:5001", false},
		{"docker.io", false},
		{"10.0.0.1:5000", false},
	}
	for _, tc := range cases {
		t.Run(tc.host, func(t *testing.T) {
			got, err := r.plainHTTP(tc.host)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestInsecureRegistriesFromEnv(t *testing.T) {
	t.Setenv(EnvInsecureRegistries, " mirror.lan:5000, ,other.lan")
	r, err := New(WithAddress("/nonexistent.sock"), WithInsecureRegistries("opt.lan"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	for _, host := range []string{"mirror.lan:5000", "other.lan:443", "opt.lan"} {
		got, err := r.plainHTTP(host)
		require.NoError(t, err)
		assert.True(t, got, host)
	}
	got, err := r.plainHTTP("mirror.lan:5001")
	require.NoError(t, err)
	assert.False(t, got, "another port of an insecure host:port")
}
