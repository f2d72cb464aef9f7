package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/runtime"
)

// wrapper embeds a runtime and says so (runtime.Unwrapper).
type wrapper struct{ runtime.ContainerRuntime }

func (w wrapper) Unwrap() runtime.ContainerRuntime { return w.ContainerRuntime }

// opaque embeds a runtime and does not say so: only the port's verbs.
type opaque struct{ runtime.ContainerRuntime }

// TestAsFindsAnOptionalInterfaceThroughWrappers: As finds the image store
// of the runtime itself and of one wrapped twice, and none behind a
// wrapper that does not unwrap, nor of nil.
func TestAsFindsAnOptionalInterfaceThroughWrappers(t *testing.T) {
	f := fakeruntime.New()
	defer f.Close()

	s, ok := runtime.As[runtime.ImageStore](f)
	assert.True(t, ok, "the runtime itself")
	assert.Same(t, f, s)

	s, ok = runtime.As[runtime.ImageStore](wrapper{wrapper{f}})
	assert.True(t, ok, "through two wrappers")
	assert.Same(t, f, s)

	_, ok = runtime.As[runtime.ImageStore](opaque{f})
	assert.False(t, ok, "a wrapper that does not unwrap hides it")
	_, ok = runtime.As[runtime.ImageStore](wrapper{opaque{f}})
	assert.False(t, ok, "nor further down")
	_, ok = runtime.As[runtime.ImageStore](nil)
	assert.False(t, ok, "nil has none")
}
