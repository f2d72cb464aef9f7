package standins

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
)

// TestBusybox checks what the conformance suite uses busybox for: a shell,
// the applets (nc, sleep, id), and the nobody user.
func TestBusybox(t *testing.T) {
	t.Parallel()
	c := runContainer(t, standinImage(t, "busybox"), runOpts{Cmd: []string{"sleep", "600"}})
	ctx := testkit.Context(t, time.Minute)
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{name: "ShellRuns", argv: []string{"sh", "-c", "echo $((6*7))"}, want: "42"},
		{name: "RunsAsRoot", argv: []string{"id", "-u"}, want: "0"},
		{name: "NobodyExists", argv: []string{"id", "-u", "nobody"}, want: "65534"},
		{name: "NetcatApplet", argv: []string{"which", "nc"}, want: "/usr/bin/nc"},
		{name: "BinaryIsStatic", argv: []string{"sh", "-c", "test ! -e /lib64 && test ! -e /lib && echo static"}, want: "static"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.exec(ctx, nil, tt.argv...)
			require.NoError(t, err)
			require.Zero(t, res.ExitCode, res.Stderr)
			assert.Equal(t, tt.want, strings.TrimSpace(res.Stdout))
		})
	}
}
