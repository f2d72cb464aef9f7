package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
)

// TestOwnerIDRefusedBeforeAnyRuntimeContact: an owner id that one backend
// would refuse (upper case or '_': a Kubernetes pod name cannot hold it) is
// exit 2 with the rule, and no runtime is contacted, whichever runtime is
// asked for: each one's endpoint is a port that accepts, never answers
// and counts connections (testkit.HungCounting). The
// same command with a valid id does contact it (and then gives up on its
// ping: exit 3), so the count can see a contact.
func TestOwnerIDRefusedBeforeAnyRuntimeContact(t *testing.T) {
	url, contacts := testkit.HungCounting(t, "tcp")
	addr := strings.TrimPrefix(url, "tcp://")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://`+addr+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: default}}]
current-context: x
`), 0o600))
	env := map[string]string{
		"DOCKER_HOST":               "tcp://" + addr,
		"CONTAINER_HOST":            "tcp://" + addr,
		"KUBECONFIG":                kubeconfig,
		"ROBOCO_SANDBOX_DB_ENABLED": "1",
	}
	for _, rt := range []string{"docker", "podman", "kubernetes"} {
		commands := map[string]func(id string) []string{
			"up": func(id string) []string { return []string{"--runtime", rt, "up", "--owner", id, "-s", "redis"} },
			"spawn": func(id string) []string {
				return []string{"--runtime", rt, "spawn", "--owner", id, "--services-json", `["redis"]`}
			},
			"run": func(id string) []string {
				return []string{"--runtime", rt, "run", "--owner", id, "-s", "redis", "--", "true"}
			},
			"down": func(id string) []string { return []string{"--runtime", rt, "down", "--owner", id} },
		}
		for verb, args := range commands {
			for _, id := range []string{"Agent1", "a_b", "agent-A"} {
				t.Run(rt+"/"+verb+"/"+id, func(t *testing.T) {
					before := contacts()
					code, _, stderr := mainInProcess(t, env, args(id)...)
					assert.Equal(t, ExitUsage, code, stderr)
					assert.Contains(t, stderr, `invalid owner id "`+id+`"`)
					assert.Contains(t, stderr, "lower-case letters and digits")
					assert.Equal(t, before, contacts(), "no runtime was contacted")
				})
			}
		}
		t.Run(rt+"/ValidIDContactsTheRuntime", func(t *testing.T) {
			before := contacts()
			code, _, stderr := mainInProcess(t, env, append([]string{"--ping-timeout", "1s"}, commands["up"]("agent-1")...)...)
			assert.Equal(t, ExitUnavailable, code, stderr)
			assert.Greater(t, contacts(), before, "the endpoint sees a contact: %s", strings.TrimSpace(stderr))
		})
	}
}
