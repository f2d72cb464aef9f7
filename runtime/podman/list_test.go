package podman

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

func TestListedContainer(t *testing.T) {
	// An entry of GET /libpod/containers/json as Podman 4.3.1 sends it.
	const entry = `{"AutoRemove":false,"Command":["sleep","3600"],"Created":"2026-11-29T12:06:19.000864308Z",
		"CreatedAt":"","Exited":false,"ExitedAt":-62135596800,"ExitCode":0,
		"Id":"1728b1ed","Image":"localhost/sandboxer-dev/busybox:latest","ImageID":"80044f2e",
		"IsInfra":false,"Labels":{"sbx.h7":"1","sp":" a b = c "},"Mounts":[],"Names":["h7-scratch"],
		"Namespaces":{},"Networks":["podman"],"Pid":1234,"Pod":"","PodName":"",
		"Ports":[{"host_ip":"127.0.0.1","container_port":8080,"host_port":44553,"range":2,"protocol":"tcp"}],
		"Size":null,"StartedAt":1795000000,"State":"running","Status":""}`
	var lc listedContainer
	require.NoError(t, json.Unmarshal([]byte(entry), &lc))
	c, err := lc.container()
	require.NoError(t, err)
	assert.Equal(t, runtime.Container{
		ID:       "1728b1ed",
		Name:     "h7-scratch",
		Image:    "localhost/sandboxer-dev/busybox:latest",
		Labels:   map[string]string{"sbx.h7": "1", "sp": " a b = c "},
		State:    runtime.StateRunning,
		Created:  time.Date(2026, 11, 29, 12, 6, 19, 864308, time.UTC),
		Networks: map[string]string{"podman": ""},
		Ports: []runtime.PortBinding{
			{ContainerPort: 8080, Protocol: "tcp", HostIP: "127.0.0.1", HostPort: 44553},
			{ContainerPort: 8081, Protocol: "tcp", HostIP: "127.0.0.1", HostPort: 44554},
		},
	}, c)
}

func TestParseCreated(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want time.Time
	}{
		{name: "RFC3339", raw: `"2026-11-29T12:06:19Z"`, want: time.Date(2026, 11, 29, 12, 6, 19, 0, time.UTC)},
		{name: "UnixSeconds", raw: `1795000000`, want: time.Unix(1795000000, 0)},
		{name: "Absent", raw: ``, want: time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCreated(json.RawMessage(tc.raw))
			require.NoError(t, err)
			assert.True(t, tc.want.Equal(got), "got %v, want %v", got, tc.want)
		})
	}
}

func TestState(t *testing.T) {
	cases := map[string]runtime.State{
		"created": runtime.StateCreated, "configured": runtime.StateCreated, "initialized": runtime.StateCreated,
		"running": runtime.StateRunning, "stopping": runtime.StateRunning,
		"paused": runtime.StatePaused,
		"exited": runtime.StateExited, "stopped": runtime.StateExited,
		"removing": runtime.StateUnknown, "": runtime.StateUnknown,
	}
	for in, want := range cases {
		assert.Equal(t, want, state(in), "state(%q)", in)
	}
}
