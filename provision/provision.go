// Package provision is the sandbox lifecycle: Provision starts, for an
// owner (an agent id) and a set of services, one sibling container per
// service, proves each ready from inside with the credentials it hands
// out, and returns the env consumers read; Teardown removes an owner's
// sandboxes. It is written only against the runtime port and iterates the
// engine registry; it never knows which backend it drives.
//
// Provisioning is fail-loud: if any service fails, every sandbox the call
// started is torn down before one *Error says which service failed and why.
package provision

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/ids"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/runtime"
)

// Polling of the readiness probe: fast at first, because a redis is up in
// tens of milliseconds, then backing off to a cap. An exec costs the
// runtime ~50 ms itself, so a 100 ms cap keeps a waiting postgres at a few
// execs a second while adding ~50 ms on average to its readiness.
const (
	pollFirst   = 20 * time.Millisecond
	pollMax     = 100 * time.Millisecond
	attemptMax  = 30 * time.Second // one probe exec: mongosh alone boots Node.js
	cleanupTime = 60 * time.Second // a Run that must finish after ctx ends
	outputMax   = 2048
)

// Provisioner provisions and tears down sandboxes on one runtime.
type Provisioner struct {
	rt   runtime.ContainerRuntime
	opts Options
	keys labels.Keys
	// buildFailed maps a template ref to when its build last failed (see
	// buildRetry).
	buildFailed sync.Map
	// images is rt's image store (runtime.ImageStore, asked for once in
	// New); nil for a runtime that has none (a cluster, whose kubelet
	// pulls): Run pulls, so its deadline includes the pull timeout, and
	// warm start is off on it.
	images runtime.ImageStore
	// flights counts each owner's calls in flight (see flights).
	flights flights
}

// New returns a Provisioner for rt. It checks opts (Options.Validate: an
// invalid option is an ErrInvalid error) but does not talk to the runtime.
func New(rt runtime.ContainerRuntime, opts Options) (*Provisioner, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	// The maps are the caller's: a later change of theirs must not reach
	// the provisions of this Provisioner.
	o.Images, o.Labels = maps.Clone(o.Images), maps.Clone(o.Labels)
	images, _ := runtime.As[runtime.ImageStore](rt)
	return &Provisioner{rt: rt, images: images, opts: o, keys: labels.For(o.LabelPrefix)}, nil
}

// Images returns the image each registered engine runs with, after
// overrides.
func (p *Provisioner) Images() map[string]string {
	out := map[string]string{}
	for _, e := range p.opts.Registry.All() {
		out[e.Spec().Name] = p.opts.image(e.Spec())
	}
	return out
}

// Labels returns the label keys this provisioner writes.
func (p *Provisioner) Labels() labels.Keys { return p.keys }

// OwnerName returns the owner container name for ownerID.
func (p *Provisioner) OwnerName(ownerID string) string { return p.opts.OwnerName(ownerID) }

// call is one Provision's shared state.
type call struct {
	id      string // the call label's value
	ownerID string
	owner   string
	redact  redactor
	// stale is what pre-clear may remove: a same-named sandbox of the
	// owner from before the call, past the grace window, whose owner is
	// gone; blocked says, by name, why one that is there may not be
	// removed (an ErrConflict error). Both are read only after listed is
	// closed, and listErr says whether the list failed.
	stale   map[string]runtime.Container
	blocked map[string]error
	listed  chan struct{}
	listErr error
	// net is the owner's network (nil when the sandboxes join the
	// caller's, Options.Network).
	net *ownerNet
}

// service is one service's work within a call.
type service struct {
	engine engines.Engine
	spec   engines.Spec
	cred   engines.Credentials
	name   string
	image  string
	// img is where image keeps its data, as its config says (read by
	// ensureImage or readImage; unknown on a runtime without an image
	// store).
	img     engines.Image
	started time.Time
	// created is the container this service ran (zero until Run
	// returned); read after the errgroup is done.
	created runtime.Container
	result  Container
	mode    Readiness // how it was judged ready
	// template is the warm template the current start runs ("": cold).
	template string
}

// Provision starts services for ownerID and returns them ready, or fails
// with nothing of this call left running. Services are provisioned in
// parallel; the result lists them in registry order whatever order they
// were asked in.
func (p *Provisioner) Provision(ctx context.Context, ownerID string, services []string) (Sandbox, error) {
	if err := p.opts.ValidateOwnerID(ownerID); err != nil {
		return Sandbox{}, err
	}
	engs, err := ValidateServices(p.opts.Registry, services)
	if err != nil {
		return Sandbox{}, err
	}
	c := &call{id: ids.Hex(8), ownerID: ownerID, owner: p.opts.OwnerName(ownerID)}
	svcs := make([]*service, len(engs))
	for i, e := range engs {
		cred, err := engines.NewCredentials()
		if err != nil {
			return Sandbox{}, fmt.Errorf("provision %s: %w", c.owner, err)
		}
		spec := e.Spec()
		svcs[i] = &service{
			engine: e,
			spec:   spec,
			cred:   cred,
			name:   ContainerName(p.opts.LabelPrefix, spec.Short, ownerID),
			image:  p.opts.image(spec),
		}
		c.redact = append(c.redact, cred.Password)
	}

	g, gctx := errgroup.WithContext(ctx)
	if p.ownsNetwork() {
		p.flights.enter(c.owner)
		// The owner's network is made while the images are checked: the
		// services need it only when they run.
		c.net = &ownerNet{name: OwnerNetworkName(c.owner), ready: make(chan struct{})}
		g.Go(func() error {
			defer close(c.net.ready)
			c.net.err = p.ensureNetwork(gctx, c.owner, c.net)
			return c.net.err
		})
	}
	// The owner's sandboxes are listed while each service checks its image:
	// the pre-clear needs the list, the image check does not, and one
	// round trip less is what a provision costs beyond a bare run.
	c.listed = make(chan struct{})
	g.Go(func() error {
		defer close(c.listed)
		if c.listErr = p.listExisting(gctx, c, svcs); c.listErr != nil {
			return c.listErr
		}
		return nil
	})
	for _, s := range svcs {
		g.Go(func() error { return p.provisionOne(gctx, c, s) })
	}
	if err := g.Wait(); err != nil {
		rbErr := p.rollback(ctx, c, svcs)
		var pe *Error
		if errors.As(err, &pe) {
			pe.Rollback = c.redact.Error(rbErr)
		} else {
			err = errors.Join(c.redact.Error(err), rbErr)
		}
		return Sandbox{}, err
	}
	if c.net != nil {
		// Its sandboxes run: the network stays with them.
		p.flights.leave(c.owner, c.net.made)
	}

	sb := Sandbox{OwnerID: ownerID, Owner: c.owner, Network: p.joined(c), call: c.id}
	for _, s := range svcs {
		sb.Containers = append(sb.Containers, s.result)
		sb.Env = append(sb.Env, s.engine.Env(p.opts.EnvPrefix, s.result.Endpoint, s.cred)...)
	}
	created := make([]runtime.Container, len(svcs))
	for i, s := range svcs {
		created[i] = s.created
	}
	if p.adoptCreated(ctx, c.owner, created) {
		sb.AdoptedBy = c.owner
	}
	return sb, nil
}

// provisionOne takes one service from image to ready.
func (p *Provisioner) provisionOne(ctx context.Context, c *call, s *service) error {
	s.started = time.Now()
	fail := func(stage string, err error, output string) error {
		e := &Error{
			Owner:       c.owner,
			Service:     s.spec.Name,
			Container:   s.name,
			Image:       s.image,
			Stage:       stage,
			Err:         c.redact.Error(err),
			ProbeOutput: c.redact.String(output),
			Elapsed:     time.Since(s.started),
		}
		if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			// not merely cancelled because a sibling failed first
			p.emit(ctx, p.event(EventFailed, c, s, func(ev *Event) { ev.Err = e }))
		}
		return e
	}

	if err := p.ensureImage(ctx, c, s); err != nil {
		return fail("pull", err, "")
	}
	if err := p.readImage(ctx, s); err != nil {
		return fail("image", err, "")
	}
	<-c.listed // bounded: the List has ctx
	if c.listErr != nil {
		return c.listErr
	}
	if err := p.preClear(ctx, c, s); err != nil {
		return fail("pre-clear", err, "")
	}
	if c.net != nil {
		<-c.net.ready // bounded: CallTimeout
		if c.net.err != nil {
			return fail("network", c.net.err, "")
		}
	}

	spec := p.runSpec(c, s)
	if w, ok := p.warmer(s); ok {
		spec = p.warmSpec(ctx, c, s, w, spec)
	}
	stage, output, err := p.start(ctx, c, s, spec)
	if err != nil && s.template != "" && canFallBack(ctx, err) {
		if aerr := p.abandonWarm(ctx, c, s, err); aerr != nil {
			return fail(stage, errors.Join(err, aerr), output)
		}
		stage, output, err = p.start(ctx, c, s, p.runSpec(c, s))
	}
	if err != nil {
		return fail(stage, err, output)
	}
	return nil
}

// start runs spec and waits until it is ready; on failure it returns the
// stage that failed and the probe's output.
func (p *Provisioner) start(ctx context.Context, c *call, s *service, spec runtime.RunSpec) (stage, output string, err error) {
	// A service whose sibling has failed (or whose caller gave up) starts
	// nothing: the call is being rolled back.
	if err := ctx.Err(); err != nil {
		return "run", "", err
	}
	// A Run is never cut short by a sibling's failure or the caller giving
	// up: the daemon finishes a create whose client went away, and the
	// container would appear after the rollback looked. Run is quick, so
	// it completes, and the rollback then removes what it made. Where Run
	// pulls (no image store), the pull is part of it, and so is its time.
	runTimeout := cleanupTime
	pulls := p.images == nil
	if pulls {
		runTimeout += p.opts.PullTimeout
	}
	runStart := time.Now()
	runCtx, cancelRun := context.WithTimeout(context.WithoutCancel(ctx), runTimeout)
	ctr, err := p.rt.Run(runCtx, spec)
	cancelRun()
	if err != nil && c.net != nil && errors.Is(err, runtime.ErrNotFound) && !errors.Is(err, runtime.ErrImageNotFound) && ctx.Err() == nil {
		// A concurrent teardown of the owner's last sandbox removed the
		// network between its create and this Run: make it once more.
		if nerr := p.recreateNetwork(ctx, c.owner, c.net); nerr != nil {
			return "network", "", errors.Join(err, nerr)
		}
		runCtx, cancelRun := context.WithTimeout(context.WithoutCancel(ctx), runTimeout)
		ctr, err = p.rt.Run(runCtx, spec)
		cancelRun()
	}
	if err != nil {
		switch {
		case errors.Is(err, runtime.ErrAlreadyExists):
			err = fmt.Errorf("%w: %w", ErrConflict, err)
		case pulls && errors.Is(err, context.DeadlineExceeded):
			return "pull", "", fmt.Errorf("pull timed out: %s pulls %s as it runs it, and the run gave up after %s (pull timeout %s): %w",
				p.rt.Name(), spec.Image, time.Since(runStart).Round(time.Second), p.opts.PullTimeout, err)
		}
		return "run", "", err
	}
	s.created = ctr
	if err := ctx.Err(); err != nil {
		return "run", "", err
	}
	p.emit(ctx, p.event(EventStarted, c, s, func(ev *Event) { ev.Template = s.template }))

	readyTimeout := s.spec.ReadyTimeout
	if p.opts.ReadyTimeout > 0 {
		readyTimeout = p.opts.ReadyTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()

	probeHost, err := p.address(rctx, ctr, spec.Network)
	if err != nil {
		return "run", "", err
	}
	own := engines.Endpoint{Host: probeHost, Port: s.spec.Port}
	// The consumer's endpoint: the published port in host mode, the
	// sandbox's own address on its network otherwise (the caller's, or
	// the owner's private one).
	endpoint := own
	if p.hostMode() {
		if endpoint, err = p.published(rctx, ctr, s.spec.Port); err != nil {
			return "publish", "", err
		}
	}

	cp := p.plan(rctx, s, endpoint)
	var attempts int
	if cp.mode == ReadinessWire {
		url, _ := engines.URLVar(s.engine.Env(p.opts.EnvPrefix, endpoint, s.cred))
		attempts, err = p.waitWire(ctx, rctx, ctr.ID, s.engine.(engines.WireChecker), url.Value, readyTimeout)
		if err != nil {
			return "probe", "", fmt.Errorf("over the wire at %s: %w", hostPortOf(endpoint), err)
		}
	} else {
		attempts, output, err = p.waitReady(ctx, rctx, ctr.ID, s.engine.Probe(own, s.cred), readyTimeout)
		if err != nil {
			return "probe", output, err
		}
		if p.hostMode() {
			// The exec probe ran inside; the consumer dials the published port.
			if err := waitDial(ctx, rctx, endpoint, readyTimeout); err != nil {
				return "publish", "", err
			}
		}
	}
	s.mode = cp.mode

	s.result = Container{Name: s.name, ID: ctr.ID, Engine: s.spec.Name, Image: s.image, Endpoint: endpoint}
	p.emit(ctx, p.event(EventReady, c, s, func(ev *Event) {
		ev.Attempts = attempts
		ev.Readiness = cp.mode
		ev.ReadinessWhy = cp.why
		ev.Template = s.template
	}))
	return "", "", nil
}

func (p *Provisioner) event(kind EventKind, c *call, s *service, set func(*Event)) Event {
	ev := Event{Kind: kind, Owner: c.owner, Service: s.spec.Name, Container: s.name, Image: s.image, Elapsed: time.Since(s.started)}
	if set != nil {
		set(&ev)
	}
	return ev
}

// ensureImage pulls the image only when it is absent. A runtime without
// an image store of its own (no runtime.ImageStore: a cluster, whose
// kubelet pulls) pulls at Run, which still says runtime.ErrImageNotFound
// for an image it cannot have.
func (p *Provisioner) ensureImage(ctx context.Context, c *call, s *service) error {
	if p.images == nil {
		return nil // Run pulls
	}
	ok, err := p.imageExists(ctx, s.image)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	p.emit(ctx, p.event(EventPullStart, c, s, nil))
	pctx, cancel := context.WithTimeout(ctx, p.opts.PullTimeout)
	defer cancel()
	err = p.images.PullImage(pctx, s.image, func(pp runtime.PullProgress) {
		p.emit(ctx, p.event(EventPullProgress, c, s, func(ev *Event) { ev.Progress = &pp }))
	})
	if err != nil {
		if ctx.Err() == nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("pull timed out after %s: %w", p.opts.PullTimeout, err)
		}
		return err
	}
	p.emit(ctx, p.event(EventPulled, c, s, nil))
	return nil
}

// readImage reads where s's image keeps its data from its config, for the
// engine to lay the sandbox out by (engines.Image). A runtime without an
// image store (no runtime.ImageStore) leaves it unknown. An image no
// sandbox can be laid out on is engines.ErrImageLayout.
func (p *Provisioner) readImage(ctx context.Context, s *service) error {
	if p.images == nil {
		return nil // no config to read
	}
	cctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	defer cancel()
	cfg, err := p.images.ImageConfig(cctx, s.image)
	if err != nil {
		return err
	}
	s.img, err = engines.ImageOf(s.image, cfg)
	return err
}

// listExisting lists the owner's sandboxes and sorts the same-named ones
// (one per service of the call) into what pre-clear may remove and what
// it may not (see preClear). An owner is judged as the janitor judges it
// (lifetime.Judge), from one snapshot taken only when a same-named
// sandbox is past the grace window.
func (p *Provisioner) listExisting(ctx context.Context, c *call, svcs []*service) error {
	lctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	existing, err := p.rt.List(lctx, p.keys.OwnedBy(c.owner))
	cancel()
	if err != nil {
		return fmt.Errorf("provision %s: list existing sandboxes: %w", c.owner, err)
	}
	c.stale, c.blocked = map[string]runtime.Container{}, map[string]error{}
	old := map[string]runtime.Container{}
	for _, x := range existing {
		if !slices.ContainsFunc(svcs, func(s *service) bool { return s.name == x.Name }) {
			continue
		}
		// Zero only under NoPreClearGrace: then even a creation time
		// ahead of this clock (skew) is past it.
		if age := p.opts.Now().Sub(x.Created); p.opts.PreClearGrace > 0 && age < p.opts.PreClearGrace {
			c.blocked[x.Name] = fmt.Errorf("%w: %s exists and is %s old, younger than the %s grace window (another provision may be in flight; tear it down first)",
				ErrConflict, x.Name, age.Round(time.Second), p.opts.PreClearGrace)
			continue
		}
		old[x.Name] = x
	}
	if len(old) == 0 {
		return nil
	}
	owners := map[string]lifetime.Owner{}
	var judged []lifetime.Owner
	for name, x := range old {
		o, err := lifetime.FromLabels(p.keys, x.Labels)
		if err != nil {
			c.blocked[name] = fmt.Errorf("%w: %s exists and its owner cannot be judged, so it is left alone: %w", ErrConflict, name, err)
			continue
		}
		owners[name] = o
		judged = append(judged, o)
	}
	if len(judged) == 0 {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	defer cancel()
	snap, err := p.rt.Snapshot(sctx, p.keys.OwnedBy(c.owner))
	if err != nil {
		return fmt.Errorf("provision %s: look for the owner of existing sandboxes: %w", c.owner, err)
	}
	verdicts, jerr := lifetime.Judge(sctx, judged, snap)
	for name, o := range owners {
		alive, cause := lifetime.Verdict(verdicts, jerr, o)
		switch {
		case cause != nil:
			c.blocked[name] = fmt.Errorf("%w: %s exists and nothing tells whether its owner %s is alive, so it is left alone: %w", ErrConflict, name, o, cause)
		case alive:
			c.blocked[name] = fmt.Errorf("%w: %s exists and its owner %s is alive: a live owner's sandboxes are never replaced (tear them down first)", ErrConflict, name, o)
		default:
			c.stale[name] = old[name]
		}
	}
	return nil
}

// preClear removes what a crash-missed teardown left: a same-named sandbox
// of this owner past the grace window whose owner (container or process)
// is gone, as the janitor judges it. A younger one may be another
// provision's work in flight, and a live owner's sandbox is that owner's
// data: both are never removed, and the service fails with an ErrConflict
// error naming why (see listExisting).
func (p *Provisioner) preClear(ctx context.Context, c *call, s *service) error {
	if err := c.blocked[s.name]; err != nil {
		return err
	}
	old, ok := c.stale[s.name]
	if !ok {
		return nil
	}
	// Destroy removes by the ID listed at the start of the call: a newer
	// container under the name (another provision's, after a long pull)
	// has another ID and is left alone, and Run then reports the conflict.
	outcome, err := runtime.Destroy(ctx, p.rt, old, p.opts.CallTimeout)
	if err != nil {
		return err
	}
	if outcome == runtime.Removed {
		p.emit(ctx, p.event(EventPreCleared, c, s, nil))
	}
	return nil
}

func (p *Provisioner) runSpec(c *call, s *service) runtime.RunSpec {
	memory := p.opts.Memory(s.spec)
	cc := s.engine.Container(s.cred, engines.Limits{MemoryBytes: memory}, s.img)
	lbls := maps.Clone(p.opts.Labels)
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[p.keys.Sandbox] = labels.SandboxValue
	lbls[p.keys.Owner] = c.owner
	lbls[p.keys.Engine] = s.spec.Name
	lbls[p.keys.Call] = c.id
	spec := runtime.RunSpec{
		Name:        s.name,
		Image:       s.image,
		Env:         maps.Clone(cc.Env),
		Command:     append(slices.Clone(cc.Command), p.opts.Args[s.spec.Name]...),
		Labels:      lbls,
		Tmpfs:       maps.Clone(cc.Tmpfs),
		MemoryBytes: memory,
		CPUs:        p.opts.CPUs,
		Network:     p.joined(c),
	}
	spec.Capabilities = slices.Clone(s.spec.Capabilities) // the engine's, and no other
	if p.hostMode() {
		spec.Ports = []runtime.PortSpec{{ContainerPort: s.spec.Port, Protocol: "tcp", HostIP: runtime.DefaultHostIP}}
	}
	return spec
}

// joined is the network the call's sandboxes join: the caller's
// (Options.Network), else the owner's. A template build (a call of no
// owner) joins the runtime's default network ("").
func (p *Provisioner) joined(c *call) string {
	if !p.ownsNetwork() {
		return p.opts.Network
	}
	if c.net != nil {
		return c.net.name
	}
	return ""
}

// address is the sandbox's own non-loopback address on network (the
// caller's or the owner's), or, for network "" (a template build), on the
// network the runtime attached it to. It asks Inspect when Run's result
// does not carry it.
func (p *Provisioner) address(ctx context.Context, ctr runtime.Container, network string) (string, error) {
	if ip := pickAddress(ctr, network); ip != "" {
		return ip, nil
	}
	ctr, err := p.rt.Inspect(ctx, ctr.ID)
	if err != nil {
		return "", err
	}
	if ip := pickAddress(ctr, network); ip != "" {
		return ip, nil
	}
	if network != "" {
		return "", fmt.Errorf("no address reported on network %q", network)
	}
	return "", errors.New("no non-loopback address reported")
}

func pickAddress(ctr runtime.Container, network string) string {
	if network != "" {
		return usable(ctr.Networks[network])
	}
	for _, n := range slices.Sorted(maps.Keys(ctr.Networks)) {
		if ip := usable(ctr.Networks[n]); ip != "" {
			return ip
		}
	}
	return ""
}

// usable returns ip unless it is empty, unparsable, loopback or unspecified.
func usable(ip string) string {
	a := net.ParseIP(ip)
	if a == nil || a.IsLoopback() || a.IsUnspecified() {
		return ""
	}
	return ip
}

// published is the host address of the sandbox's published port. The
// port was asked for on runtime.DefaultHostIP: a binding the runtime
// reports on any other address (0.0.0.0, an interface's own) is an
// runtime.ErrExposed error, never taken for 127.0.0.1, and the call rolls
// back.
func (p *Provisioner) published(ctx context.Context, ctr runtime.Container, port int) (engines.Endpoint, error) {
	find := func(ctr runtime.Container) (engines.Endpoint, bool, error) {
		if err := runtime.CheckLoopback(ctr.Ports, port); err != nil {
			return engines.Endpoint{}, false, err
		}
		for _, b := range ctr.Ports {
			if b.ContainerPort == port && b.HostPort != 0 && (b.Protocol == "" || b.Protocol == "tcp") {
				return engines.Endpoint{Host: b.HostIP, Port: b.HostPort}, true, nil
			}
		}
		return engines.Endpoint{}, false, nil
	}
	if ep, ok, err := find(ctr); ok || err != nil {
		return ep, err
	}
	ctr, err := p.rt.Inspect(ctx, ctr.ID)
	if err != nil {
		return engines.Endpoint{}, err
	}
	if ep, ok, err := find(ctr); ok || err != nil {
		return ep, err
	}
	return engines.Endpoint{}, fmt.Errorf("port %d/tcp is not published", port)
}

// waitReady polls the probe until every step passes, the sandbox exits, or
// rctx's deadline. ctx is the call's context, to tell its cancellation from
// the deadline.
func (p *Provisioner) waitReady(ctx, rctx context.Context, ref string, steps []engines.ProbeStep, deadline time.Duration) (attempts int, output string, err error) {
	delay := pollFirst
	var lastErr error
	for {
		attempts++
		out, stepErr, fatal := p.probeOnce(rctx, ref, steps)
		if stepErr == nil {
			return attempts, "", nil
		}
		if out != "" {
			output = out
		}
		if lastErr == nil || rctx.Err() == nil {
			// An attempt cut short by the deadline says less than the
			// one before it.
			lastErr = stepErr
		}
		if fatal != nil {
			return attempts, output, fatal
		}
		if err := pause(rctx, delay); err != nil {
			if ctx.Err() != nil {
				return attempts, output, ctx.Err()
			}
			return attempts, output, fmt.Errorf("%w after %s (%d attempts): %w", ErrNotReady, deadline, attempts, lastErr)
		}
		delay = min(delay*3/2, pollMax)
	}
}

// probeOnce runs the probe's steps in order. It returns the failing step's
// output and error, and a fatal error when the sandbox is no longer running
// (no point in waiting out the deadline).
func (p *Provisioner) probeOnce(ctx context.Context, ref string, steps []engines.ProbeStep) (output string, stepErr, fatal error) {
	for _, st := range steps {
		actx, cancel := context.WithTimeout(ctx, attemptMax)
		res, err := p.rt.Exec(actx, ref, runtime.ExecSpec{Cmd: st.Cmd, Env: st.Env})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				if fatal := p.stopped(ctx, ref); fatal != nil {
					return "", err, fatal
				}
			}
			return "", fmt.Errorf("%s: %w", st.Cmd[0], err), nil
		}
		if err := st.Check(res); err != nil {
			return combine(res), fmt.Errorf("%s: %w", st.Cmd[0], err), nil
		}
	}
	return "", nil, nil
}

// combine is an exec's output for an error message: stdout then stderr,
// trimmed, at most outputMax bytes (the tail, where errors are).
func combine(res runtime.ExecResult) string {
	out := string(res.Stdout)
	if len(res.Stderr) > 0 {
		if out != "" && out[len(out)-1] != '\n' {
			out += "\n"
		}
		out += string(res.Stderr)
	}
	out = strings.TrimSpace(out)
	if len(out) > outputMax {
		out = "..." + out[len(out)-outputMax:]
	}
	if out == "" {
		out = "(exit status " + strconv.Itoa(res.ExitCode) + ", no output)"
	}
	return out
}

// waitDial waits until ep accepts a TCP connection from this host.
func waitDial(ctx, rctx context.Context, ep engines.Endpoint, deadline time.Duration) error {
	addr := net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port))
	delay := pollFirst
	for {
		d := net.Dialer{Timeout: time.Second}
		conn, err := d.DialContext(rctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}
		if perr := pause(rctx, delay); perr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: %s accepted no connection within %s: %w", ErrNotReady, addr, deadline, err)
		}
		delay = min(delay*3/2, pollMax)
	}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// rollback removes every sandbox this call created: the ones whose Run
// returned, and any the runtime created for a Run that was cancelled
// mid-flight (found by the call label). It runs even when ctx has ended.
func (p *Provisioner) rollback(ctx context.Context, c *call, svcs []*service) error {
	var made []runtime.Container
	for _, s := range svcs {
		if s.created.ID != "" {
			made = append(made, s.created)
		}
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.CallTimeout)
	leftovers, err := p.rt.List(lctx, map[string]string{p.keys.Sandbox: labels.SandboxValue, p.keys.Call: c.id})
	cancel()
	var listErr error
	if err != nil {
		listErr = fmt.Errorf("list call %s: %w", c.id, err)
	}
	for _, x := range leftovers {
		if !slices.ContainsFunc(made, func(m runtime.Container) bool { return m.ID == x.ID }) {
			made = append(made, x)
		}
	}
	outcomes, err := p.destroyAll(ctx, made)
	for i, x := range made {
		if outcomes[i] == runtime.Removed {
			p.emit(ctx, Event{Kind: EventRolledBack, Owner: c.owner, Container: x.Name})
		}
	}
	var netErr error
	if c.net != nil {
		// The network goes with the owner's last sandbox, removed by the
		// last of the owner's overlapping calls to leave if one of them
		// made it (a sibling may be about to join it; another call may
		// have joined it meanwhile). The errgroup is done: c.net.made is
		// final.
		last := p.flights.leave(c.owner, c.net.made)
		if last && listErr == nil && err == nil {
			if netErr = p.removeIfLast(ctx, c.owner); netErr != nil {
				netErr = fmt.Errorf("rollback %s: %w", c.owner, netErr)
			}
		}
	}
	return errors.Join(listErr, err, netErr)
}

// destroyAll destroys the listed containers in parallel (runtime.Destroy:
// only the listed container, force-removed by its ID, each call bounded
// even after ctx ended), best-effort: one failure does not stop the
// others. It returns each one's outcome; a failed one's is meaningless.
func (p *Provisioner) destroyAll(ctx context.Context, listed []runtime.Container) ([]runtime.Outcome, error) {
	outcomes := make([]runtime.Outcome, len(listed))
	errs := make([]error, len(listed))
	var g errgroup.Group
	for i, x := range listed {
		g.Go(func() error {
			outcomes[i], errs[i] = runtime.Destroy(ctx, p.rt, x, p.opts.CallTimeout)
			if errs[i] != nil {
				outcomes[i] = -1
			}
			return nil
		})
	}
	_ = g.Wait() // each goroutine reports through errs
	return outcomes, errors.Join(errs...)
}
