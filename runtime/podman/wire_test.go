package podman

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// The golden files in testdata/ are the libpod API's own words: the answers
// were recorded from the Podman 4.3.1 service (libpod API 4.3.1) of the
// test environment, and the requests are what it accepted. Decoding an
// answer into the adapter's wire types and comparing with what the
// adapter must read from it pins every field name the adapter relies on;
// encoding a request and comparing with the golden one pins every field
// name it sends.

// golden reads testdata/name.
func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// decodeGolden decodes testdata/name into a new T, refusing nothing: a
// field the service does not send stays zero, and the comparison with
// what the adapter must read catches it.
func decodeGolden[T any](t *testing.T, name string) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(golden(t, name), &v), "decode %s", name)
	return v
}

// goldenRunSpec is the spec whose SpecGenerator testdata/container_create.json
// holds (the service accepted it and started the container).
func goldenRunSpec(t *testing.T) runtime.RunSpec {
	t.Helper()
	spec, err := runtime.RunSpec{
		Name:         "sbx-golden-h12",
		Image:        "127.0.0.1:5055/sandboxer/busybox:ef735e4ba8bb",
		Env:          map[string]string{"SBX_A": "1", "SBX_B": "two words"},
		Entrypoint:   []string{"/bin/sh", "-c"},
		Command:      []string{"sleep 3600"},
		Labels:       map[string]string{"sbx.golden": "1", "sbx.golden.owner": "h12"},
		Tmpfs:        map[string]string{"/scratch": "rw,size=16m", "/data": ""},
		MemoryBytes:  64 << 20,
		CPUs:         0.5,
		PidsLimit:    64,
		Ulimits:      []runtime.Ulimit{{Name: "nofile", Soft: 1024, Hard: 2048}},
		Network:      "sbx-golden-net",
		Ports:        []runtime.PortSpec{{ContainerPort: 8080}, {ContainerPort: 53, Protocol: "udp", HostPort: 39999}},
		Capabilities: []string{"CHOWN", "SETUID"},
	}.Normalize()
	require.NoError(t, err)
	return spec
}

// goldenContainer is the container of the recorded answers, as both inspect
// and list report it.
func goldenContainer() runtime.Container {
	return runtime.Container{
		ID:    "f02aa471bd175439b453ef0f31d37a56884ff1be305646354e5d633f6b229f49",
		Name:  "sbx-golden-h12",
		Image: "127.0.0.1:5055/sandboxer/busybox:ef735e4ba8bb",
		Labels: map[string]string{
			"org.opencontainers.image.title": "sandboxer busybox stand-in", // the image's own
			"sbx.golden":                     "1",
			"sbx.golden.owner":               "h12",
		},
		State:   runtime.StateRunning,
		Created: time.Date(2026, 11, 30, 10, 28, 57, 985335496, time.UTC),
	}
}

// goldenPorts are the ports the recorded container published, in the
// order of the spec (ephemeral 8080/tcp got 36119).
var goldenPorts = []runtime.PortBinding{
	{ContainerPort: 8080, Protocol: "tcp", HostIP: "127.0.0.1", HostPort: 36119},
	{ContainerPort: 53, Protocol: "udp", HostIP: "127.0.0.1", HostPort: 39999},
}

func TestWireRequests(t *testing.T) {
	sg, _ := specFor(goldenRunSpec(t), map[string]uint64{"nofile": 4096, "nproc": 32768}, 90*time.Second)
	cases := []struct {
		golden string
		body   any
	}{
		{golden: "container_create.json", body: sg},
		{golden: "exec_create.json", body: execCreateConfig{
			AttachStdout: true, AttachStderr: true,
			Cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Env: []string{"SBX_C=3"},
		}},
		{golden: "exec_start.json", body: execStartConfig{}},
		{golden: "exec_remove.json", body: execRemoveConfig{Force: true}},
		{golden: "network_create.json", body: networkCreate{
			Name: "sbx-golden-net", Driver: "bridge", Labels: map[string]string{"sbx.golden": "1"},
			Internal: true, Options: map[string]string{"isolate": "true"},
			Subnets: []networkSubnet{{Subnet: "10.213.0.64/26", Gateway: "10.213.0.65"}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			got, err := json.Marshal(tc.body)
			require.NoError(t, err)
			assert.JSONEq(t, string(golden(t, tc.golden)), string(got))
		})
	}
	t.Run("list filters", func(t *testing.T) {
		got, err := json.Marshal(listFilters{Label: []string{"sbx.golden=1"}})
		require.NoError(t, err)
		assert.JSONEq(t, `{"label":["sbx.golden=1"]}`, string(got))
	})
}

func TestWireContainerCreateResponse(t *testing.T) {
	got := decodeGolden[createResponse](t, "container_create_response.json")
	assert.Equal(t, createResponse{ID: "f02aa471bd175439b453ef0f31d37a56884ff1be305646354e5d633f6b229f49", Warnings: []string{}}, got)
}

func TestWireContainerInspect(t *testing.T) {
	t.Run("Running", func(t *testing.T) {
		ci := decodeGolden[containerInspect](t, "container_inspect.json")
		require.NotNil(t, ci.HostConfig)
		assert.Equal(t, hostConfig{
			Memory: 64 << 20, NanoCPUs: 500_000_000, CPUQuota: 50_000, CPUPeriod: 100_000, PidsLimit: 64,
			Tmpfs: map[string]string{
				"/data":    "rw,rprivate,nosuid,nodev,tmpcopyup",
				"/scratch": "rw,size=16m,rprivate,nosuid,nodev,tmpcopyup",
			},
		}, *ci.HostConfig)
		assert.True(t, ci.State.Running)
		want := goldenContainer()
		want.Networks = map[string]string{"sbx-golden-net": "10.89.0.2"}
		// Inspect reports ports by port key ("53/udp" before "8080/tcp")
		// and mounts the tmpfs paths.
		want.Ports = []runtime.PortBinding{goldenPorts[1], goldenPorts[0]}
		want.Mounts = []runtime.Mount{
			{Type: "tmpfs", Source: "tmpfs", Destination: "/data"},
			{Type: "tmpfs", Source: "tmpfs", Destination: "/scratch"},
		}
		assert.Equal(t, want, ci.container())
	})
	t.Run("CreatedWithAnImageVolume", func(t *testing.T) {
		ci := decodeGolden[containerInspect](t, "container_inspect_created.json")
		c := ci.container()
		assert.Equal(t, runtime.StateCreated, c.State)
		assert.Equal(t, "sbx-golden-h12-vol", c.Name)
		assert.Equal(t, []runtime.Mount{{
			Type:        "volume",
			Source:      "598f7ccfa45d9ecbf78c922c51df1ccf263f04babfae81fc135a4ca95b051092",
			Destination: "/data",
		}}, c.Mounts, "an anonymous volume is named by its volume name")
		assert.Equal(t, map[string]string{"podman": ""}, c.Networks, "no address before the start")
		assert.Empty(t, c.Ports)
	})
}

func TestWireContainersList(t *testing.T) {
	listed := decodeGolden[[]listedContainer](t, "containers_list.json")
	require.Len(t, listed, 1)
	c, err := listed[0].container()
	require.NoError(t, err)
	want := goldenContainer()
	// A list names the networks without addresses, and no mounts.
	want.Networks = map[string]string{"sbx-golden-net": ""}
	want.Ports = goldenPorts
	assert.Equal(t, want, c)
}

func TestWireExec(t *testing.T) {
	assert.Equal(t, idResponse{ID: "fca3f4183012dfbf3571fd7a8947625b2dff031cfd4bd5d15ef4dfd14100751b"},
		decodeGolden[idResponse](t, "exec_create_response.json"))
	assert.Equal(t, execSession{ExitCode: 3, Running: false}, decodeGolden[execSession](t, "exec_inspect.json"))

	var stdout, stderr bytes.Buffer
	require.NoError(t, demux(bytes.NewReader(golden(t, "exec_start.stream")), &stdout, &stderr))
	assert.Equal(t, "out\n", stdout.String())
	assert.Equal(t, "err\n", stderr.String())
}

func TestWireNetworkCreateResponse(t *testing.T) {
	assert.Equal(t, networkReport{
		Name:    "sbx-golden-net",
		ID:      "f15d050a96837bfeae1ea55818c5a7a6c706b7ea7f4411c8085c57dc8be94a4e",
		Driver:  "bridge",
		Labels:  map[string]string{"sbx.golden": "1"},
		Subnets: []networkSubnet{{Subnet: "10.89.0.0/24", Gateway: "10.89.0.1"}},
	}, decodeGolden[networkReport](t, "network_create_response.json"))
}

// TestWireNetworksList: an internal, isolated network as Podman 4.3.1
// lists it, and the port's view of it.
func TestWireNetworksList(t *testing.T) {
	got := decodeGolden[[]networkReport](t, "networks_list.json")
	require.Len(t, got, 1)
	assert.Equal(t, runtime.Network{
		ID:       "7d943a80b2f8ffcaa38d436b459fa20298c375e19fb44f0e22876e8f10cf79fa",
		Name:     "i25p-probe",
		Labels:   map[string]string{"a": "b"},
		Internal: true,
		Subnet:   netip.MustParsePrefix("10.213.200.0/26"),
	}, toNetwork(got[0]))
}

func TestWireInfo(t *testing.T) {
	info := decodeGolden[infoReport](t, "info.json")
	assert.Equal(t, "v1", info.Host.CgroupVersion)
	assert.False(t, info.Host.Security.Rootless)
	assert.Equal(t, "/var/lib/containers/storage", info.Store.GraphRoot)
	assert.Equal(t, "4.3.1", info.Version.APIVersion)
	assert.Equal(t, "4.3.1", info.Version.Version)
}

func TestWireImagesPull(t *testing.T) {
	reports := func(t *testing.T, name string) []pullReport {
		var out []pullReport
		dec := json.NewDecoder(bytes.NewReader(golden(t, name)))
		for {
			var r pullReport
			err := dec.Decode(&r)
			if errors.Is(err, io.EOF) {
				return out
			}
			require.NoError(t, err)
			out = append(out, r)
		}
	}
	t.Run("Pulled", func(t *testing.T) {
		got := reports(t, "images_pull.json")
		require.Len(t, got, 7)
		assert.Equal(t, "Copying blob sha256:85882ad651a67f5d6f41c71df1b524e12f2e19e1c6ce5af53288418917e6fc83\n", got[2].Stream)
		const id = "30b4c895fb843df597f992b13834f51c49f2886c787a8f18813aca7c5715d801"
		assert.Equal(t, pullReport{Images: []string{id}, ID: id}, got[6])
	})
	t.Run("Failed", func(t *testing.T) {
		got := reports(t, "images_pull_error.json")
		require.Len(t, got, 2)
		assert.Contains(t, got[1].Error, "reading manifest none in 127.0.0.1:5055/sandboxer/absent: name unknown")
	})
}

// TestWireErrors: the service's error answers, as Process decodes them,
// get the kinds of errors.go.
func TestWireErrors(t *testing.T) {
	cases := []struct {
		golden     string
		status     int
		op         string
		want       error
		wantReason string
	}{
		{golden: "error_no_such_container.json", status: http.StatusNotFound, op: runtime.OpInspect, want: runtime.ErrNotFound, wantReason: causeNoSuchContainer},
		{golden: "error_name_in_use.json", status: http.StatusInternalServerError, op: runtime.OpRun, want: runtime.ErrAlreadyExists, wantReason: causeNameInUse},
		{golden: "error_image_not_known.json", status: http.StatusInternalServerError, op: runtime.OpCreate, want: runtime.ErrImageNotFound, wantReason: causeNoSuchImage},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			resp := &response{&http.Response{
				StatusCode: tc.status,
				Header:     http.Header{"Content-Type": {"application/json"}},
				Body:       io.NopCloser(bytes.NewReader(golden(t, tc.golden))),
			}}
			err := resp.Process(nil)
			require.Error(t, err)
			code, cause := status(err)
			assert.Equal(t, tc.status, code)
			assert.Contains(t, cause, tc.wantReason)
			assert.Equal(t, tc.want, kindOf(tc.op, err))
		})
	}
}

// TestProcess: how an answer is read whatever its status: a success is
// decoded (an empty body into nothing), a not-modified is a success, an
// error answer without the service's JSON is its text and status.
func TestProcess(t *testing.T) {
	answer := func(code int, body string) *response {
		return &response{&http.Response{StatusCode: code, Status: http.StatusText(code), Body: io.NopCloser(strings.NewReader(body))}}
	}
	var out struct{ Name string }
	require.NoError(t, answer(http.StatusOK, `{"Name":"x"}`).Process(&out))
	assert.Equal(t, "x", out.Name)
	require.NoError(t, answer(http.StatusNoContent, "").Process(&out))
	require.NoError(t, answer(http.StatusNotModified, "").Process(nil))
	assert.ErrorContains(t, answer(http.StatusOK, `{"Name":`).Process(&out), "decode the answer")

	err := answer(http.StatusBadGateway, "upstream gone\n").Process(nil)
	code, _ := status(err)
	assert.Equal(t, http.StatusBadGateway, code)
	assert.EqualError(t, err, "upstream gone")
	err = answer(http.StatusConflict, `{"cause":"name in use","message":"the name x is in use","response":409}`).Process(nil)
	code, cause := status(err)
	assert.Equal(t, http.StatusConflict, code)
	assert.Contains(t, cause, "name in use")
}
