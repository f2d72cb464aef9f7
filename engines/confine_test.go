package engines_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	_ "github.com/roboco/sandboxer/engines/all"
	"github.com/roboco/sandboxer/runtime"
)

// TestEveryEngineDeclaresItsCapabilities: every registered engine names
// the capabilities its entrypoint needs (at least to chown its data and
// become its server's user), and the port accepts them as they are.
func TestEveryEngineDeclaresItsCapabilities(t *testing.T) {
	for _, name := range engines.Default.Names() {
		t.Run(name, func(t *testing.T) {
			e, ok := engines.Default.Lookup(name)
			require.True(t, ok)
			caps := e.Spec().Capabilities
			assert.Subset(t, caps, []string{"CHOWN", "SETGID", "SETUID"}, "what every entrypoint needs")
			spec, err := runtime.RunSpec{Image: "i", Capabilities: caps}.Normalize()
			require.NoError(t, err)
			assert.ElementsMatch(t, caps, spec.Capabilities, "already in the port's form")
		})
	}
}
