package sandboxtest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/sandboxtest"
)

// TestSharedSandboxPerEndpoint: two Options that differ only in the
// endpoint detection is given (rootful and rootless Podman) get a shared
// sandbox each, on its own runtime, as each runtime's own CLI lists them.
func TestSharedSandboxPerEndpoint(t *testing.T) {
	rootful := testruntimes.Connect(t, "podman")
	rootless := testruntimes.Connect(t, testenv.PodmanRootless)
	prefix := "sbt" + testkit.RandomHex(4)
	key := prefix + ".sandbox"
	both := []testruntimes.Runtime{rootful, rootless}
	for _, r := range both {
		testenv.Image(t, r.Name, "redis")
		testkit.CleanupLabelled(t, r.RT, map[string]string{key: "1"})
	}
	t.Cleanup(func() {
		require.NoError(t, sandboxtest.Close())
		for _, r := range both {
			assert.Empty(t, r.LabelledNames(t, key, "1"), "Close tore down the shared sandbox on %s", r.Name)
		}
	})
	opts := func(r testruntimes.Runtime) sandboxtest.DBOptions {
		d := r.Detect
		d.ContainerHost, d.UnenforcedLimits, d.PingTimeout = r.RT.Endpoint(), true, 15*time.Second
		return sandboxtest.DBOptions{Options: sandboxtest.Options{LabelPrefix: prefix, Detect: d}}
	}
	dbs := make([]*sandboxtest.DB, len(both))
	for i, r := range both {
		dbs[i] = sandboxtest.NewDB(t, "redis", opts(r))
	}
	require.NotEqual(t, dbs[0].Container, dbs[1].Container, "a shared sandbox each")
	for i, r := range both {
		assert.Equal(t, []string{dbs[i].Container}, r.LabelledNames(t, key, "1"), "%s runs its own shared sandbox", r.Name)
	}

}
