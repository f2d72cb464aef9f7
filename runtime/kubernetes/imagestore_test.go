package kubernetes

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/roboco/sandboxer/runtime"
)

// TestHasNoImageStore: the kubelet pulls at Run and the API has no image
// store, so the adapter does not implement runtime.ImageStore, and the
// provisioner, asking by type, lets Run pull.
func TestHasNoImageStore(t *testing.T) {
	var rt runtime.ContainerRuntime = (*Runtime)(nil)
	_, ok := runtime.As[runtime.ImageStore](rt)
	assert.False(t, ok)
}
