package detect

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// TestEndpointCredentialsNeverShown: endpoints with credentials, where
// nothing answers, through the real adapters: no credential in the error,
// the reason, a probe's description, a candidate's rendering, or the debug
// log; the redacted form is there instead.
func TestEndpointCredentialsNeverShown(t *testing.T) {
	tests := []struct {
		name    string
		runtime string
		env     map[string]string
		secret  string
		shown   string
	}{
		{"DockerTCPUserPassword", "docker", map[string]string{EnvDockerHost: "tcp://dockeruser:dockerpw4711@127.0.0.1:1"}, "dockerpw4711", "tcp://dockeruser:xxxxx@127.0.0.1:1"},
		{"PodmanSSHPassword", "podman", map[string]string{EnvContainerHost: "ssh://podmanuser:podmanpw4711@127.0.0.1:1/run/podman/podman.sock"}, "podmanpw4711", "ssh://podmanuser:xxxxx@127.0.0.1:1/run/podman/podman.sock"},
		{"PodmanTCPBareToken", "podman", map[string]string{EnvContainerHost: "tcp://tok4711abcdef@127.0.0.1:1"}, "tok4711abcdef", "tcp://xxxxx@127.0.0.1:1"},
		{"DockerTokenQuery", "docker", map[string]string{EnvDockerHost: "tcp://127.0.0.1:1/?token=qtok4711"}, "qtok4711", "token=xxxxx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sel, err := Detect(ctx, Options{
				Runtime:     tt.runtime,
				Getenv:      func(k string) string { return tt.env[k] },
				PingTimeout: 5 * time.Second,
				Logger:      slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			})
			require.Error(t, err)
			assert.ErrorIs(t, err, runtime.ErrUnavailable)
			require.NotNil(t, sel)
			require.Len(t, sel.Probes, 1)
			p := sel.Probes[0]
			seen := map[string]string{
				"error": err.Error(), "reason": sel.Reason, "probe": p.Describe(), "candidate": p.String(),
				"probe error": p.Err.Error(), "shown": p.Shown(), "log": logs.String(),
			}
			for what, text := range seen {
				assert.NotContains(t, text, tt.secret, "%s: %s", what, text)
			}
			assert.Contains(t, err.Error(), tt.shown, "the error names the endpoint, redacted")
			assert.Contains(t, p.Shown(), tt.shown)
			t.Logf("error: %v", err)
		})
	}
}
