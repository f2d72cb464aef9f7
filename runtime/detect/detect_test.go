package detect

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// fakeRT answers Version (or not); every other verb is unused here.
type fakeRT struct {
	runtime.ContainerRuntime
	c      Candidate
	err    error
	closed *int
}

func (f fakeRT) Name() string     { return f.c.Runtime }
func (f fakeRT) Endpoint() string { return f.c.Endpoint }
func (f fakeRT) Close() error     { *f.closed++; return nil }
func (f fakeRT) Version(ctx context.Context) (runtime.Info, error) {
	if f.err != nil {
		return runtime.Info{}, f.err
	}
	return runtime.Info{Runtime: f.c.Runtime, Endpoint: f.c.Endpoint, Version: "1.0"}, nil
}

// world is a fake host: an environment, the sockets that exist, and the
// endpoints that answer.
type world struct {
	env     map[string]string
	sockets []string
	answers []string // endpoints that answer a ping
	pinged  []string
	closed  int
}

func (w *world) options(o Options) Options {
	o.Getenv = func(k string) string { return w.env[k] }
	o.SocketExists = func(p string) bool {
		for _, s := range w.sockets {
			if s == p {
				return true
			}
		}
		return false
	}
	o.Connect = func(c Candidate, _ *slog.Logger) (runtime.ContainerRuntime, error) {
		w.pinged = append(w.pinged, c.Endpoint)
		for _, a := range w.answers {
			if a == c.Endpoint {
				return fakeRT{c: c, closed: &w.closed}, nil
			}
		}
		return fakeRT{c: c, closed: &w.closed, err: runtime.NewError(c.Runtime, "version", c.Endpoint, runtime.ErrUnavailable, errors.New("connection refused"))}, nil
	}
	return o
}

func sources(cs []Candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Runtime + "|" + c.Source
	}
	return out
}

func TestCandidatesOrder(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		env  map[string]string
		want []string
	}{
		{
			name: "AutoWithNothingConfigured",
			env:  map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"},
			want: []string{
				"podman|rootful Podman socket",
				"podman|rootless Podman socket",
				"docker|Docker socket",
				"docker|rootless Docker socket",
				"containerd|containerd socket",
			},
		},
		{
			name: "EnvEndpointsComeFirstAndReplaceTheirRuntimesSockets",
			env: map[string]string{
				"DOCKER_HOST": "tcp://127.0.0.1:2375", "CONTAINER_HOST": "unix:///tmp/p.sock",
				"CONTAINERD_ADDRESS": "/tmp/c.sock",
			},
			want: []string{"docker|DOCKER_HOST", "podman|CONTAINER_HOST", "containerd|CONTAINERD_ADDRESS"},
		},
		{
			name: "DockerHostBeforePodmanSockets",
			env:  map[string]string{"DOCKER_HOST": "unix:///var/run/docker.sock"},
			want: []string{"docker|DOCKER_HOST", "podman|rootful Podman socket", "podman|rootless Podman socket", "containerd|containerd socket"},
		},
		{
			name: "FlagEndpointOverridesEnv",
			opts: Options{DockerHost: "unix:///flag.sock"},
			env:  map[string]string{"DOCKER_HOST": "unix:///env.sock"},
			want: []string{"docker|--docker-host", "podman|rootful Podman socket", "podman|rootless Podman socket", "containerd|containerd socket"},
		},
		{
			name: "ExplicitRuntimeKeepsOnlyItsCandidates",
			opts: Options{Runtime: "podman"},
			env:  map[string]string{"DOCKER_HOST": "unix:///var/run/docker.sock"},
			want: []string{"podman|rootful Podman socket", "podman|rootless Podman socket"},
		},
		{
			name: "ExplicitRuntimeFromEnv",
			env:  map[string]string{"SANDBOXER_RUNTIME": "Docker"},
			want: []string{"docker|Docker socket", "docker|rootless Docker socket"},
		},
		{
			name: "ExplicitContainerdWithAddress",
			opts: Options{Runtime: "containerd", ContainerdAddress: "/run/x.sock", ContainerdNamespace: "ns1"},
			want: []string{"containerd|--containerd-address"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &world{env: tt.env}
			got, err := Candidates(w.options(tt.opts))
			require.NoError(t, err)
			assert.Equal(t, tt.want, sources(got))
		})
	}
}

func TestCandidatesRootlessPaths(t *testing.T) {
	w := &world{env: map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000", "CONTAINERD_NAMESPACE": "ns"}}
	got, err := Candidates(w.options(Options{}))
	require.NoError(t, err)
	require.Len(t, got, 5)
	assert.Equal(t, "unix:///run/podman/podman.sock", got[0].Endpoint)
	assert.Equal(t, "/run/user/1000/podman/podman.sock", got[1].Socket)
	assert.Equal(t, "unix:///var/run/docker.sock", got[2].Endpoint)
	assert.Equal(t, "/run/user/1000/docker.sock", got[3].Socket)
	assert.Equal(t, "ns", got[4].Namespace)
}

func TestChoiceRejectsUnknownRuntime(t *testing.T) {
	for _, name := range []string{"dockerd", "k8s", "auto,docker"} {
		t.Run(name, func(t *testing.T) {
			w := &world{}
			_, err := Detect(context.Background(), w.options(Options{Runtime: name}))
			require.ErrorIs(t, err, ErrUnknownRuntime)
			assert.Contains(t, err.Error(), name)
			assert.Empty(t, w.pinged, "nothing is contacted for bad input")
		})
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		w          world
		wantChosen string // endpoint; "" = none
		wantPinged []string
		wantStatus []Status
		reason     []string
	}{
		{
			name:       "FirstThatAnswersWinsAndLaterOnesAreNotPinged",
			w:          world{sockets: []string{"/var/run/docker.sock", "/run/containerd/containerd.sock"}, answers: []string{"unix:///var/run/docker.sock", "/run/containerd/containerd.sock"}},
			wantChosen: "unix:///var/run/docker.sock",
			wantPinged: []string{"unix:///var/run/docker.sock"},
			wantStatus: []Status{StatusAbsent, StatusAbsent, StatusAnswered, StatusNotTried, StatusNotTried},
			reason:     []string{"first to answer in the auto-detection order", "Docker socket", "rootful Podman socket absent"},
		},
		{
			name:       "ConfiguredEndpointIsPingedEvenWithoutALocalSocket",
			w:          world{env: map[string]string{"CONTAINER_HOST": "tcp://10.0.0.1:8888"}, sockets: []string{"/var/run/docker.sock"}, answers: []string{"tcp://10.0.0.1:8888", "unix:///var/run/docker.sock"}},
			wantChosen: "tcp://10.0.0.1:8888",
			wantPinged: []string{"tcp://10.0.0.1:8888"},
			wantStatus: []Status{StatusAnswered, StatusNotTried, StatusNotTried, StatusNotTried},
		},
		{
			name:       "AFailingCandidateFallsThroughToTheNext",
			w:          world{env: map[string]string{"DOCKER_HOST": "unix:///dead.sock"}, sockets: []string{"/run/podman/podman.sock"}, answers: []string{"unix:///run/podman/podman.sock"}},
			wantChosen: "unix:///run/podman/podman.sock",
			wantPinged: []string{"unix:///dead.sock", "unix:///run/podman/podman.sock"},
			wantStatus: []Status{StatusFailed, StatusAnswered, StatusNotTried, StatusNotTried},
			reason:     []string{"DOCKER_HOST", "failed", "connection refused"},
		},
		{
			name:       "ExplicitRuntimeThatDoesNotAnswerIsNotReplaced",
			opts:       Options{Runtime: "docker"},
			w:          world{env: map[string]string{"DOCKER_HOST": "unix:///nonexistent.sock"}, sockets: []string{"/run/podman/podman.sock"}, answers: []string{"unix:///run/podman/podman.sock"}},
			wantPinged: []string{"unix:///nonexistent.sock"},
			wantStatus: []Status{StatusFailed},
			reason:     []string{"docker (asked for by --runtime) did not answer", "unix:///nonexistent.sock"},
		},
		{
			name:       "NothingAnywhere",
			w:          world{},
			wantStatus: []Status{StatusAbsent, StatusAbsent, StatusAbsent, StatusAbsent, StatusAbsent},
			reason:     []string{"no container runtime answered", "absent"},
		},
		{
			name:       "AllPingsEveryCandidateButKeepsTheFirst",
			opts:       Options{All: true},
			w:          world{sockets: []string{"/run/podman/podman.sock", "/var/run/docker.sock"}, answers: []string{"unix:///run/podman/podman.sock", "unix:///var/run/docker.sock"}},
			wantChosen: "unix:///run/podman/podman.sock",
			wantPinged: []string{"unix:///run/podman/podman.sock", "unix:///var/run/docker.sock"},
			wantStatus: []Status{StatusAnswered, StatusAbsent, StatusAnswered, StatusAbsent, StatusAbsent},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.w
			if w.env == nil {
				w.env = map[string]string{}
			}
			w.env["XDG_RUNTIME_DIR"] = "/run/user/1000"
			sel, err := Detect(context.Background(), w.options(tt.opts))
			require.NotNil(t, sel)
			var statuses []Status
			for _, p := range sel.Probes {
				statuses = append(statuses, p.Status)
			}
			assert.Equal(t, tt.wantStatus, statuses)
			assert.Equal(t, tt.wantPinged, w.pinged)
			if tt.wantChosen == "" {
				require.ErrorIs(t, err, runtime.ErrUnavailable)
				assert.Nil(t, sel.Runtime)
				assert.NotContains(t, err.Error(), "\n")
				assert.Equal(t, len(w.pinged), w.closed, "every pinged runtime is closed")
			} else {
				require.NoError(t, err)
				require.NotNil(t, sel.Runtime)
				assert.Equal(t, tt.wantChosen, sel.Runtime.Endpoint())
				assert.Equal(t, tt.wantChosen, sel.Chosen.Endpoint)
				assert.Equal(t, len(w.pinged)-1, w.closed, "every runtime but the chosen one is closed")
			}
			for _, r := range tt.reason {
				assert.Contains(t, sel.Reason, r)
			}
		})
	}
}
