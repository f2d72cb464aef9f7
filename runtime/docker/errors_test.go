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
	already := &runtime.Error{Runtime: Name, Op: opRun, Object: "c1", Kind: runtime.ErrUnsupported}

	tests := []struct {
		name     string
		op       string
		err      error
		wantKind error // nil: unclassified
		wantIs   []error
		wantMsg  []string
	}{
		{name: "NotFoundContainer", op: opInspect, err: notFound, wantKind: runtime.ErrNotFound, wantMsg: []string{"docker: inspect c1: not found", "No such container"}},
		{name: "NotFoundWrapped", op: opStop, err: fmt.Errorf("stopping: %w", notFound), wantKind: runtime.ErrNotFound},
		{name: "MissingImageOnRun", op: opRun, err: cerrdefs.ErrNotFound.WithMessage("Error response from daemon: No such image: busybox:nope"), wantKind: runtime.ErrImageNotFound},
		{name: "MissingImageOnCreate", op: opCreate, err: cerrdefs.ErrNotFound.WithMessage("Error response from daemon: No such image: busybox:nope"), wantKind: runtime.ErrImageNotFound},
		{name: "MissingNetworkOnRun", op: opRun, err: cerrdefs.ErrNotFound.WithMessage("Error response from daemon: network nope not found"), wantKind: runtime.ErrNotFound},
		{name: "ConflictOnRunIsAlreadyExists", op: opRun, err: conflict, wantKind: runtime.ErrAlreadyExists},
		{name: "ConflictOnCreateIsAlreadyExists", op: opCreate, err: conflict, wantKind: runtime.ErrAlreadyExists},
		{name: "ConflictOnNetworkCreateIsAlreadyExists", op: opCreateNetwork, err: cerrdefs.ErrConflict.WithMessage("network with name n1 already exists"), wantKind: runtime.ErrAlreadyExists},
		{name: "AlreadyExistsOnRun", op: opRun, err: cerrdefs.ErrAlreadyExists, wantKind: runtime.ErrAlreadyExists},
		{name: "ConflictOnExecIsUnclassified", op: opExec, err: cerrdefs.ErrConflict.WithMessage("Container c1 is not running"), wantKind: nil, wantMsg: []string{"is not running"}},
		{name: "ConnectionFailed", op: opList, err: connectionFailed(t, endpoint), wantKind: runtime.ErrUnavailable, wantMsg: []string{endpoint}},
		{name: "UnavailableWithoutEndpointGetsIt", op: opList, err: cerrdefs.ErrUnavailable, wantKind: runtime.ErrUnavailable, wantMsg: []string{"endpoint " + endpoint}},
		{name: "ConnectionFailedOnPullIsUnavailable", op: opPull, err: connectionFailed(t, endpoint), wantKind: runtime.ErrUnavailable},
		{name: "PullHTTPError", op: opPull, err: cerrdefs.ErrNotFound.WithMessage("manifest unknown"), wantKind: runtime.ErrImageNotFound},
		{name: "PullStreamError", op: opPull, err: &jsonmessage.JSONError{Message: "manifest for 127.0.0.1:5000/nope:latest not found"}, wantKind: runtime.ErrImageNotFound, wantMsg: []string{"manifest for"}},
		{name: "PullInvalidReference", op: opPull, err: cerrdefs.ErrInvalidArgument.WithMessage("invalid reference format"), wantKind: runtime.ErrImageNotFound},
		{name: "CanceledIsUnclassified", op: opPull, err: context.Canceled, wantKind: nil, wantIs: []error{context.Canceled}},
		{name: "DeadlineIsUnclassified", op: opInspect, err: context.DeadlineExceeded, wantKind: nil, wantIs: []error{context.DeadlineExceeded}},
		{name: "InternalIsUnclassified", op: opRun, err: cerrdefs.ErrInternal.WithMessage("OCI runtime create failed"), wantKind: nil},
		{name: "UnknownIsUnclassified", op: opRemove, err: errors.New("boom"), wantKind: nil, wantMsg: []string{"docker: remove c1: boom"}},
		{name: "AlreadyTranslatedIsKept", op: opInspect, err: already, wantKind: runtime.ErrUnsupported, wantMsg: []string{"docker: run c1"}},
	}
	kinds := []error{runtime.ErrNotFound, runtime.ErrAlreadyExists, runtime.ErrUnavailable, runtime.ErrImageNotFound, runtime.ErrUnsupported}
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
		assert.NoError(t, translate(endpoint, opInspect, "c1", nil))
	})
}
