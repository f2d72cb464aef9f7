package docker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// connectionFailed returns the error the docker client itself gives for a
// daemon that is not there (its type is unexported, so ask the client).
func connectionFailed(t *testing.T, host string) error {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.Ping(context.Background())
	require.Error(t, err)
	require.True(t, client.IsErrConnectionFailed(err), "precondition: %v is a connection failure", err)
	return err
}

func TestTranslate(t *testing.T) {
	const endpoint = "unix:///nonexistent.sock"
	notFound := cerrdefs.ErrNotFound.WithMessage("Error response from daemon: No such container: c1")
	conflict := cerrdefs.ErrConflict.WithMessage(`Error response from daemon: Conflict. The container name "/c1" is already in use`)
	already := &runtime.Error{Runtime: Name, Op: runtime.OpRun, Object: "c1", Kind: runtime.ErrUnsupported}

	tests := []struct {
		name     string
		op       string
		err      error
		wantKind error // nil: unclassified
		wantIs   []error
		wantMsg  []string
	}{
		{name: "NotFoundContainer", op: runtime.OpInspect, err: notFound, wantKind: runtime.ErrNotFound, wantMsg: []string{"docker: inspect c1: not found", "No such container"}},
		{name: "NotFoundWrapped", op: runtime.OpStop, err: fmt.Errorf("stopping: %w", notFound), wantKind: runtime.ErrNotFound},
		{name: "MissingImageOnRun", op: runtime.OpRun, err: cerrdefs.ErrNotFound.WithMessage("Error response from daemon: No such image: busybox:nope"), wantKind: runtime.ErrImageNotFound},
		{name: "MissingImageOnCreate", op: runtime.OpCreate, err: cerrdefs.ErrNotFound.WithMessage("Error response from daemon: No such image: busybox:nope"), wantKind: runtime.ErrImageNotFound},
		{name: "MissingNetworkOnRun", op: runtime.OpRun, err: cerrdefs.ErrNotFound.WithMessage("Error response from daemon: network nope not found"), wantKind: runtime.ErrNotFound},
		{name: "ConflictOnRunIsAlreadyExists", op: runtime.OpRun, err: conflict, wantKind: runtime.ErrAlreadyExists},
		{name: "ConflictOnCreateIsAlreadyExists", op: runtime.OpCreate, err: conflict, wantKind: runtime.ErrAlreadyExists},
		{name: "ConflictOnNetworkCreateIsAlreadyExists", op: runtime.OpCreateNetwork, err: cerrdefs.ErrConflict.WithMessage("network with name n1 already exists"), wantKind: runtime.ErrAlreadyExists},
		{name: "ActiveEndpointsOnNetworkRemoveIsInUse", op: runtime.OpRemoveNetwork, err: cerrdefs.ErrPermissionDenied.WithMessage("error while removing network: network n1 id 0123 has active endpoints"), wantKind: runtime.ErrInUse},
		{name: "ConflictOnNetworkRemoveIsInUse", op: runtime.OpRemoveNetwork, err: cerrdefs.ErrConflict.WithMessage("network n1 has active endpoints"), wantKind: runtime.ErrInUse},
		{name: "ForbiddenElsewhereIsUnclassified", op: runtime.OpCreateNetwork, err: cerrdefs.ErrPermissionDenied.WithMessage("Pool overlaps with other one on this address space"), wantKind: nil},
		{name: "AlreadyExistsOnRun", op: runtime.OpRun, err: cerrdefs.ErrAlreadyExists, wantKind: runtime.ErrAlreadyExists},
		{name: "ConflictOnExecIsUnclassified", op: runtime.OpExec, err: cerrdefs.ErrConflict.WithMessage("Container c1 is not running"), wantKind: nil, wantMsg: []string{"is not running"}},
		{name: "ConnectionFailed", op: runtime.OpList, err: connectionFailed(t, endpoint), wantKind: runtime.ErrUnavailable, wantMsg: []string{endpoint}},
		{name: "UnavailableWithoutEndpointGetsIt", op: runtime.OpList, err: cerrdefs.ErrUnavailable, wantKind: runtime.ErrUnavailable, wantMsg: []string{"endpoint " + endpoint}},
		{name: "ConnectionFailedOnPullIsUnavailable", op: runtime.OpPull, err: connectionFailed(t, endpoint), wantKind: runtime.ErrUnavailable},
		{name: "PullHTTPError", op: runtime.OpPull, err: cerrdefs.ErrNotFound.WithMessage("manifest unknown"), wantKind: runtime.ErrImageNotFound},
		{name: "PullStreamError", op: runtime.OpPull, err: &jsonmessage.JSONError{Message: "manifest for 127.0.0.1:5000/nope:latest not found"}, wantKind: runtime.ErrImageNotFound, wantMsg: []string{"manifest for"}},
		{name: "PullInvalidReference", op: runtime.OpPull, err: cerrdefs.ErrInvalidArgument.WithMessage("invalid reference format"), wantKind: runtime.ErrImageNotFound},
		{name: "CanceledIsUnclassified", op: runtime.OpPull, err: context.Canceled, wantKind: nil, wantIs: []error{context.Canceled}},
		{name: "DeadlineIsUnclassified", op: runtime.OpInspect, err: context.DeadlineExceeded, wantKind: nil, wantIs: []error{context.DeadlineExceeded}},
		{name: "InternalIsUnclassified", op: runtime.OpRun, err: cerrdefs.ErrInternal.WithMessage("OCI runtime create failed"), wantKind: nil},
		{name: "UnknownIsUnclassified", op: runtime.OpRemove, err: errors.New("boom"), wantKind: nil, wantMsg: []string{"docker: remove c1: boom"}},
		{name: "AlreadyTranslatedIsKept", op: runtime.OpInspect, err: already, wantKind: runtime.ErrUnsupported, wantMsg: []string{"docker: run c1"}},
	}
	kinds := []error{runtime.ErrNotFound, runtime.ErrAlreadyExists, runtime.ErrUnavailable, runtime.ErrImageNotFound, runtime.ErrUnsupported, runtime.ErrInUse}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := translate(endpoint, tc.op, "c1", tc.err)
			var re *runtime.Error
			require.ErrorAs(t, got, &re)
			assert.Equal(t, Name, re.Runtime)
			assert.Equal(t, tc.wantKind, re.Kind)
			for _, k := range kinds {
				assert.Equal(t, k == tc.wantKind, errors.Is(got, k), "errors.Is(%v)", k)
			}
			for _, target := range tc.wantIs {
				assert.ErrorIs(t, got, target)
			}
			assert.ErrorIs(t, got, tc.err, "the cause stays reachable")
			for _, m := range tc.wantMsg {
				assert.Contains(t, got.Error(), m)
			}
		})
	}

	t.Run("NilStaysNil", func(t *testing.T) {
		assert.NoError(t, translate(endpoint, runtime.OpInspect, "c1", nil))
	})
}

// daemonError is a failed start as the docker client returns it: the
// daemon's 500 answer, typed as an internal error.
func daemonError(msg string) error {
	return cerrdefs.ErrInternal.WithMessage("Error response from daemon: " + msg)
}

// TestHostPortBusy: the start errors that mean "a host port to publish was
// taken". Docker 20.10's were recorded against the test VM's daemon
// (API 1.41); those of Docker 28 and older proxies are as users reported
// them.
func TestHostPortBusy(t *testing.T) {
	cases := []struct {
		name     string
		err      error
		wantBusy bool
		wantAddr string
		wantPort int
	}{
		{
			name: "UserlandProxyTCP",
			err: daemonError("driver failed programming external connectivity on endpoint sbxprobe-d4 (9d3d44e0a3744b07cd688ba5b62c57bfd4c99519bb618135c9ed526bb55ec534): " +
				"Error starting userland proxy: listen tcp4 127.0.0.1:39871: bind: address already in use"),
			wantBusy: true, wantAddr: "127.0.0.1:39871", wantPort: 39871,
		},
		{
			name: "UserlandProxyUDP",
			err: daemonError("driver failed programming external connectivity on endpoint sbxprobe-d5 (4241024da9b51adb0cca8483334ded7fdbd8559c67741fbde123cbdf2fed9ad8): " +
				"Error starting userland proxy: listen udp4 127.0.0.1:39873: bind: address already in use"),
			wantBusy: true, wantAddr: "127.0.0.1:39873", wantPort: 39873,
		},
		{
			name: "AllocatedToAnotherContainer",
			err: daemonError("driver failed programming external connectivity on endpoint sbxprobe-d3 (f559001800850d99aa33dd2cdfe01c8486f3570be9939448c698fd3a52214f8b): " +
				"Bind for 127.0.0.1:39872 failed: port is already allocated"),
			wantBusy: true, wantAddr: "127.0.0.1:39872", wantPort: 39872,
		},
		{
			name: "Docker28PortMapper",
			err: daemonError("failed to set up container networking: driver failed programming external connectivity on endpoint WinBoat (d5bda004c9be51ea36bfa876e0bd4f9bb118c85d9bba9bc05e5dd4546c409b91): " +
				"failed to bind host port for 0.0.0.0:7148:172.18.0.2:7148/tcp: address already in use"),
			wantBusy: true, wantAddr: "0.0.0.0:7148", wantPort: 7148,
		},
		{
			name:     "Docker28PortMapperShort",
			err:      daemonError("failed to bind host port for 0.0.0.0:11434: address already in use"),
			wantBusy: true, wantAddr: "0.0.0.0:11434", wantPort: 11434,
		},
		{
			name: "OldProxyEADDRINUSE",
			err: daemonError("driver failed programming external connectivity on endpoint nginx-proxy (669659d666e6b6164716c6009cc1f1b413f2130e8d6238db341769bce23620fa): " +
				"Error starting userland proxy: Bind for 0.0.0.0:80: unexpected error (Failure EADDRINUSE)"),
			wantBusy: true, wantAddr: "0.0.0.0:80", wantPort: 80,
		},
		{
			name:     "WrappedByTheAdapter",
			err:      fmt.Errorf("start: %w", daemonError("driver failed programming external connectivity on endpoint x (1): Error starting userland proxy: listen tcp4 127.0.0.1:39871: bind: address already in use")),
			wantBusy: true, wantAddr: "127.0.0.1:39871", wantPort: 39871,
		},
		{
			name: "NotBindableIsNotBusy",
			err: daemonError("driver failed programming external connectivity on endpoint bind (46ab9155dd1cdf9c0d5ba344a2d23840171eaff94a57e82a4dca8ee58bf64663): " +
				"Error starting userland proxy: listen tcp 172.17.42.1:10000: bind: cannot assign requested address"),
		},
		{
			name: "StartFailureOfAnotherKind",
			err: cerrdefs.ErrInvalidArgument.WithMessage(`Error response from daemon: failed to create shim task: OCI runtime create failed: runc create failed: ` +
				`unable to start container process: exec: "/nonexistent/binary": stat /nonexistent/binary: no such file or directory: unknown`),
		},
		{name: "Nil"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, port, busy := hostPortBusy(tc.err)
			assert.Equal(t, tc.wantBusy, busy, "busy")
			assert.Equal(t, tc.wantAddr, addr, "addr")
			assert.Equal(t, tc.wantPort, port, "port")
			if busy {
				assert.Nil(t, kindOf(runtime.OpRun, tc.err), "a taken port keeps its kind: none")
			}
		})
	}
}
