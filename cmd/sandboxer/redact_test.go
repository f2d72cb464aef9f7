package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestEndpointCredentialsNeverPrinted: a runtime endpoint with credentials
// (where nothing answers) never appears with them in any command's output,
// stdout or stderr, debug logs included; the redacted form does.
func TestEndpointCredentialsNeverPrinted(t *testing.T) {
	endpoints := []struct {
		name, runtime, env, secret, shown string
	}{
		{"PodmanSSH", "podman", "CONTAINER_HOST=ssh://agent:sshpw0815@127.0.0.1:1/run/podman/podman.sock", "sshpw0815", "ssh://agent:xxxxx@127.0.0.1:1/run/podman/podman.sock"},
		{"DockerTCP", "docker", "DOCKER_HOST=tcp://agent:tcppw0815@127.0.0.1:1", "tcppw0815", "tcp://agent:xxxxx@127.0.0.1:1"},
		{"PodmanToken", "podman", "CONTAINER_HOST=tcp://tok0815abcdef@127.0.0.1:1", "tok0815abcdef", "tcp://xxxxx@127.0.0.1:1"},
	}
	commands := [][]string{
		{"doctor"},
		{"doctor", "-o", "json"},
		{"up", "--owner", "r1", "-s", "redis"},
		{"spawn", "--owner", "r1", "--services-json", `["redis"]`},
		{"ls"},
		{"down", "--owner", "r1"},
		{"gc"},
	}
	c := newCLI(t)
	for _, ep := range endpoints {
		for _, args := range commands {
			t.Run(ep.name+"/"+strings.Join(args, "_"), func(t *testing.T) {
				env := []string{ep.env, "ROBOCO_SANDBOX_DB_ENABLED=1"}
				r := c.runWith(env, append([]string{"--runtime", ep.runtime, "--label-prefix", c.prefix, "-v"}, args...)...)
				assert.Equal(t, ExitUnavailable, r.code, r.stderr)
				out := r.stdout + r.stderr
				assert.NotContains(t, out, ep.secret)
				assert.Contains(t, out, ep.shown)
			})
		}
	}
}
