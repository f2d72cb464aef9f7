package containerd

import (
	"errors"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// Errors as the containerd client returns them.
var (
	errNotFound      = cerrdefs.ErrNotFound
	errAlreadyExists = cerrdefs.ErrAlreadyExists
	errUnavailable   = cerrdefs.ErrUnavailable
)

func TestWrapClassifies(t *testing.T) {
	r := &Runtime{address: "/run/x.sock"}
	cases := []struct {
		name string
		op   string
		err  error
		want error
	}{
		{name: "not found", op: runtime.OpInspect, err: errNotFound, want: runtime.ErrNotFound},
		{name: "already exists on run", op: runtime.OpRun, err: errAlreadyExists, want: runtime.ErrAlreadyExists},
		{name: "already exists elsewhere has no kind", op: runtime.OpExec, err: errAlreadyExists, want: nil},
		{name: "unavailable", op: runtime.OpList, err: errUnavailable, want: runtime.ErrUnavailable},
		{name: "any pull failure", op: runtime.OpPull, err: errors.New("connection refused"), want: runtime.ErrImageNotFound},
		{name: "a kind the adapter set", op: runtime.OpRun, err: adapterkit.WithKind(runtime.ErrUnsupported, "x"), want: runtime.ErrUnsupported},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := r.wrap(tc.op, "obj", tc.err)
			var re *runtime.Error
			require.True(t, errors.As(err, &re))
			assert.Equal(t, Name, re.Runtime)
			assert.Equal(t, tc.op, re.Op)
			assert.Equal(t, "obj", re.Object)
			assert.Equal(t, tc.want, re.Kind)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			if errors.Is(tc.want, runtime.ErrUnavailable) {
				assert.Contains(t, err.Error(), r.address)
			}
		})
	}
}
