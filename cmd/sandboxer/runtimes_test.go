package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/detect"
)

// host is a fake machine for down, ls and gc: three configured endpoints
// (docker, podman, containerd), each a fake runtime that answers, does not
// answer (dead), or hangs on List until its context ends.
type host struct {
	fakes map[string]*fakeruntime.Runtime // by runtime name
	dead  map[string]bool
}

const (
	dockerEP     = "unix:///fake/docker.sock"
	podmanEP     = "unix:///fake/podman.sock"
	containerdEP = "/fake/containerd.sock"
)

func newHost() *host {
	h := &host{fakes: map[string]*fakeruntime.Runtime{}, dead: map[string]bool{}}
	for _, name := range detect.Runtimes {
		h.fakes[name] = fakeruntime.New()
	}
	return h
}

// sandbox seeds a sandbox of engine for owner id (default prefix and
// template) on runtime name, created a minute ago.
func (h *host) sandbox(name, engine, id string) runtime.Container {
	e, ok := engines.Default.Lookup(engine)
	if !ok {
		panic("no engine " + engine)
	}
	keys := labels.For(labels.DefaultPrefix)
	lbls := keys.OwnedBy(provision.Options{}.OwnerName(id))
	lbls[keys.Engine] = engine
	return h.fakes[name].Seed(runtime.Container{
		Name:    provision.ContainerName(labels.DefaultPrefix, e.Spec().Short, id),
		Image:   e.Spec().Image,
		Created: time.Now().Add(-time.Minute),
		Labels:  lbls,
	})
}

// hang makes List on runtime name block until its context ends.
func (h *host) hang(name string) {
	h.fakes[name].OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbList {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
}

func (h *host) names(name string) []string {
	var out []string
	for _, c := range h.fakes[name].Containers() {
		out = append(out, c.Name)
	}
	return out
}

// run runs sandboxer in process on the fake host.
func (h *host) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	for name, f := range h.fakes {
		if h.dead[name] {
			f.Fail(fakeruntime.VerbVersion, "", runtime.ErrUnavailable)
		}
	}
	var out, errb bytes.Buffer
	a := &app{
		io: Stdio{In: strings.NewReader(""), Out: &out, Err: &errb},
		getenv: hermetic(map[string]string{
			"DOCKER_HOST": dockerEP, "CONTAINER_HOST": podmanEP, "CONTAINERD_ADDRESS": containerdEP,
		}),
		registry: engines.Default,
		detectHook: func(o *detect.Options) {
			o.SocketExists = func(string) bool { return false }
			o.Connect = func(c detect.Candidate, _ *slog.Logger) (runtime.ContainerRuntime, error) {
				return h.fakes[c.Runtime], nil
			}
		},
	}
	code = a.main(context.Background(), args)
	return code, out.String(), errb.String()
}

func TestDownLooksAtEveryPresentRuntime(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		dead      []string
		wantCode  int
		wantOut   []string // removed names
		wantLeft  map[string][]string
		wantError []string // in the one stderr line
	}{
		{
			name:     "AutoRemovesTheOwnersSandboxesWhereverTheyAre",
			args:     []string{"down", "--owner", "a1"},
			wantCode: ExitOK,
			wantOut:  []string{"roboco-sandbox-pg-a1", "roboco-sandbox-redis-a1"},
			wantLeft: map[string][]string{"docker": {"roboco-sandbox-redis-b2"}},
		},
		{
			name:      "AutoActsOnTheOthersThenExits3NamingTheRuntimeThatDidNotAnswer",
			args:      []string{"down", "--owner", "a1"},
			dead:      []string{"docker"},
			wantCode:  ExitUnavailable,
			wantOut:   []string{"roboco-sandbox-pg-a1"},
			wantLeft:  map[string][]string{"docker": {"roboco-sandbox-redis-a1", "roboco-sandbox-redis-b2"}},
			wantError: []string{"down roboco-agent-a1: docker at " + dockerEP + " (DOCKER_HOST) did not answer", "was not looked at", "--runtime"},
		},
		{
			name:      "NothingAnswersIsExit3",
			args:      []string{"down", "--owner", "a1"},
			dead:      []string{"docker", "podman", "containerd"},
			wantCode:  ExitUnavailable,
			wantLeft:  map[string][]string{"docker": {"roboco-sandbox-redis-a1", "roboco-sandbox-redis-b2"}, "podman": {"roboco-sandbox-pg-a1"}},
			wantError: []string{"no container runtime answered", "DOCKER_HOST", "CONTAINER_HOST", "CONTAINERD_ADDRESS"},
		},
		{
			name:     "AnExplicitRuntimeIsTheOnlyOneLookedAt",
			args:     []string{"--runtime", "podman", "down", "--owner", "a1"},
			dead:     []string{"docker"},
			wantCode: ExitOK,
			wantOut:  []string{"roboco-sandbox-pg-a1"},
			wantLeft: map[string][]string{"docker": {"roboco-sandbox-redis-a1", "roboco-sandbox-redis-b2"}},
		},
		{
			name:      "AnExplicitRuntimeThatDoesNotAnswerIsExit3",
			args:      []string{"--runtime", "docker", "down", "--owner", "a1"},
			dead:      []string{"docker"},
			wantCode:  ExitUnavailable,
			wantLeft:  map[string][]string{"docker": {"roboco-sandbox-redis-a1", "roboco-sandbox-redis-b2"}, "podman": {"roboco-sandbox-pg-a1"}},
			wantError: []string{"docker (asked for by --runtime) did not answer"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost()
			h.sandbox("docker", "redis", "a1")
			h.sandbox("docker", "redis", "b2")
			h.sandbox("podman", "postgres", "a1")
			for _, d := range tt.dead {
				h.dead[d] = true
			}
			code, stdout, stderr := h.run(t, tt.args...)
			assert.Equal(t, tt.wantCode, code, stderr)
			assert.ElementsMatch(t, tt.wantOut, strings.Fields(strings.ReplaceAll(stdout, "removed ", "")))
			for _, name := range detect.Runtimes {
				assert.Equal(t, tt.wantLeft[name], h.names(name), "left on %s", name)
			}
			if tt.wantError == nil {
				assert.NotContains(t, stderr, "sandboxer:", "no error")
				return
			}
			last := lastLine(stderr)
			assert.True(t, strings.HasPrefix(last, "sandboxer: "), stderr)
			for _, w := range tt.wantError {
				assert.Contains(t, last, w)
			}
		})
	}
}

func TestLsShowsTheRuntimeOfEachSandbox(t *testing.T) {
	h := newHost()
	h.sandbox("docker", "redis", "a1")
	h.sandbox("containerd", "mongo", "a1")
	h.sandbox("podman", "postgres", "b2")

	code, stdout, stderr := h.run(t, "ls", "-o", "json")
	require.Equal(t, ExitOK, code, stderr)
	var rows []listed
	require.NoError(t, json.Unmarshal([]byte(stdout), &rows))
	got := map[string]string{}
	for _, r := range rows {
		got[r.Name] = r.Runtime + " " + r.RuntimeEndpoint
	}
	assert.Equal(t, map[string]string{
		"roboco-sandbox-mongo-a1": "containerd " + containerdEP,
		"roboco-sandbox-pg-b2":    "podman " + podmanEP,
		"roboco-sandbox-redis-a1": "docker " + dockerEP,
	}, got)

	code, stdout, stderr = h.run(t, "ls", "--owner", "a1")
	require.Equal(t, ExitOK, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 3, stdout)
	assert.Regexp(t, `^NAME\s+ENGINE\s+OWNER\s+STATE\s+AGE\s+ENDPOINT\s+NETWORK\s+RUNTIME$`, lines[0])
	assert.Regexp(t, `^roboco-sandbox-mongo-a1\s.*\scontainerd$`, lines[1])
	assert.Regexp(t, `^roboco-sandbox-redis-a1\s.*\sdocker$`, lines[2])
}

func TestLsListsWhatTheOthersHoldThenFails(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		prepare  func(h *host)
		wantCode int
		want     []string
	}{
		{
			name:     "ARuntimeThatDoesNotAnswer",
			args:     []string{"ls", "-o", "json"},
			prepare:  func(h *host) { h.dead["podman"] = true },
			wantCode: ExitUnavailable,
			want:     []string{"sandboxer: ls: podman at " + podmanEP + " (CONTAINER_HOST) did not answer"},
		},
		{
			name:     "ARuntimeThatHangsIsGivenUpOnAfterTimeout",
			args:     []string{"ls", "-o", "json", "--timeout", "100ms"},
			prepare:  func(h *host) { h.hang("podman") },
			wantCode: ExitFailure,
			want:     []string{"sandboxer: ls: on podman: gave up after 100ms (--timeout)", "deadline exceeded"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost()
			h.sandbox("docker", "redis", "a1")
			h.sandbox("podman", "postgres", "a1")
			tt.prepare(h)
			start := time.Now()
			code, stdout, stderr := h.run(t, tt.args...)
			assert.Less(t, time.Since(start), 10*time.Second)
			assert.Equal(t, tt.wantCode, code, stderr)
			var rows []listed
			require.NoError(t, json.Unmarshal([]byte(stdout), &rows))
			require.Len(t, rows, 1, "what the others hold is listed")
			assert.Equal(t, "roboco-sandbox-redis-a1", rows[0].Name)
			for _, w := range tt.want {
				assert.Contains(t, lastLine(stderr), w)
			}
		})
	}
}

func TestLsListsAContainerSeenThroughTwoEndpointsOnce(t *testing.T) {
	h := newHost()
	h.fakes["podman"] = h.fakes["docker"] // Podman's Docker-compatible socket
	h.sandbox("docker", "redis", "a1")
	code, stdout, stderr := h.run(t, "ls", "-o", "json")
	require.Equal(t, ExitOK, code, stderr)
	var rows []listed
	require.NoError(t, json.Unmarshal([]byte(stdout), &rows))
	require.Len(t, rows, 1)
	assert.Equal(t, "docker", rows[0].Runtime, "the first in the detection order")
}

func TestGCSweepsEveryPresentRuntime(t *testing.T) {
	h := newHost()
	h.sandbox("docker", "redis", "a1")
	h.sandbox("podman", "postgres", "b2")
	h.fakes["podman"].Seed(runtime.Container{Name: "roboco-agent-b2"}) // b2's owner is alive
	h.dead["containerd"] = true

	code, stdout, stderr := h.run(t, "gc", "--grace", "0s", "--dry-run", "-o", "json")
	assert.Equal(t, ExitUnavailable, code, stderr)
	assert.Contains(t, lastLine(stderr), "sandboxer: gc: containerd at "+containerdEP+" (CONTAINERD_ADDRESS) did not answer")
	var rep reportJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	assert.Equal(t, []string{"docker", "podman"}, rep.Runtimes)
	require.Len(t, rep.Removed, 1)
	assert.Equal(t, "roboco-sandbox-redis-a1", rep.Removed[0].Name)
	assert.Equal(t, "docker", rep.Removed[0].Runtime)
	require.Len(t, rep.Kept, 1)
	assert.Equal(t, "roboco-sandbox-pg-b2", rep.Kept[0].Name)
	assert.Equal(t, "podman", rep.Kept[0].Runtime)
	assert.Equal(t, "would remove 1, vanished 0, kept 1, skipped 0 (in grace), errors 0 on docker, podman", rep.Summary)

	h.dead["containerd"] = false
	h.fakes["containerd"] = fakeruntime.New()
	code, stdout, stderr = h.run(t, "gc", "--grace", "0s")
	require.Equal(t, ExitOK, code, stderr)
	assert.Regexp(t, `removed\s+roboco-sandbox-redis-a1\s+redis\s+owner roboco-agent-a1\s+running\s+age \S+\s+on docker`, stdout)
	assert.Regexp(t, `kept\s+roboco-sandbox-pg-b2\s+postgres\s+owner roboco-agent-b2\s+running\s+age \S+\s+on podman`, stdout)
	assert.Contains(t, stdout, "removed 1, vanished 0, kept 1, skipped 0 (in grace), errors 0 on docker, podman, containerd")
	assert.Empty(t, h.names("docker"))
}

func TestLabelTargetsTellsCandidatesOfOneRuntimeApart(t *testing.T) {
	cs := []detect.Connected{
		{Probe: detect.Probe{Candidate: detect.Candidate{Runtime: "podman", Source: "rootful Podman socket"}}},
		{Probe: detect.Probe{Candidate: detect.Candidate{Runtime: "podman", Source: "rootless Podman socket"}}},
		{Probe: detect.Probe{Candidate: detect.Candidate{Runtime: "docker", Source: "Docker socket"}}},
	}
	var got []string
	for _, t := range labelTargets(cs) {
		got = append(got, t.label)
	}
	assert.Equal(t, []string{"podman (rootful Podman socket)", "podman (rootless Podman socket)", "docker"}, got)
}

func TestJoinErrors(t *testing.T) {
	assert.NoError(t, joinErrors(nil, nil))
	one := errors.New("one")
	assert.Same(t, one, joinErrors(nil, one))
	unavailable := &detect.UnavailableError{Reason: "docker did not answer"}
	err := joinErrors(one, nil, unavailable)
	assert.Equal(t, "one; docker did not answer", err.Error(), "one line")
	assert.ErrorIs(t, err, runtime.ErrUnavailable)
	assert.Equal(t, ExitUnavailable, exitCode(err, nil), "a runtime not looked at outranks a failure")
}

func TestTimeoutMustBePositive(t *testing.T) {
	for _, cmd := range []string{"down", "ls", "gc"} {
		t.Run(cmd, func(t *testing.T) {
			args := []string{cmd, "--timeout", "0s"}
			if cmd == "down" {
				args = append(args, "--owner", "a1")
			}
			code, _, stderr := mainInProcess(t, nil, args...)
			assert.Equal(t, ExitUsage, code, stderr)
			assert.Contains(t, stderr, "--timeout 0s: must be positive")
		})
	}
}
