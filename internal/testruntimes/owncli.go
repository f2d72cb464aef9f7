package testruntimes

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/runtime/containerd"
	"github.com/roboco/sandboxer/runtime/docker"
	"github.com/roboco/sandboxer/runtime/podman"
)

// ownCLITimeout bounds one command of a runtime's own CLI.
const ownCLITimeout = 2 * time.Minute

// OwnCLI runs the runtime's own command-line tool against the endpoint r
// is connected to, as a user would, and returns its stdout: docker with
// --host, podman with --url (the remote client of the service), ctr with
// --address and --namespace. It is how tests make and look at containers
// from outside the adapter. A command that fails fails the test.
func (r Runtime) OwnCLI(t testing.TB, args ...string) string {
	t.Helper()
	var argv []string
	switch r.RT.Name() { // the adapter: both podman rows use podman
	case docker.Name:
		argv = append([]string{"docker", "--host", r.RT.Endpoint()}, args...)
	case podman.Name:
		argv = append([]string{"podman", "--url", r.RT.Endpoint()}, args...)
	case containerd.Name:
		ns := testenv.Getenv(containerd.EnvNamespace)
		if ns == "" {
			ns = containerd.DefaultNamespace
		}
		argv = append([]string{"ctr", "--address", strings.TrimPrefix(r.RT.Endpoint(), "unix://"), "--namespace", ns}, args...)
	default:
		t.Fatalf("no CLI known for runtime %q", r.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ownCLITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s: %s", strings.Join(argv, " "), stderr.String())
	return string(out)
}

// LabelledNames lists, with the runtime's own CLI, the names of the
// containers (in any state) that carry the label key=value.
func (r Runtime) LabelledNames(t testing.TB, key, value string) []string {
	t.Helper()
	var out string
	if r.RT.Name() == containerd.Name {
		// On containerd the ID is the name.
		out = r.OwnCLI(t, "containers", "ls", "-q", `labels."`+key+`"==`+value)
	} else {
		out = r.OwnCLI(t, "ps", "-a", "--filter", "label="+key+"="+value, "--format", "{{.Names}}")
	}
	return strings.Fields(out)
}
