package docker

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		name   string
		status string
		want   int
	}{
		{name: "Zero", status: "Exited (0) 2 minutes ago", want: 0},
		{name: "Killed", status: "Exited (137) 5 seconds ago", want: 137},
		{name: "Running", status: "Up 3 seconds", want: 0},
		{name: "Created", status: "Created", want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, exitCode(tc.status))
		})
	}
}
