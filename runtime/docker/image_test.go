package docker

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

func TestDecodePull(t *testing.T) {
	tests := []struct {
		name      string
		stream    string
		wantErr   string
		wantEvent []runtime.PullProgress
	}{
		{
			name: "ProgressThenDone",
			stream: `{"status":"Pulling from sandboxer/busybox","id":"latest"}
{"status":"Downloading","progressDetail":{"current":512,"total":1024},"id":"abc123"}
{"status":"Pull complete","progressDetail":{},"id":"abc123"}
{"status":"Status: Downloaded newer image for 127.0.0.1:5000/sandboxer/busybox:latest"}
`,
			wantEvent: []runtime.PullProgress{
				{Ref: "r", Status: "Pulling from sandboxer/busybox", Layer: "latest"},
				{Ref: "r", Status: "Downloading", Layer: "abc123", Current: 512, Total: 1024},
				{Ref: "r", Status: "Pull complete", Layer: "abc123"},
				{Ref: "r", Status: "Status: Downloaded newer image for 127.0.0.1:5000/sandboxer/busybox:latest"},
			},
		},
		{
			name: "ErrorInsideTheStream",
			stream: `{"status":"Pulling from sandboxer/nope","id":"latest"}
{"errorDetail":{"message":"manifest for 127.0.0.1:5000/sandboxer/nope:latest not found: manifest unknown"},"error":"manifest for 127.0.0.1:5000/sandboxer/nope:latest not found: manifest unknown"}
`,
			wantErr:   "manifest unknown",
			wantEvent: []runtime.PullProgress{{Ref: "r", Status: "Pulling from sandboxer/nope", Layer: "latest"}},
		},
		{
			name:    "LegacyErrorField",
			stream:  `{"error":"pull access denied"}`,
			wantErr: "pull access denied",
		},
		{
			name:    "TruncatedStream",
			stream:  `{"status":"Downloading"`,
			wantErr: "reading pull progress",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var events []runtime.PullProgress
			err := decodePull("r", strings.NewReader(tc.stream), func(p runtime.PullProgress) { events = append(events, p) })
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.wantEvent, events)
		})
	}

	t.Run("NilProgressIsFine", func(t *testing.T) {
		assert.NoError(t, decodePull("r", strings.NewReader(`{"status":"Downloading"}`), nil))
	})
}
