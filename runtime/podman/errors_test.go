package podman

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// apiErr is an error as Process decodes a libpod error answer.
func apiErr(code int, cause, msg string) error {
	return &errorModel{ResponseCode: code, Because: cause, Message: msg}
}

// The answers below are what Podman 4.3.1 sends (recorded against the
// Debian service).
func TestKindOf(t *testing.T) {
	cases := []struct {
		name string
		op   string
		err  error
		want error
	}{
		{
			name: "InspectAbsent",
			op:   runtime.OpInspect,
			err:  apiErr(404, "no such container", `no container with name or ID "x" found: no such container`),
			want: runtime.ErrNotFound,
		},
		{
			name: "DuplicateNameIsA500",
			op:   runtime.OpRun,
			err: apiErr(500, "that name is already in use",
				`creating container storage: the container name "x" is already in use by 1728b1ed. You have to remove that container to be able to reuse that name: that name is already in use`),
			want: runtime.ErrAlreadyExists,
		},
		{
			name: "CreateAbsentImageIsA500",
			op:   runtime.OpCreate,
			err:  apiErr(500, "image not known", "sandboxer-conformance/absent-x:none: image not known"),
			want: runtime.ErrImageNotFound,
		},
		{
			name: "ImageNotKnownOutsideCreateIsNotFound",
			op:   runtime.OpInspect,
			err:  apiErr(404, "image not known", "x: image not known"),
			want: runtime.ErrNotFound,
		},
		{
			name: "NetworkDuplicate",
			op:   runtime.OpCreateNetwork,
			err:  apiErr(409, "network already exists", "network name n already used: network already exists"),
			want: runtime.ErrAlreadyExists,
		},
		{
			name: "RemoveNetworkInUseIsA500",
			op:   runtime.OpRemoveNetwork,
			err: apiErr(500, "network is being used",
				`"n" has associated containers with it. Use -f to forcibly delete containers and pods: network is being used`),
			want: runtime.ErrInUse,
		},
		{
			name: "RemoveNetworkConflict",
			op:   runtime.OpRemoveNetwork,
			err:  apiErr(409, "network is being used", "network is being used"),
			want: runtime.ErrInUse,
		},
		{
			name: "SubnetInUseHasNoKind",
			op:   runtime.OpCreateNetwork,
			err:  apiErr(500, "subnet 10.213.200.0/26 is already used on the host or by another config", "subnet 10.213.200.0/26 is already used on the host or by another config"),
			want: nil,
		},
		{
			name: "RunOnAbsentNetwork",
			op:   runtime.OpRun,
			err:  apiErr(404, "network not found", "unable to find network with name or ID n: network not found"),
			want: runtime.ErrNotFound,
		},
		{
			name: "ExecInStoppedContainerHasNoKind",
			op:   runtime.OpExec,
			err:  apiErr(500, "container state improper", "can only create exec sessions on running containers: container state improper"),
			want: nil,
		},
		{
			name: "ConflictOutsideCreateHasNoKind",
			op:   runtime.OpKill,
			err:  apiErr(409, "container state improper", "can only kill running containers"),
			want: nil,
		},
		{
			name: "AnyPullFailureIsImageNotFound",
			op:   runtime.OpPull,
			err:  errors.New("initializing source docker://127.0.0.1:1/none/none:1: pinging container registry"),
			want: runtime.ErrImageNotFound,
		},
		{
			name: "RefusedIsUnavailable",
			op:   runtime.OpPull,
			err:  &url.Error{Op: "Get", URL: "http://d/_ping", Err: &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED}},
			want: runtime.ErrUnavailable,
		},
		{
			name: "MissingSocketIsUnavailable",
			op:   runtime.OpInspect,
			err:  fmt.Errorf("dial: %w", syscall.ENOENT),
			want: runtime.ErrUnavailable,
		},
		{
			name: "CallerGaveUp",
			op:   runtime.OpInspect,
			err:  fmt.Errorf("request: %w", context.Canceled),
			want: nil,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, kindOf(tc.op, tc.err))
		})
	}
}

func TestTranslate(t *testing.T) {
	t.Run("NamesRuntimeVerbObjectAndStatus", func(t *testing.T) {
		err := translate("unix:///run/podman/podman.sock", runtime.OpInspect, "box",
			apiErr(404, "no such container", `no container with name or ID "box" found: no such container`))
		require.Error(t, err)
		assert.ErrorIs(t, err, runtime.ErrNotFound)
		assert.Equal(t, `podman: inspect box: not found: no container with name or ID "box" found: no such container (HTTP 404)`, err.Error())
		var re *runtime.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, Name, re.Runtime)
		assert.Equal(t, runtime.OpInspect, re.Op)
		assert.Equal(t, "box", re.Object)
		var em *errorModel
		assert.ErrorAs(t, err, &em, "the service's error stays reachable")
	})
	t.Run("UnavailableNamesTheEndpoint", func(t *testing.T) {
		err := translate("unix:///x.sock", runtime.OpList, "", fmt.Errorf("dial: %w", syscall.ECONNREFUSED))
		assert.ErrorIs(t, err, runtime.ErrUnavailable)
		assert.Contains(t, err.Error(), "unix:///x.sock")
	})
	t.Run("AlreadyTranslatedIsKept", func(t *testing.T) {
		orig := runtime.NewError(Name, runtime.OpRun, "box", runtime.ErrUnsupported, errors.New("limits"))
		assert.Same(t, orig, translate("e", runtime.OpInspect, "other", orig))
	})
	t.Run("NilStaysNil", func(t *testing.T) {
		assert.NoError(t, translate("e", runtime.OpInspect, "box", nil))
	})
}

// TestHostPortBusy: the start errors that mean "a host port to publish was
// taken", as the services send them. Podman 4.3.1's were recorded against
// the Debian service; rootlessport's and pasta's are those of rootless
// Podman 4 and 5.
func TestHostPortBusy(t *testing.T) {
	cases := []struct {
		name     string
		err      error
		wantBusy bool
		wantAddr string
		wantPort int
	}{
		{
			name:     "RootfulTCP",
			err:      apiErr(500, "address already in use", "cannot listen on the TCP port: listen tcp4 127.0.0.1:38389: bind: address already in use"),
			wantBusy: true, wantAddr: "127.0.0.1:38389", wantPort: 38389,
		},
		{
			name:     "RootfulUDP",
			err:      apiErr(500, "address already in use", "cannot listen on the UDP port: listen udp4 127.0.0.1:39873: bind: address already in use"),
			wantBusy: true, wantAddr: "127.0.0.1:39873", wantPort: 39873,
		},
		{
			name:     "WrappedByTheAdapter",
			err:      fmt.Errorf("start: %w", apiErr(500, "address already in use", "cannot listen on the TCP port: listen tcp4 127.0.0.1:38389: bind: address already in use")),
			wantBusy: true, wantAddr: "127.0.0.1:38389", wantPort: 38389,
		},
		{
			name: "Rootlessport",
			err: apiErr(500, "rootlessport listen tcp 127.0.0.1:54322: bind: address already in use",
				"rootlessport listen tcp 127.0.0.1:54322: bind: address already in use"),
			wantBusy: true, wantAddr: "127.0.0.1:54322", wantPort: 54322,
		},
		{
			name: "Pasta",
			err: apiErr(500, "pasta failed with exit code 1:\nFailed to bind port 8080 (Address already in use) for option '-t 8080-8080:8080-8080'",
				"pasta failed with exit code 1:\nFailed to bind port 8080 (Address already in use) for option '-t 8080-8080:8080-8080'"),
			wantBusy: true, wantAddr: "8080", wantPort: 8080,
		},
		{
			name:     "BusyWithoutAnAddress",
			err:      apiErr(500, "address already in use", "setting up the network: address already in use"),
			wantBusy: true,
		},
		{
			name: "StartFailureOfAnotherKind",
			err: apiErr(500, "OCI runtime attempted to invoke a command that was not found",
				`runc: runc create failed: unable to start container process: exec: "/nonexistent/binary": stat /nonexistent/binary: no such file or directory: OCI runtime attempted to invoke a command that was not found`),
		},
		{
			name: "NotAnAPIError",
			err:  errors.New("listen tcp4 127.0.0.1:1: bind: address already in use"),
		},
		{name: "Nil"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, port, busy := hostPortBusy(tc.err)
			assert.Equal(t, tc.wantBusy, busy, "busy")
			assert.Equal(t, tc.wantAddr, addr, "addr")
			assert.Equal(t, tc.wantPort, port, "port")
		})
	}
}

// TestNetworkCreateCauses: the three refusals of a network create that
// CreateNetwork answers itself, as Podman 4.3.1 words them.
func TestNetworkCreateCauses(t *testing.T) {
	inUse := apiErr(500, "subnet 10.213.200.0/26 is already used on the host or by another config",
		"subnet 10.213.200.0/26 is already used on the host or by another config")
	strict := apiErr(500, "invalid syntax", `strconv.ParseBool: parsing "strict": invalid syntax`)
	assert.True(t, subnetInUse(inUse))
	assert.False(t, subnetInUse(strict))
	assert.True(t, strictUnknown(strict))
	assert.False(t, strictUnknown(inUse))
	assert.False(t, subnetInUse(errors.New("subnet is already used on the host or by another config")), "only the service's answer")
	// As the CI's rootful service answered a create while another
	// test's bridge went away (TestProvisionTimings, 2026-12-03).
	gone := apiErr(500, "route ip+net: no such network interface", "route ip+net: no such network interface")
	assert.True(t, interfaceGone(gone))
	assert.False(t, interfaceGone(inUse))
	assert.False(t, subnetInUse(gone))
}

// TestForwardDropsBridged: FORWARD as `iptables -S FORWARD` printed it on
// the test host (Docker's DROP policy), with and without the same-bridge
// rule of hack/env/podman.sh.
func TestForwardDropsBridged(t *testing.T) {
	docker := "-P FORWARD DROP\n-A FORWARD -j DOCKER-USER\n-A FORWARD -j DOCKER-ISOLATION-STAGE-1\n" +
		"-A FORWARD -j NETAVARK_ISOLATION_1\n-A FORWARD -m comment --comment \"netavark firewall plugin rules\" -j NETAVARK_FORWARD\n"
	withRule := "-P FORWARD DROP\n-A FORWARD -i podman+ -m physdev --physdev-is-bridged -m comment --comment \"sandboxer: podman same-bridge\" -j ACCEPT\n" +
		"-A FORWARD -j DOCKER-USER\n"
	assert.True(t, forwardDropsBridged("1\n", docker))
	assert.False(t, forwardDropsBridged("1\n", withRule))
	assert.False(t, forwardDropsBridged("0\n", docker), "frames bridged within one bridge skip iptables")
	assert.False(t, forwardDropsBridged("1\n", "-P FORWARD ACCEPT\n"))
}
