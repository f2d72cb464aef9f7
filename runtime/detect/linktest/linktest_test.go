package linktest_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
	// The one adapter this test binary links.
	_ "github.com/roboco/sandboxer/runtime/docker"
)

// host is a fake host's environment and sockets; pings go to the real
// adapters (only docker's is linked).
func host(env map[string]string, sockets ...string) detect.Options {
	return detect.Options{
		Getenv:       func(k string) string { return env[k] },
		SocketExists: func(p string) bool { return slices.Contains(sockets, p) },
		SocketUsable: func(string) bool { return true },
		PingTimeout:  5 * time.Second,
	}
}

// nowhere is a docker endpoint that does not answer.
const nowhere = "unix:///nonexistent/sandboxer-linktest/docker.sock"

func TestLinkedIsWhatTheProgramImports(t *testing.T) {
	assert.Equal(t, []string{detect.Docker}, detect.Linked())
}

func TestExplicitRuntimeNotLinkedNamesTheImport(t *testing.T) {
	for _, name := range []string{detect.Containerd, detect.Podman, detect.Kubernetes} {
		t.Run(name, func(t *testing.T) {
			opts := host(map[string]string{"CONTAINERD_ADDRESS": "/nonexistent/containerd.sock", "CONTAINER_HOST": "unix:///nonexistent/podman.sock"})
			opts.Runtime = name
			sel, err := detect.Detect(context.Background(), opts)
			require.Error(t, err)
			assert.ErrorIs(t, err, detect.ErrNotLinked)
			assert.ErrorIs(t, err, runtime.ErrUnavailable)
			assert.Contains(t, err.Error(), `import _ "github.com/roboco/sandboxer/runtime/`+name+`"`)
			assert.Nil(t, sel.Runtime)
			require.NotEmpty(t, sel.Probes)
			for _, p := range sel.Probes {
				assert.Equal(t, detect.StatusNotLinked, p.Status, p.Candidate.String())
				assert.ErrorIs(t, p.Err, detect.ErrNotLinked)
			}
		})
	}
}

func TestAutoReportsAFoundRuntimeItDoesNotLink(t *testing.T) {
	// Podman's rootful socket exists, Docker is configured but does not
	// answer, containerd's socket is absent.
	opts := host(map[string]string{"DOCKER_HOST": nowhere}, detect.RootfulPodmanSocket)
	sel, err := detect.Detect(context.Background(), opts)
	require.Error(t, err)
	assert.ErrorIs(t, err, detect.ErrNotLinked)
	var ue *detect.UnavailableError
	require.True(t, errors.As(err, &ue))
	assert.Equal(t, []string{detect.Podman}, ue.NotLinked)
	assert.Contains(t, err.Error(), `import _ "github.com/roboco/sandboxer/runtime/podman"`)
	assert.NotContains(t, err.Error(), "runtime/containerd", "an absent runtime is not a missing import")

	status := map[string]detect.Status{}
	for _, p := range sel.Probes {
		status[p.Source] = p.Status
	}
	assert.Equal(t, detect.StatusFailed, status["DOCKER_HOST"], "the linked docker adapter was asked, and did not answer")
	assert.Equal(t, detect.StatusNotLinked, status["rootful Podman socket"])
	assert.Equal(t, detect.StatusAbsent, status["containerd socket"])
}

func TestDetectAllCountsANotLinkedRuntimeAsUnanswered(t *testing.T) {
	opts := host(map[string]string{"DOCKER_HOST": nowhere}, detect.RootfulPodmanSocket)
	s, err := detect.DetectAll(context.Background(), opts)
	require.Error(t, err)
	assert.ErrorIs(t, err, detect.ErrNotLinked)
	assert.Contains(t, err.Error(), `import _ "github.com/roboco/sandboxer/runtime/podman"`)
	var runtimes []string
	for _, p := range s.Unanswered() {
		runtimes = append(runtimes, p.Runtime+" "+string(p.Status))
	}
	assert.Equal(t, []string{"docker failed", "podman not linked"}, runtimes)
}

func TestConnectWithoutTheAdapterNamesTheImport(t *testing.T) {
	_, err := detect.Connect(detect.Candidate{Runtime: detect.Containerd, Endpoint: detect.ContainerdSocket}, nil)
	assert.ErrorIs(t, err, detect.ErrNotLinked)
	assert.Contains(t, err.Error(), `"github.com/roboco/sandboxer/runtime/containerd"`)
	_, err = detect.Connect(detect.Candidate{Runtime: "nerd"}, nil)
	assert.ErrorIs(t, err, detect.ErrUnknownRuntime)
	rt, err := detect.Connect(detect.Candidate{Runtime: detect.Docker, Endpoint: nowhere}, nil)
	require.NoError(t, err, "the linked adapter connects without contacting its runtime")
	assert.Equal(t, detect.Docker, rt.Name())
	rt.Close()
}

func TestRegisterRefusesUnknownAndDuplicateRuntimes(t *testing.T) {
	d := func(detect.Candidate, detect.ConnectOptions) (runtime.ContainerRuntime, error) { return nil, nil }
	assert.Panics(t, func() { detect.Register("nerd", d) })
	assert.Panics(t, func() { detect.Register(detect.Docker, d) }, "docker is registered already, by its adapter")
	assert.Equal(t, []string{detect.Docker}, detect.Linked())
}
