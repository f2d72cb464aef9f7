package podman

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/adaptertest"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
)

// TestDiagnoseForwardMatchesTheHost: Diagnose reports the FORWARD problem
// of internal networks exactly when, on this host, two containers that
// Podman's own CLI puts on an internal network cannot reach each other.
func TestDiagnoseForwardMatchesTheHost(t *testing.T) {
	r := newTestRuntime(t)
	ctx := adaptertest.Ctx(t)
	findings := map[string]string{}
	for _, d := range r.Diagnose(ctx) {
		findings[d.Check] = d.Problem
	}
	t.Logf("findings: %v", findings)

	labels := adaptertest.Labels(t, r)
	name := "sbx-diag-" + testkit.RandomHex(4)
	_, err := r.CreateNetwork(ctx, runtime.NetworkSpec{Name: name, Labels: labels, Internal: true})
	require.NoError(t, err)
	image := testkit.Image(t, r, "busybox")
	cli := func(ctx context.Context, args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "podman", append([]string{"--url", r.Endpoint()}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	server, client := name+"-server", name+"-client"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = cli(ctx, "rm", "-f", "-t", "0", server, client)
		assert.NoError(t, r.RemoveNetwork(ctx, name))
	})
	_, err = cli(ctx, "run", "-d", "--name", server, "--network", name, image, "sh", "-c",
		"mkdir -p /tmp/w && echo diag > /tmp/w/index.html && exec httpd -f -p 8080 -h /tmp/w")
	require.NoError(t, err)
	_, err = cli(ctx, "run", "-d", "--name", client, "--network", name, image, "sleep", "600")
	require.NoError(t, err)
	addr, err := cli(ctx, "inspect", server, "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
	require.NoError(t, err)
	url := "http://" + addr + ":8080/"
	fetch := func(from string) error {
		out, err := cli(ctx, "exec", from, "timeout", "5", "wget", "-q", "-O", "-", url)
		if err == nil && out != "diag" {
			err = errors.New("got " + out)
		}
		return err
	}
	// The server answers itself first, so that a refusal below is never
	// a server that is not up yet.
	testkit.Poll(t, 60*time.Second, 500*time.Millisecond, func() error { return fetch(server) }, "the server answers at %s", url)
	if _, drops := findings["podman-internal-forward"]; drops {
		assert.Error(t, fetch(client), "Diagnose says FORWARD drops bridged frames, yet %s reaches %s", client, url)
	} else {
		testkit.Poll(t, 60*time.Second, 500*time.Millisecond, func() error { return fetch(client) },
			"no FORWARD finding, so %s reaches %s", client, url)
	}
}
