// Package fakeruntime is an in-memory runtime.ContainerRuntime for unit
// tests of the lifecycle code: the provisioner and the janitor. It honours
// the port's contract (error kinds, idempotency, label selection across
// states, anonymous volumes removed with their container, container IDs
// that are never reused) and adds what tests need to steer it: failures
// injected per verb and object, exec results scripted per probe command,
// an injectable clock, call counts and the peak number of concurrent calls
// per verb.
//
// Published ports are real: each one is a listener on 127.0.0.1 that
// accepts and closes connections, so host-mode code that dials the
// published port works against the fake.
package fakeruntime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/roboco/sandboxer/runtime"
)

// Verbs, as they appear in Call.Verb, Calls and injected failures.
const (
	VerbVersion       = "version"
	VerbImageExists   = "image-exists"
	VerbPull          = "pull"
	VerbImageID       = "image-id"
	VerbImageConfig   = "image-config"
	VerbSaveImage     = "save-image"
	VerbLoadImage     = "load-image"
	VerbRemoveImage   = "remove-image"
	VerbRun           = "run"
	VerbCreate        = "create"
	VerbInspect       = "inspect"
	VerbExec          = "exec"
	VerbStop          = "stop"
	VerbKill          = "kill"
	VerbRemove        = "remove"
	VerbList          = "list"
	VerbSnapshot      = "snapshot"
	VerbCreateNetwork = "create-network"
	VerbRemoveNetwork = "remove-network"
	VerbListNetworks  = "list-networks"
	VerbAdopt         = "adopt"
)

// DefaultNetwork is the network containers join when their spec names none.
const DefaultNetwork = "bridge"

// Call is one verb invocation, as hooks see it.
type Call struct {
	Verb string
	// Object is the container name or ID, image ref or network name the
	// verb was called with ("" for version and list).
	Object string
	// N is the 1-based count of calls of this verb so far, this one
	// included.
	N int
	// Exec is the exec's spec (VerbExec only).
	Exec runtime.ExecSpec
	// Run is the run or create spec (VerbRun, VerbCreate only).
	Run runtime.RunSpec
}

// Hook runs at the start of every verb, before the fake does anything. A
// non-nil error is returned by the verb (wrapped in a *runtime.Error naming
// the fake, the verb and the object). A hook may block, for example to hold
// calls until several are in flight; it must honour ctx.
type Hook func(ctx context.Context, call Call) error

// ExecFunc answers an exec instead of the script.
type ExecFunc func(ctx context.Context, c runtime.Container, spec runtime.ExecSpec) (runtime.ExecResult, error)

// Result is one scripted exec outcome.
type Result struct {
	ExitCode int
	Stdout   string
	Stderr   string
	// Err, when set, is returned as the exec's error.
	Err error
}

// Runtime is the fake. The zero value is not usable; call New.
type Runtime struct {
	name string

	mu          sync.Mutex
	now         func() time.Time
	images      map[string][]string // present: ref -> VOLUME paths
	remote      map[string][]string // pullable: ref -> VOLUME paths
	imageEnv    map[string][]string // ref -> its config's Env (SetImageEnv)
	archives    map[string][]byte   // ref -> its docker-archive, once made
	containers  map[string]*container
	networks    map[string]runtime.Network
	volumes     map[string]string // anonymous volume name -> container ID
	hooks       []Hook
	exec        ExecFunc
	scripts     map[string][]Result
	cursors     map[string]int // container ID + argv0 -> next script index
	calls       map[string]int
	inflight    map[string]int
	maxInflight map[string]int
	nextIP      int
	rootless    bool
	// used holds every container ID the fake has given out or been
	// seeded with: none is ever given to another container.
	used map[string]bool
}

type container struct {
	c         runtime.Container
	listeners []net.Listener
}

// New returns an empty fake named "fake" with the real clock.
func New() *Runtime {
	return &Runtime{
		name:        "fake",
		now:         time.Now,
		images:      map[string][]string{},
		remote:      map[string][]string{},
		imageEnv:    map[string][]string{},
		archives:    map[string][]byte{},
		containers:  map[string]*container{},
		networks:    map[string]runtime.Network{DefaultNetwork: {ID: randomID(), Name: DefaultNetwork}},
		volumes:     map[string]string{},
		scripts:     map[string][]Result{},
		cursors:     map[string]int{},
		calls:       map[string]int{},
		inflight:    map[string]int{},
		maxInflight: map[string]int{},
		used:        map[string]bool{},
	}
}

// AddImage makes ref present locally. volumes are the image's VOLUME paths:
// a container that does not cover one with a tmpfs gets an anonymous volume
// for it.
func (f *Runtime) AddImage(ref string, volumes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[ref] = volumes
	delete(f.archives, ref) // other content under the same ref
}

// SetImageEnv gives ref's image config the Env env ("KEY=value"), as
// ImageConfig and SaveImage report it.
func (f *Runtime) SetImageEnv(ref string, env ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imageEnv[ref] = env
	delete(f.archives, ref)
}

// AddRemoteImage makes ref pullable (absent until pulled).
func (f *Runtime) AddRemoteImage(ref string, volumes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.remote[ref] = volumes
}

// SetClock replaces the clock that stamps creation times.
func (f *Runtime) SetClock(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = now
}

// OnCall adds a hook that runs at the start of every verb.
func (f *Runtime) OnCall(h Hook) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hooks = append(f.hooks, h)
}

// Fail makes every call of verb on object return err (object "" matches
// every object).
func (f *Runtime) Fail(verb, object string, err error) {
	f.OnCall(func(_ context.Context, c Call) error {
		if c.Verb == verb && (object == "" || c.Object == object) {
			return err
		}
		return nil
	})
}

// FailNth makes the n-th call (1-based) of verb return err.
func (f *Runtime) FailNth(verb string, n int, err error) {
	f.OnCall(func(_ context.Context, c Call) error {
		if c.Verb == verb && c.N == n {
			return err
		}
		return nil
	})
}

// SetExec answers every exec with fn instead of the script.
func (f *Runtime) SetExec(fn ExecFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exec = fn
}

// Script sets the outcomes of execs whose argv[0] is argv0. Each container
// walks the sequence on its own; the last result repeats. An exec with no
// script exits 0 with no output.
func (f *Runtime) Script(argv0 string, results ...Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scripts[argv0] = results
}

// Calls returns how many times verb has been called.
func (f *Runtime) Calls(verb string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[verb]
}

// MaxInFlight returns the largest number of calls of verb that were running
// at the same time.
func (f *Runtime) MaxInFlight(verb string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxInflight[verb]
}

// Containers returns every container, sorted by name.
func (f *Runtime) Containers() []runtime.Container {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]runtime.Container, 0, len(f.containers))
	for _, c := range f.containers {
		out = append(out, copyContainer(c.c))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Volumes returns the names of the anonymous volumes that exist.
func (f *Runtime) Volumes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.volumes))
}

// Seed adds c as is (no hooks, no listeners, no volumes): for tests that
// need many containers in given states and ages. An empty ID is generated;
// an ID the fake has had before panics (IDs are never reused, on any
// backend); nil maps are allowed.
func (f *Runtime) Seed(c runtime.Container) runtime.Container {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.ID == "" {
		c.ID = randomID()
	}
	if f.used[c.ID] {
		panic("fakeruntime: Seed reuses ID " + c.ID + ": container IDs are never reused")
	}
	f.used[c.ID] = true
	if c.Created.IsZero() {
		c.Created = f.now()
	}
	if c.State == "" {
		c.State = runtime.StateRunning
	}
	f.containers[c.ID] = &container{c: copyContainer(c)}
	return copyContainer(c)
}

// SetState changes a container's state (to simulate a crash, say). It
// returns false when the container does not exist.
func (f *Runtime) SetState(ref string, state runtime.State, exitCode int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.lookup(ref)
	if c == nil {
		return false
	}
	c.c.State = state
	c.c.ExitCode = exitCode
	if state != runtime.StateRunning {
		c.closeListeners()
	}
	return true
}

// begin counts a call, runs the hooks and returns the function that ends it.
func (f *Runtime) begin(ctx context.Context, call Call) (func(), error) {
	f.mu.Lock()
	f.calls[call.Verb]++
	call.N = f.calls[call.Verb]
	f.inflight[call.Verb]++
	if f.inflight[call.Verb] > f.maxInflight[call.Verb] {
		f.maxInflight[call.Verb] = f.inflight[call.Verb]
	}
	hooks := slices.Clone(f.hooks)
	f.mu.Unlock()
	end := func() {
		f.mu.Lock()
		f.inflight[call.Verb]--
		f.mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		end()
		return nil, f.err(call.Verb, call.Object, nil, err)
	}
	for _, h := range hooks {
		if err := h(ctx, call); err != nil {
			end()
			return nil, f.err(call.Verb, call.Object, nil, err)
		}
	}
	return end, nil
}

func (f *Runtime) err(op, object string, kind, cause error) error {
	return runtime.NewError(f.name, op, object, kind, cause)
}

// lookup finds a container by ID, ID prefix or name. f.mu must be held.
func (f *Runtime) lookup(ref string) *container {
	if c, ok := f.containers[ref]; ok {
		return c
	}
	for _, c := range f.containers {
		if c.c.Name == ref {
			return c
		}
	}
	if len(ref) >= 12 {
		for id, c := range f.containers {
			if strings.HasPrefix(id, ref) {
				return c
			}
		}
	}
	return nil
}

// Name returns "fake".
func (f *Runtime) Name() string { return f.name }

// Endpoint returns a made-up address.
func (f *Runtime) Endpoint() string { return "memory://fake" }

// Version answers a ping.
func (f *Runtime) Version(ctx context.Context) (runtime.Info, error) {
	end, err := f.begin(ctx, Call{Verb: VerbVersion})
	if err != nil {
		return runtime.Info{}, err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	return runtime.Info{Runtime: f.name, Endpoint: f.Endpoint(), Version: "0", CgroupVersion: "2", Rootless: f.rootless}, nil
}

// SetRootless makes Version report a rootless runtime.
func (f *Runtime) SetRootless(rootless bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rootless = rootless
}

// ImageExists reports whether ref is present.
func (f *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	end, err := f.begin(ctx, Call{Verb: VerbImageExists, Object: ref})
	if err != nil {
		return false, err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.images[ref]
	return ok, nil
}

// PullImage makes a remote image present; any other ref is ErrImageNotFound.
func (f *Runtime) PullImage(ctx context.Context, ref string, progress runtime.ProgressFunc) error {
	end, err := f.begin(ctx, Call{Verb: VerbPull, Object: ref})
	if err != nil {
		return err
	}
	defer end()
	f.mu.Lock()
	vols, ok := f.remote[ref]
	if ok {
		f.images[ref] = vols
	}
	f.mu.Unlock()
	if !ok {
		return f.err(VerbPull, ref, runtime.ErrImageNotFound, nil)
	}
	if progress != nil {
		progress(runtime.PullProgress{Ref: ref, Status: "Pull complete", Current: 1, Total: 1})
	}
	return nil
}

// Run creates and starts a container.
func (f *Runtime) Run(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	return f.create(ctx, VerbRun, spec, true)
}

// Create creates a container without starting it.
func (f *Runtime) Create(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	return f.create(ctx, VerbCreate, spec, false)
}

func (f *Runtime) create(ctx context.Context, verb string, spec runtime.RunSpec, start bool) (runtime.Container, error) {
	end, err := f.begin(ctx, Call{Verb: verb, Object: spec.Name, Run: spec})
	if err != nil {
		return runtime.Container{}, err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	vols, ok := f.images[spec.Image]
	if !ok {
		return runtime.Container{}, f.err(verb, spec.Name, runtime.ErrImageNotFound, fmt.Errorf("image %q not present", spec.Image))
	}
	if spec.Name != "" && f.lookup(spec.Name) != nil {
		return runtime.Container{}, f.err(verb, spec.Name, runtime.ErrAlreadyExists, nil)
	}
	network := spec.Network
	if network == "" {
		network = DefaultNetwork
	}
	if _, ok := f.networks[network]; !ok {
		return runtime.Container{}, f.err(verb, spec.Name, runtime.ErrNotFound, fmt.Errorf("network %q", network))
	}
	id := randomID()
	f.used[id] = true
	name := spec.Name
	if name == "" {
		name = "fake_" + id[:8]
	}
	c := &container{c: runtime.Container{
		ID:      id,
		Name:    name,
		Image:   spec.Image,
		Labels:  maps.Clone(spec.Labels),
		State:   runtime.StateCreated,
		Created: f.now(),
	}}
	if c.c.Labels == nil {
		c.c.Labels = map[string]string{}
	}
	for _, p := range slices.Sorted(maps.Keys(spec.Tmpfs)) {
		c.c.Mounts = append(c.c.Mounts, runtime.Mount{Type: "tmpfs", Destination: p})
	}
	for _, v := range vols {
		if _, covered := spec.Tmpfs[v]; covered {
			continue
		}
		vol := randomID()
		f.volumes[vol] = id
		c.c.Mounts = append(c.c.Mounts, runtime.Mount{Type: "volume", Source: vol, Destination: v})
	}
	if start {
		f.nextIP++
		c.c.Networks = map[string]string{network: f.address(network, f.nextIP)}
		for _, p := range spec.Ports {
			b, l, err := publish(p)
			if err != nil {
				c.closeListeners()
				f.dropVolumes(id)
				return runtime.Container{}, f.err(verb, name, nil, err)
			}
			c.c.Ports = append(c.c.Ports, b)
			c.listeners = append(c.listeners, l)
		}
		c.c.State = runtime.StateRunning
	}
	f.containers[id] = c
	return copyContainer(c.c), nil
}

// address makes a stable-looking IPv4 address on network.
func (f *Runtime) address(network string, n int) string {
	if network == DefaultNetwork {
		return fmt.Sprintf("172.17.%d.%d", n/250, n%250+2)
	}
	names := slices.Sorted(maps.Keys(f.networks))
	return fmt.Sprintf("10.%d.%d.%d", 88+slices.Index(names, network)%100, n/250, n%250+2)
}

func publish(p runtime.PortSpec) (runtime.PortBinding, net.Listener, error) {
	hostIP := p.HostIP
	if hostIP == "" {
		hostIP = runtime.DefaultHostIP
	}
	proto := p.Protocol
	if proto == "" {
		proto = "tcp"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(hostIP, fmt.Sprint(p.HostPort)))
	if err != nil {
		return runtime.PortBinding{}, nil, fmt.Errorf("publish %d: %w", p.ContainerPort, err)
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	return runtime.PortBinding{
		ContainerPort: p.ContainerPort,
		Protocol:      proto,
		HostIP:        hostIP,
		HostPort:      l.Addr().(*net.TCPAddr).Port,
	}, l, nil
}

func (c *container) closeListeners() {
	for _, l := range c.listeners {
		l.Close()
	}
	c.listeners = nil
}

// dropVolumes deletes the anonymous volumes of container id. f.mu must be
// held.
func (f *Runtime) dropVolumes(id string) {
	for v, owner := range f.volumes {
		if owner == id {
			delete(f.volumes, v)
		}
	}
}

// Inspect reports a container; an absent one is ErrNotFound.
func (f *Runtime) Inspect(ctx context.Context, ref string) (runtime.Container, error) {
	end, err := f.begin(ctx, Call{Verb: VerbInspect, Object: ref})
	if err != nil {
		return runtime.Container{}, err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.lookup(ref)
	if c == nil {
		return runtime.Container{}, f.err(VerbInspect, ref, runtime.ErrNotFound, nil)
	}
	return copyContainer(c.c), nil
}

// Exec answers from SetExec's function, else from the script of argv[0],
// else with exit 0. The container must be running.
func (f *Runtime) Exec(ctx context.Context, ref string, spec runtime.ExecSpec) (runtime.ExecResult, error) {
	end, err := f.begin(ctx, Call{Verb: VerbExec, Object: ref, Exec: spec})
	if err != nil {
		return runtime.ExecResult{}, err
	}
	defer end()
	f.mu.Lock()
	c := f.lookup(ref)
	if c == nil {
		f.mu.Unlock()
		return runtime.ExecResult{}, f.err(VerbExec, ref, runtime.ErrNotFound, nil)
	}
	if !c.c.Running() {
		f.mu.Unlock()
		return runtime.ExecResult{}, f.err(VerbExec, ref, nil, fmt.Errorf("container is %s", c.c.State))
	}
	snapshot := copyContainer(c.c)
	fn := f.exec
	var res Result
	if fn == nil && len(spec.Cmd) > 0 {
		if script := f.scripts[spec.Cmd[0]]; len(script) > 0 {
			key := c.c.ID + "\x00" + spec.Cmd[0]
			i := min(f.cursors[key], len(script)-1)
			f.cursors[key] = i + 1
			res = script[i]
		}
	}
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, snapshot, spec)
	}
	if res.Err != nil {
		return runtime.ExecResult{}, f.err(VerbExec, ref, nil, res.Err)
	}
	return runtime.ExecResult{ExitCode: res.ExitCode, Stdout: []byte(res.Stdout), Stderr: []byte(res.Stderr)}, nil
}

// Stop stops a running container (exit code 143); a stopped one is a no-op.
func (f *Runtime) Stop(ctx context.Context, ref string, _ time.Duration) error {
	return f.halt(ctx, VerbStop, ref, 143)
}

// Kill stops a running container (exit code 137); a stopped one is a no-op.
func (f *Runtime) Kill(ctx context.Context, ref string) error {
	return f.halt(ctx, VerbKill, ref, 137)
}

func (f *Runtime) halt(ctx context.Context, verb, ref string, code int) error {
	end, err := f.begin(ctx, Call{Verb: verb, Object: ref})
	if err != nil {
		return err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.lookup(ref)
	if c == nil {
		return f.err(verb, ref, runtime.ErrNotFound, nil)
	}
	if c.c.Running() {
		c.c.State = runtime.StateExited
		c.c.ExitCode = code
		c.closeListeners()
	}
	return nil
}

// Remove deletes a container and its anonymous volumes; an absent one is not
// an error.
func (f *Runtime) Remove(ctx context.Context, ref string) error {
	end, err := f.begin(ctx, Call{Verb: VerbRemove, Object: ref})
	if err != nil {
		return err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.lookup(ref)
	if c == nil {
		return nil
	}
	f.removeLocked(c)
	return nil
}

// removeLocked deletes c, its anonymous volumes and, as a cluster's
// garbage collector would, every container adopted by it (see Adopting).
// f.mu must be held.
func (f *Runtime) removeLocked(c *container) {
	c.closeListeners()
	f.dropVolumes(c.c.ID)
	delete(f.containers, c.c.ID)
	for _, d := range f.containers {
		if d.c.AdoptedBy != "" && (d.c.AdoptedBy == c.c.Name || d.c.AdoptedBy == c.c.ID) {
			f.removeLocked(d)
		}
	}
}

// List returns the containers whose labels match selector, in every state,
// sorted by name, without mounts (as the port specifies).
func (f *Runtime) List(ctx context.Context, selector map[string]string) ([]runtime.Container, error) {
	end, err := f.begin(ctx, Call{Verb: VerbList})
	if err != nil {
		return nil, err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []runtime.Container
	for _, c := range f.containers {
		if runtime.MatchLabels(c.c.Labels, selector) {
			cc := copyContainer(c.c)
			cc.Mounts = nil
			out = append(out, cc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Snapshot returns List's result for selector and the ID and name of every
// container, in one call.
func (f *Runtime) Snapshot(ctx context.Context, selector map[string]string) (runtime.Snapshot, error) {
	end, err := f.begin(ctx, Call{Verb: VerbSnapshot})
	if err != nil {
		return runtime.Snapshot{}, err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	snap := runtime.Snapshot{Refs: make(map[string]bool, 2*len(f.containers))}
	for _, c := range f.containers {
		snap.Refs[c.c.ID] = true
		if c.c.Name != "" {
			snap.Refs[c.c.Name] = true
		}
		if runtime.MatchLabels(c.c.Labels, selector) {
			cc := copyContainer(c.c)
			cc.Mounts = nil
			snap.Matched = append(snap.Matched, cc)
		}
	}
	sort.Slice(snap.Matched, func(i, j int) bool { return snap.Matched[i].Name < snap.Matched[j].Name })
	return snap, nil
}

// CreateNetwork creates a network; a taken name is ErrAlreadyExists.
func (f *Runtime) CreateNetwork(ctx context.Context, spec runtime.NetworkSpec) (runtime.Network, error) {
	end, err := f.begin(ctx, Call{Verb: VerbCreateNetwork, Object: spec.Name})
	if err != nil {
		return runtime.Network{}, err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.networks[spec.Name]; ok {
		return runtime.Network{}, f.err(VerbCreateNetwork, spec.Name, runtime.ErrAlreadyExists, nil)
	}
	n := runtime.Network{ID: randomID(), Name: spec.Name, Labels: maps.Clone(spec.Labels), Internal: spec.Internal}
	f.networks[spec.Name] = n
	return n, nil
}

// ListNetworks returns the created networks (not the default one) whose
// labels match selector, sorted by name.
func (f *Runtime) ListNetworks(ctx context.Context, selector map[string]string) ([]runtime.Network, error) {
	end, err := f.begin(ctx, Call{Verb: VerbListNetworks})
	if err != nil {
		return nil, err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []runtime.Network
	for name, n := range f.networks {
		if name == DefaultNetwork || !runtime.MatchLabels(n.Labels, selector) {
			continue
		}
		n.Labels = maps.Clone(n.Labels)
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveNetwork deletes a network; an absent one is not an error, one a
// container is still on is ErrInUse.
func (f *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	end, err := f.begin(ctx, Call{Verb: VerbRemoveNetwork, Object: name})
	if err != nil {
		return err
	}
	defer end()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		if _, on := c.c.Networks[name]; on {
			return f.err(VerbRemoveNetwork, name, runtime.ErrInUse, nil)
		}
	}
	delete(f.networks, name)
	return nil
}

// Close closes every published port's listener.
func (f *Runtime) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		c.closeListeners()
	}
	return nil
}

func copyContainer(c runtime.Container) runtime.Container {
	c.Labels = maps.Clone(c.Labels)
	c.Networks = maps.Clone(c.Networks)
	c.Ports = slices.Clone(c.Ports)
	c.Mounts = slices.Clone(c.Mounts)
	return c
}

func randomID() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

var (
	_ runtime.ContainerRuntime = (*Runtime)(nil)
	_ runtime.ImageStore       = (*Runtime)(nil)
)
