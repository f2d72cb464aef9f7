package testruntimes

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/runtime"
)

// Recorder wraps a runtime and records what the provisioner asks of it:
// the names it runs, the generated passwords in their specs (to prove that
// none reaches an error or a log), and how many execs completed in each
// container (a probe's attempts).
type Recorder struct {
	runtime.ContainerRuntime

	// PublishOn, when set, replaces the host IP of every port Run is asked
	// to publish, as a runtime that publishes beyond what it was asked
	// (0.0.0.0 for 127.0.0.1) would: the real runtime then really
	// publishes there.
	PublishOn string

	mu     sync.Mutex
	runs   []string
	pws    []string
	names  map[string]string // container ID -> name
	nexecs map[string]int    // by container name
}

// Run records spec's name and passwords, then runs it (with its ports'
// host IP replaced by PublishOn, when set).
func (r *Recorder) Run(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	r.mu.Lock()
	r.runs = append(r.runs, spec.Name)
	r.pws = append(r.pws, passwordsOf(spec)...)
	r.mu.Unlock()
	if r.PublishOn != "" {
		spec.Ports = slices.Clone(spec.Ports)
		for i := range spec.Ports {
			spec.Ports[i].HostIP = r.PublishOn
		}
	}
	c, err := r.ContainerRuntime.Run(ctx, spec)
	if err == nil {
		r.mu.Lock()
		if r.names == nil {
			r.names = map[string]string{}
		}
		r.names[c.ID] = spec.Name
		r.mu.Unlock()
	}
	return c, err
}

// Exec counts the execs that completed (whatever their exit code).
func (r *Recorder) Exec(ctx context.Context, ref string, spec runtime.ExecSpec) (runtime.ExecResult, error) {
	res, err := r.ContainerRuntime.Exec(ctx, ref, spec)
	if err == nil {
		r.mu.Lock()
		if r.nexecs == nil {
			r.nexecs = map[string]int{}
		}
		name := ref
		if n, ok := r.names[ref]; ok {
			name = n
		}
		r.nexecs[name]++
		r.mu.Unlock()
	}
	return res, err
}

// Execs is the number of completed execs in the container called name.
func (r *Recorder) Execs(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nexecs[name]
}

// Ran lists the names of the containers Run was asked for, in order.
func (r *Recorder) Ran() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.runs)
}

// Passwords lists the generated passwords of every spec Run was asked for.
func (r *Recorder) Passwords() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.pws)
}

// passwordsOf returns the generated passwords (engines.PasswordBytes as
// lower-case hex) in a run spec's env and command.
func passwordsOf(spec runtime.RunSpec) []string {
	var out []string
	vals := slices.Clone(spec.Command)
	for _, v := range spec.Env {
		vals = append(vals, v)
	}
	for _, v := range vals {
		if len(v) == 2*engines.PasswordBytes && strings.Trim(v, "0123456789abcdef") == "" {
			out = append(out, v)
		}
	}
	return out
}

// Unwrap returns the wrapped runtime (runtime.Unwrapper), so that the
// provisioner finds its optional interfaces (its image store) through the
// recorder.
func (r *Recorder) Unwrap() runtime.ContainerRuntime { return r.ContainerRuntime }
