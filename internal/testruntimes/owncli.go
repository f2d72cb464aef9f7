package testruntimes

import (
	"context"
	"encoding/json"
	"slices"
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
// containers (in any state) that carry the label key=value, sorted.
func (r Runtime) LabelledNames(t testing.TB, key, value string) []string {
	t.Helper()
	if r.RT.Name() != containerd.Name {
		out := r.OwnCLI(t, "ps", "-a", "--filter", "label="+key+"="+value, "--format", "{{.Names}}")
		names := strings.Fields(out)
		slices.Sort(names)
		return names
	}
	// ctr lists IDs; a container's name is its nerdctl/name label (its ID
	// for one made when the ID was the name).
	var names []string
	for _, id := range strings.Fields(r.OwnCLI(t, "containers", "ls", "-q", `labels."`+key+`"==`+value)) {
		var info struct{ Labels map[string]string }
		if err := json.Unmarshal([]byte(r.OwnCLI(t, "containers", "info", id)), &info); err != nil {
			t.Fatalf("ctr containers info %s: %v", id, err)
		}
		name := info.Labels[containerd.NerdctlNameLabel]
		if name == "" {
			name = id
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
