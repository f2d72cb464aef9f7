package mongo

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/description"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"
)

// TestSlowNotDown: a mongo ping is tried again only when it ran out of
// time against a server that showed no error; a server that refused the
// connection is down, and its poll stays fast.
func TestSlowNotDown(t *testing.T) {
	refused := description.Server{LastError: fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED)}
	quiet := description.Server{}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"CheckoutTimedOut", fmt.Errorf("ping: %w", topology.WaitQueueTimeoutError{Wrapped: context.DeadlineExceeded}), true},
		{"SelectionTimedOutOnAQuietServer", topology.ServerSelectionError{Wrapped: context.DeadlineExceeded, Desc: description.Topology{Servers: []description.Server{quiet}}}, true},
		{"SelectionFailedOnARefusingServer", topology.ServerSelectionError{Wrapped: context.DeadlineExceeded, Desc: description.Topology{Servers: []description.Server{refused}}}, false},
		{"SelectionWithNoServer", topology.ServerSelectionError{Wrapped: context.DeadlineExceeded}, false},
		{"AuthenticationFailed", errors.New("auth error: sasl conversation error"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, slowNotDown(tc.err))
		})
	}
}
