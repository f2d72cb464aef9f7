package detect

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// fakeRT answers Version (or not); every other verb is unused here.
type fakeRT struct {
	runtime.ContainerRuntime
	c   Candidate
	err error
	w   *world
}

func (f fakeRT) Name() string     { return f.c.Runtime }
func (f fakeRT) Endpoint() string { return f.c.Endpoint }
func (f fakeRT) Close() error {
	f.w.calls.mu.Lock()
	defer f.w.calls.mu.Unlock()
	f.w.calls.closed++
	return nil
}
func (f fakeRT) Version(ctx context.Context) (runtime.Info, error) {
	if f.err != nil {
		return runtime.Info{}, f.err
	}
	return runtime.Info{Runtime: f.c.Runtime, Endpoint: f.c.Endpoint, Version: "1.0"}, nil
}

// world is a fake host: an environment, the sockets that exist (and those
// of them this user may not open), and the endpoints that answer.
type world struct {
	env     map[string]string
	sockets []string
	denied  []string // sockets that exist but this user may not open
	answers []string // endpoints that answer a ping
	calls   *calls   // made by options
}

// calls records what detection did; DetectAll pings concurrently.
type calls struct {
	mu     sync.Mutex
	pinged []string
	closed int
}

func (c *calls) ping(endpoint string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pinged = append(c.pinged, endpoint)
}

// Pinged returns the endpoints pinged, sorted (DetectAll's order is not
// fixed) when sorted is true.
func (c *calls) Pinged(sorted bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.pinged)
	if sorted {
		slices.Sort(out)
	}
	return out
}

func (c *calls) Closed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (w *world) options(o Options) Options {
	w.calls = &calls{}
	o.Getenv = func(k string) string { return w.env[k] }
	o.SocketExists = func(p string) bool { return slices.Contains(w.sockets, p) }
	o.SocketUsable = func(p string) bool { return !slices.Contains(w.denied, p) }
	o.Connect = func(c Candidate, _ *slog.Logger) (runtime.ContainerRuntime, error) {
		w.calls.ping(c.Endpoint)
		if slices.Contains(w.answers, c.Endpoint) {
			return fakeRT{c: c, w: w}, nil
		}
		return fakeRT{c: c, w: w, err: runtime.NewError(c.Runtime, "version", c.Endpoint, runtime.ErrUnavailable, errors.New("connection refused"))}, nil
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
			name: "AutoNeverTriesKubernetes",
			env:  map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000", "KUBECONFIG": "/k/config", "SANDBOXER_K8S_NAMESPACE": "ns"},
			want: []string{
				"podman|rootful Podman socket",
				"podman|rootless Podman socket",
				"docker|Docker socket",
				"docker|rootless Docker socket",
				"containerd|containerd socket",
			},
		},
		{
			name: "ExplicitKubernetesWithKubeconfig",
			env:  map[string]string{"SANDBOXER_RUNTIME": "kubernetes", "KUBECONFIG": "/k/config", "DOCKER_HOST": "unix:///var/run/docker.sock"},
			want: []string{"kubernetes|KUBECONFIG"},
		},
		{
			name: "ExplicitKubernetesWithoutKubeconfig",
			opts: Options{Runtime: "kubernetes"},
			want: []string{"kubernetes|~/.kube/config or the in-cluster config"},
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
			assert.Empty(t, w.calls.Pinged(false), "nothing is contacted for bad input")
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
			name:       "ASocketThisUserMayNotOpenIsNotPinged",
			w:          world{sockets: []string{"/var/run/docker.sock", "/run/containerd/containerd.sock"}, denied: []string{"/var/run/docker.sock"}, answers: []string{"unix:///var/run/docker.sock", "/run/containerd/containerd.sock"}},
			wantChosen: "/run/containerd/containerd.sock",
			wantPinged: []string{"/run/containerd/containerd.sock"},
			wantStatus: []Status{StatusAbsent, StatusAbsent, StatusNoAccess, StatusAbsent, StatusAnswered},
			reason:     []string{"Docker socket no access (/var/run/docker.sock)"},
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
			w := tt.w.withUserRuntimeDir()
			sel, err := Detect(context.Background(), w.options(tt.opts))
			require.NotNil(t, sel)
			assert.Equal(t, tt.wantStatus, statusesOf(sel.Probes))
			assert.Equal(t, tt.wantPinged, w.calls.Pinged(false))
			if tt.wantChosen == "" {
				require.ErrorIs(t, err, runtime.ErrUnavailable)
				assert.Nil(t, sel.Runtime)
				assert.NotContains(t, err.Error(), "\n")
				assert.Equal(t, len(w.calls.Pinged(false)), w.calls.Closed(), "every pinged runtime is closed")
			} else {
				require.NoError(t, err)
				require.NotNil(t, sel.Runtime)
				assert.Equal(t, tt.wantChosen, sel.Runtime.Endpoint())
				assert.Equal(t, tt.wantChosen, sel.Chosen.Endpoint)
				assert.Equal(t, len(w.calls.Pinged(false))-1, w.calls.Closed(), "every runtime but the chosen one is closed")
			}
			for _, r := range tt.reason {
				assert.Contains(t, sel.Reason, r)
			}
		})
	}
}

func TestDetectAll(t *testing.T) {
	const (
		rootful    = "/run/podman/podman.sock"
		rootless   = "/run/user/1000/podman/podman.sock"
		dockerSock = "/var/run/docker.sock"
		ctrdSock   = "/run/containerd/containerd.sock"
	)
	tests := []struct {
		name         string
		opts         Options
		w            world
		wantAnswered []string // endpoints, in candidate order
		wantPinged   []string // sorted
		wantStatus   []Status
		wantErr      []string // the error contains each; nil: no error
	}{
		{
			name:         "EveryPresentCandidateIsConnected",
			w:            world{env: map[string]string{"DOCKER_HOST": "tcp://10.0.0.1:2375", "CONTAINER_HOST": "unix:///p.sock"}, sockets: []string{ctrdSock}, answers: []string{"tcp://10.0.0.1:2375", "unix:///p.sock", ctrdSock}},
			wantAnswered: []string{"tcp://10.0.0.1:2375", "unix:///p.sock", ctrdSock},
			wantPinged:   []string{ctrdSock, "tcp://10.0.0.1:2375", "unix:///p.sock"},
			wantStatus:   []Status{StatusAnswered, StatusAnswered, StatusAnswered},
		},
		{
			name:         "APresentCandidateThatDoesNotAnswerIsNamedAndTheOthersAreStillConnected",
			w:            world{env: map[string]string{"DOCKER_HOST": "unix:///dead.sock"}, sockets: []string{rootful}, answers: []string{"unix://" + rootful}},
			wantAnswered: []string{"unix://" + rootful},
			wantPinged:   []string{"unix:///dead.sock", "unix://" + rootful},
			wantStatus:   []Status{StatusFailed, StatusAnswered, StatusAbsent, StatusAbsent},
			wantErr:      []string{"docker at unix:///dead.sock (DOCKER_HOST) did not answer", "connection refused"},
		},
		{
			name:         "AbsentAndInaccessibleSocketsAreNotPresent",
			w:            world{sockets: []string{rootful, dockerSock, ctrdSock}, denied: []string{ctrdSock}, answers: []string{"unix://" + rootful}},
			wantAnswered: []string{"unix://" + rootful},
			wantPinged:   []string{"unix://" + rootful, "unix://" + dockerSock},
			wantStatus:   []Status{StatusAnswered, StatusAbsent, StatusFailed, StatusAbsent, StatusNoAccess},
			wantErr:      []string{"docker at unix:///var/run/docker.sock (Docker socket) did not answer"},
		},
		{
			name:         "OnlyInaccessibleSocketsIsNoError",
			w:            world{sockets: []string{rootful, ctrdSock}, denied: []string{ctrdSock}, answers: []string{"unix://" + rootful}},
			wantAnswered: []string{"unix://" + rootful},
			wantPinged:   []string{"unix://" + rootful},
			wantStatus:   []Status{StatusAnswered, StatusAbsent, StatusAbsent, StatusAbsent, StatusNoAccess},
		},
		{
			name:       "NothingPresent",
			w:          world{sockets: []string{ctrdSock}, denied: []string{ctrdSock}},
			wantStatus: []Status{StatusAbsent, StatusAbsent, StatusAbsent, StatusAbsent, StatusNoAccess},
			wantErr:    []string{"no container runtime is present", "rootful Podman socket absent (/run/podman/podman.sock)", "containerd socket no access"},
		},
		{
			name:       "NoneAnswers",
			w:          world{env: map[string]string{"CONTAINERD_ADDRESS": "/c.sock"}, sockets: []string{dockerSock}},
			wantPinged: []string{"/c.sock", "unix://" + dockerSock},
			wantStatus: []Status{StatusAbsent, StatusAbsent, StatusFailed, StatusAbsent, StatusFailed},
			wantErr:    []string{"no container runtime answered: docker at unix:///var/run/docker.sock (Docker socket) did not answer", "containerd at /c.sock (CONTAINERD_ADDRESS) did not answer"},
		},
		{
			name:         "AnExplicitRuntimeKeepsEveryOneOfItsOwnCandidates",
			opts:         Options{Runtime: "podman"},
			w:            world{sockets: []string{rootful, rootless, dockerSock}, answers: []string{"unix://" + rootful, "unix://" + rootless, "unix://" + dockerSock}},
			wantAnswered: []string{"unix://" + rootful, "unix://" + rootless},
			wantPinged:   []string{"unix://" + rootful, "unix://" + rootless},
			wantStatus:   []Status{StatusAnswered, StatusAnswered},
		},
		{
			name:       "AnExplicitRuntimeThatIsNotPresent",
			opts:       Options{Runtime: "docker"},
			w:          world{sockets: []string{rootful}, answers: []string{"unix://" + rootful}},
			wantStatus: []Status{StatusAbsent, StatusAbsent},
			wantErr:    []string{"docker (asked for by --runtime) is not present", "Docker socket absent"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.w.withUserRuntimeDir()
			s, err := DetectAll(context.Background(), w.options(tt.opts))
			require.NotNil(t, s)
			assert.Equal(t, tt.wantStatus, statusesOf(s.Probes))
			assert.Equal(t, tt.wantPinged, w.calls.Pinged(true))
			var answered []string
			for _, c := range s.Answered {
				assert.Equal(t, StatusAnswered, c.Status)
				assert.Equal(t, c.Endpoint, c.RT.Endpoint(), "each probe comes with its own runtime")
				answered = append(answered, c.Endpoint)
			}
			assert.Equal(t, tt.wantAnswered, answered)
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.Empty(t, s.Unanswered())
			} else {
				require.ErrorIs(t, err, runtime.ErrUnavailable)
				assert.NotContains(t, err.Error(), "\n")
				for _, want := range tt.wantErr {
					assert.Contains(t, err.Error(), want)
				}
				for _, p := range s.Unanswered() {
					assert.Contains(t, err.Error(), p.Candidate.String(), "every unanswered candidate is named")
				}
			}
			assert.Equal(t, len(w.calls.Pinged(false))-len(s.Answered), w.calls.Closed(), "a candidate that failed is closed at once")
			s.Close()
			assert.Equal(t, len(w.calls.Pinged(false)), w.calls.Closed(), "Close closes the rest")
		})
	}
}

func TestDetectAllRejectsUnknownRuntime(t *testing.T) {
	w := &world{}
	s, err := DetectAll(context.Background(), w.options(Options{Runtime: "lxc"}))
	require.ErrorIs(t, err, ErrUnknownRuntime)
	assert.Nil(t, s)
	assert.Empty(t, w.calls.Pinged(false))
}

// withUserRuntimeDir is w with XDG_RUNTIME_DIR set, as a logged-in user's
// session has it (the rootless Podman socket's directory).
func (w world) withUserRuntimeDir() world {
	env := map[string]string{}
	for k, v := range w.env {
		env[k] = v
	}
	env["XDG_RUNTIME_DIR"] = "/run/user/1000"
	w.env = env
	return w
}

// statusesOf lists the probes' statuses, in order.
func statusesOf(probes []Probe) []Status {
	var out []Status
	for _, p := range probes {
		out = append(out, p.Status)
	}
	return out
}

// deadlineRT answers Version with nothing but what its context allows.
type deadlineRT struct {
	fakeRT
	left chan time.Duration
}

func (d deadlineRT) Version(ctx context.Context) (runtime.Info, error) {
	dl, _ := ctx.Deadline()
	d.left <- time.Until(dl)
	return d.fakeRT.Version(ctx)
}

// TestAnsweredCandidateHasGrace: the ping timeout bounds a candidate's
// first answer (the adapter's own first contact), not all of Version: a
// service that answered and is slow to describe itself on a loaded host
// (rootless Podman's /info) gets AnsweredGrace more, and is not reported
// as not answering.
func TestAnsweredCandidateHasGrace(t *testing.T) {
	w := &world{env: map[string]string{"DOCKER_HOST": "unix:///d.sock"}, answers: []string{"unix:///d.sock"}}
	o := w.options(Options{PingTimeout: time.Second})
	left := make(chan time.Duration, 1)
	o.Connect = func(c Candidate, _ *slog.Logger) (runtime.ContainerRuntime, error) {
		return deadlineRT{fakeRT: fakeRT{c: c, w: w}, left: left}, nil
	}
	sel, err := Detect(context.Background(), o)
	require.NoError(t, err)
	defer sel.Runtime.Close()
	got := <-left
	assert.Greater(t, got, time.Second+AnsweredGrace-5*time.Second, "Version's deadline is the ping timeout plus the grace")
	assert.LessOrEqual(t, got, time.Second+AnsweredGrace)
}
