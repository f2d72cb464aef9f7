package all_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	_ "github.com/roboco/sandboxer/runtime/all"
	"github.com/roboco/sandboxer/runtime/containerd"
	"github.com/roboco/sandboxer/runtime/detect"
	"github.com/roboco/sandboxer/runtime/docker"
	"github.com/roboco/sandboxer/runtime/kubernetes"
	"github.com/roboco/sandboxer/runtime/podman"
)

func TestLinksEveryAdapter(t *testing.T) {
	assert.Equal(t, detect.Choosable(), detect.Linked())
}

// TestDetectionFindsEachRuntimeWhereItsAdapterLooks: detection knows where
// every runtime is found without importing it, so a runtime whose adapter
// is not linked is still reported; those places are the adapters' own.
func TestDetectionFindsEachRuntimeWhereItsAdapterLooks(t *testing.T) {
	assert.Equal(t, docker.Name, detect.Docker)
	assert.Equal(t, podman.Name, detect.Podman)
	assert.Equal(t, containerd.Name, detect.Containerd)
	assert.Equal(t, kubernetes.Name, detect.Kubernetes)
	assert.Equal(t, containerd.DefaultAddress, detect.ContainerdSocket)
	assert.Equal(t, containerd.EnvAddress, detect.EnvContainerdAddress)
	assert.Equal(t, containerd.EnvNamespace, detect.EnvContainerdNamespace)
	assert.Equal(t, kubernetes.EnvNamespace, detect.EnvKubernetesNamespace)
	for _, name := range detect.Choosable() {
		assert.Equal(t, "github.com/roboco/sandboxer/runtime/"+name, detect.Import(name))
	}
}
