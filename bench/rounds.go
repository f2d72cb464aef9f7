package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/provision"
)

// engines measures every engine alone next to its baseline.
func (s *Suite) engines(ctx context.Context, p *provision.Provisioner, r int) {
	for _, n := range s.Registry.Names() {
		e, _ := s.Registry.Lookup(n)
		d, id, err := s.baselineWith(ctx, n, fmt.Sprint(r), e.Spec().ReadyTimeout, true)
		if err != nil {
			s.fail(FigBaseline(n), err)
		} else {
			s.sample(FigBaseline(n), ms(d))
		}
		s.remove(ctx, id)

		d, err = s.provisionOnce(ctx, p, fmt.Sprintf("r%d-%s", r, n), []string{n})
		if err != nil {
			s.fail(FigProvision(n), err)
		} else {
			s.sample(FigProvision(n), ms(d))
		}
	}
}

// trio measures the trio both ways, and its teardown next to a raw
// removal.
func (s *Suite) trio(ctx context.Context, p *provision.Provisioner, r int) {
	names := s.Registry.Names()
	owner := fmt.Sprintf("r%d-trio", r)
	start := time.Now()
	if _, err := p.Provision(ctx, owner, names); err != nil {
		s.fail(FigTrio, err)
	} else {
		s.sample(FigTrio, ms(time.Since(start)))
		start = time.Now()
		if _, err := p.Teardown(ctx, owner); err != nil {
			s.fail(FigTeardown, err)
		} else {
			s.sample(FigTeardown, ms(time.Since(start)))
		}
	}
	s.teardown(ctx, p, owner)

	owner = fmt.Sprintf("r%d-seq", r)
	start = time.Now()
	var seqErr error
	for _, n := range names {
		if _, err := p.Provision(ctx, owner, []string{n}); err != nil {
			seqErr = err
			break
		}
	}
	if seqErr != nil {
		s.fail(FigTrioSeq, seqErr)
	} else {
		s.sample(FigTrioSeq, ms(time.Since(start)))
	}
	s.teardown(ctx, p, owner)

	s.rawRemoveTrio(ctx, r)
}

// provisionOnce times one Provision, checks that a real client logs in at
// the first attempt with what it returned, and tears it down (untimed).
func (s *Suite) provisionOnce(ctx context.Context, p *provision.Provisioner, owner string, services []string) (time.Duration, error) {
	defer s.teardown(ctx, p, owner)
	start := time.Now()
	sb, err := p.Provision(ctx, owner, services)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	for _, c := range sb.Containers {
		if err := s.firstLogin(ctx, sb, c); err != nil {
			s.fail("first login after Provision "+owner, err)
		}
	}
	if len(services) == 1 {
		s.phases(sb, services[0])
	}
	return d, nil
}

// phases records where a single-engine provision spent its time.
func (s *Suite) phases(sb provision.Sandbox, engine string) {
	if s.warming || len(sb.Containers) != 1 {
		return
	}
	started, ok1 := s.evs.find(sb.Owner, engine, provision.EventStarted)
	ready, ok2 := s.evs.find(sb.Owner, engine, provision.EventReady)
	if !ok1 || !ok2 {
		return
	}
	s.sample(figStarted(engine), ms(started.Elapsed))
	if run, ok := s.timed.runTime(sb.Containers[0].ID); ok {
		s.sample(figRun(engine), ms(run))
		s.sample(figBeforeRun(engine), ms(started.Elapsed-run))
	}
	s.sample(figReady(engine), ms(ready.Elapsed-started.Elapsed))
	s.sample(figAttempts(engine), float64(ready.Attempts))
	s.note(figAttempts(engine), fmt.Sprintf("readiness %s: %s", ready.Readiness, ready.ReadinessWhy))
	e, _ := s.Registry.Lookup(engine)
	steps := len(e.Probe(engines.Endpoint{}, engines.Credentials{}))
	var pass time.Duration
	for _, d := range s.timed.lastExecs(sb.Containers[0].ID, steps) {
		pass += d
	}
	s.sample(figPassing(engine), ms(pass))
	s.sample(figExecTime(engine), ms(s.timed.execTotal(sb.Containers[0].ID)))
}

// firstLogin logs in once, without retry, with the URL the sandbox
// emitted for c: Provision must never return before that works.
func (s *Suite) firstLogin(ctx context.Context, sb provision.Sandbox, c provision.Container) error {
	url, err := s.urlOf(sb, c)
	if err != nil {
		return err
	}
	login, ok := Logins[c.Engine]
	if !ok {
		return fmt.Errorf("no client login for %s", c.Engine)
	}
	if err := login(ctx, url); err != nil {
		return fmt.Errorf("%s: %s", c.Name, redact(err.Error(), url))
	}
	return nil
}

// urlOf is the connection URL sb emitted for c, one of its containers.
func (s *Suite) urlOf(sb provision.Sandbox, c provision.Container) (string, error) {
	e, ok := s.Registry.Lookup(c.Engine)
	if !ok {
		return "", fmt.Errorf("unknown engine %q", c.Engine)
	}
	v, ok := URLVar(e.Env(provision.DefaultEnvPrefix, c.Endpoint, engines.Credentials{}))
	if !ok {
		return "", fmt.Errorf("%s emits no URL", c.Engine)
	}
	url, ok := sb.Lookup(v.Name)
	if !ok {
		return "", fmt.Errorf("the sandbox emitted no %s", v.Name)
	}
	return url, nil
}

func (s *Suite) teardown(ctx context.Context, p *provision.Provisioner, owner string) {
	if _, err := p.Teardown(context.WithoutCancel(ctx), owner); err != nil {
		s.fail("teardown "+owner, err)
	}
}
