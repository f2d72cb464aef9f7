package bench

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/ids"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// spec is the run spec the provisioner would use for engine, in the run's
// mode (host: a port published on 127.0.0.1; network: the run's network,
// nothing published), with the bench's labels instead of a sandbox's.
func (s *Suite) spec(engine, name string, cred engines.Credentials, labels map[string]string) runtime.RunSpec {
	e, _ := s.Registry.Lookup(engine)
	sp := e.Spec()
	memory := s.memory(engine) // what the provisioner gives the engine, so the baseline is like for like
	cc := e.Container(cred, engines.Limits{MemoryBytes: memory}, engines.Image{})
	spec := runtime.RunSpec{
		Name:        name,
		Image:       s.Images[engine],
		Env:         cc.Env,
		Command:     cc.Command,
		Labels:      labels,
		Tmpfs:       cc.Tmpfs,
		MemoryBytes: memory,
		CPUs:        provision.DefaultCPUs,
	}
	spec.Capabilities = sp.Capabilities
	if s.mode == ModeNetwork {
		spec.Network = s.network
	} else {
		spec.Ports = []runtime.PortSpec{{ContainerPort: sp.Port, Protocol: "tcp", HostIP: runtime.DefaultHostIP}}
	}
	return spec
}

func (s *Suite) benchLabels() map[string]string { return map[string]string{s.prefix + ".bench": "1"} }

// baseline runs engine's image through the floor and polls a real client
// login every 20 ms, at the published port (host mode) or at the
// container's address on the run's network (network mode); it returns the time from the run request to the first
// login, and the container's ID (to remove, even on failure).
func (s *Suite) baseline(ctx context.Context, engine, tag string) (time.Duration, string, error) {
	e, _ := s.Registry.Lookup(engine)
	return s.baselineWith(ctx, engine, tag, e.Spec().ReadyTimeout, false)
}

// baselineWith is baseline with a login deadline; record also records the
// run request's own time.
func (s *Suite) baselineWith(ctx context.Context, engine, tag string, timeout time.Duration, record bool) (time.Duration, string, error) {
	e, _ := s.Registry.Lookup(engine)
	cred, err := engines.NewCredentials()
	if err != nil {
		return 0, "", err
	}
	// Named as the provisioner names a sandbox, under an owner id of its
	// own; labelled for the bench only.
	name := provision.ContainerName(s.prefix, e.Spec().Short, "base-"+tag+"-"+ids.Hex(2))
	spec := s.spec(engine, name, cred, s.benchLabels())
	start := time.Now()
	id, at, err := s.Floor.Run(ctx, spec)
	if err != nil {
		return 0, id, err
	}
	ran := time.Since(start)
	if at.Port == 0 {
		at.Port = e.Spec().Port // network mode: the service's own port
	}
	v, ok := URLVar(e.Env("X", at, cred))
	if !ok {
		return 0, id, fmt.Errorf("%s emits no URL", engine)
	}
	login, ok := Logins[engine]
	if !ok {
		return 0, id, fmt.Errorf("no client login for %s", engine)
	}
	if err := PollLogin(ctx, login, v.Value, timeout); err != nil {
		return 0, id, err
	}
	d := time.Since(start)
	if s.warming {
		s.recordServer(ctx, engine, v.Value)
	}
	if record {
		s.sample(figRawRun(engine), ms(ran))
	}
	return d, id, nil
}

// recordServer asks the server at url its version with engine's real
// client (engines.WireChecker) and records it in the report (Servers).
func (s *Suite) recordServer(ctx context.Context, engine, url string) {
	e, _ := s.Registry.Lookup(engine)
	wc, ok := e.(engines.WireChecker)
	if !ok {
		return
	}
	sess, err := wc.Login(ctx, url)
	if err != nil {
		s.fail("server version of "+engine, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.report.Servers == nil {
		s.report.Servers = map[string]string{}
	}
	s.report.Servers[engine] = sess.Server
}

func (s *Suite) remove(ctx context.Context, ids ...string) {
	for _, id := range ids {
		if id == "" {
			continue
		}
		if err := s.Floor.Remove(context.WithoutCancel(ctx), id); err != nil {
			s.fail("remove "+id, err)
		}
	}
}

// rawRemoveTrio starts one baseline per engine at once, waits for their
// logins, then times their removal through the floor, all at once.
func (s *Suite) rawRemoveTrio(ctx context.Context, r int) {
	names := s.Registry.Names()
	ids := make([]string, len(names))
	var g errgroup.Group
	start := time.Now()
	for i, n := range names {
		g.Go(func() error {
			var err error
			_, ids[i], err = s.baseline(ctx, n, fmt.Sprintf("rm%d", r))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		s.fail(FigRawTrio, err)
		s.remove(ctx, ids...)
		return
	}
	s.sample(FigRawTrio, ms(time.Since(start)))
	start = time.Now()
	g = errgroup.Group{}
	for _, id := range ids {
		g.Go(func() error { return s.Floor.Remove(ctx, id) })
	}
	if err := g.Wait(); err != nil {
		s.fail(FigRawRemoveTrio, err)
		s.remove(ctx, ids...)
		return
	}
	s.sample(FigRawRemoveTrio, ms(time.Since(start)))
}
