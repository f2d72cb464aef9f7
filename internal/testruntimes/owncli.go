package testruntimes

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/roboco/sandboxer/runtime/containerd"
)

// ownCLITimeout bounds one command of a runtime's own CLI.
const ownCLITimeout = 2 * time.Minute

// OwnCLI is Own with a deadline of its own (ownCLITimeout), returning
// stdout as a string: how tests make and look at containers from outside
// the adapter, as a user would.
func (r Runtime) OwnCLI(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ownCLITimeout)
	defer cancel()
	return string(r.Own(t, ctx, args...))
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
