package adaptertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// FullSpec is a Sleeper that asks for something of every field an
// adapter translates (env, tmpfs, memory, CPUs, pids, an rlimit, a network
// and a published port), for a test of how a spec lands in the backend.
func FullSpec(image string, labels map[string]string, network string) runtime.RunSpec {
	spec := Sleeper(image, "sandboxer-test-spec-"+testkit.RandomHex(4), labels)
	spec.Env = map[string]string{"SBX_A": "1", "SBX_B": "two words"}
	spec.Tmpfs = map[string]string{"/scratch": "rw,size=16m"}
	spec.MemoryBytes = 64 << 20
	spec.CPUs = 0.5
	spec.PidsLimit = 64
	spec.Ulimits = []runtime.Ulimit{{Name: "nofile", Soft: 1024, Hard: 2048}}
	spec.Network = network
	spec.Ports = []runtime.PortSpec{{ContainerPort: 8080}}
	return spec
}

// AssertRunReports checks what Run reported of the FullSpec spec it ran
// (after before): the name, image and labels asked for (the image's own
// labels may come too), running, an address on the network, the port on
// an ephemeral port of DefaultHostIP, the tmpfs, and no privilege.
func AssertRunReports(t *testing.T, spec runtime.RunSpec, c runtime.Container, before time.Time) {
	t.Helper()
	assert.NotEmpty(t, c.ID)
	assert.Equal(t, spec.Name, c.Name)
	assert.Equal(t, spec.Image, c.Image)
	for k, v := range spec.Labels {
		assert.Equal(t, v, c.Labels[k], "label %q (the image's own labels come too)", k)
	}
	assert.Equal(t, runtime.StateRunning, c.State)
	assert.True(t, c.Created.After(before), "created %v", c.Created)
	assert.NotEmpty(t, c.Networks[spec.Network], "address on %s", spec.Network)
	require.Len(t, c.Ports, 1)
	assert.Equal(t, runtime.PortBinding{ContainerPort: 8080, Protocol: "tcp", HostIP: runtime.DefaultHostIP, HostPort: c.Ports[0].HostPort}, c.Ports[0])
	assert.Positive(t, c.Ports[0].HostPort, "ephemeral port reported after start")
	assert.Contains(t, c.Mounts, runtime.Mount{Type: "tmpfs", Source: "tmpfs", Destination: "/scratch"})
	assert.False(t, c.Privileged)
}

// Network creates a labelled network removed at cleanup.
func Network(t *testing.T, r runtime.ContainerRuntime, labels map[string]string) string {
	t.Helper()
	return NetworkOf(t, r, runtime.NetworkSpec{Labels: labels}).Name
}

// NetworkOf creates a network of spec (named here) removed at cleanup,
// after the containers that carry spec.Labels.
func NetworkOf(t *testing.T, r runtime.ContainerRuntime, spec runtime.NetworkSpec) runtime.Network {
	t.Helper()
	name := "sandboxer-test-net-" + testkit.RandomHex(4)
	labels := spec.Labels
	spec.Name = name
	n, err := r.CreateNetwork(Ctx(t), spec)
	require.NoError(t, err)
	// Registered after Labels' cleanup, so it runs before it: remove the
	// containers first, or the network is still in use.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if cs, err := r.List(ctx, labels); err == nil {
			for _, c := range cs {
				_ = r.Remove(ctx, c.ID)
			}
		}
		if err := r.RemoveNetwork(ctx, name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return n
}

// AssertVersion checks what r's Version says of itself: its name and
// endpoint, the backend's version and API version, and the cgroup version
// of its host.
func AssertVersion(t *testing.T, r runtime.ContainerRuntime) {
	t.Helper()
	info, err := r.Version(Ctx(t))
	require.NoError(t, err)
	assert.Equal(t, r.Name(), info.Runtime)
	assert.Equal(t, r.Endpoint(), info.Endpoint)
	assert.NotEmpty(t, info.Version)
	assert.Regexp(t, `^\d+\.\d+`, info.APIVersion)
	assert.Contains(t, []string{"1", "2"}, info.CgroupVersion)
}
