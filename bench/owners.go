package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/provision"
)

// owners starts Owners sandboxes of OwnersEngine at once through the floor
// (with a login each), then Owners Provision calls at once, and records
// success counts and latency percentiles of both.
func (s *Suite) owners(ctx context.Context, p *provision.Provisioner, r int) {
	type result struct {
		d   time.Duration
		id  string
		err error
	}
	run := func(fn func(i int) (time.Duration, string, error)) []result {
		res := make([]result, s.Owners)
		var ready, wg sync.WaitGroup
		gate := make(chan struct{})
		ready.Add(s.Owners)
		for i := range s.Owners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				<-gate
				res[i].d, res[i].id, res[i].err = fn(i)
			}()
		}
		ready.Wait()
		close(gate)
		wg.Wait()
		return res
	}
	record := func(res []result, ok, p50, p95, what string) {
		var ds []float64
		for _, x := range res {
			if x.err == nil {
				ds = append(ds, ms(x.d))
			} else {
				s.fail(what, x.err)
			}
		}
		s.sample(ok, float64(len(ds)))
		if len(ds) > 0 {
			s.sample(p50, Percentile(ds, 50))
			s.sample(p95, Percentile(ds, 95))
		}
	}

	s.Logger.Info("owners at once", "owners", s.Owners, "via", "floor")
	// Twenty clients polling every 20 ms load this host too: the raw
	// logins get a longer deadline than the engine's, so that they are
	// measured rather than cut off.
	raw := run(func(i int) (time.Duration, string, error) {
		return s.baselineWith(ctx, s.OwnersEngine, fmt.Sprintf("o%d-%d", r, i), 5*time.Minute, false)
	})
	record(raw, FigRawOwnersOK, FigRawOwnersP50, FigRawOwnersP95, "baseline owner")
	var g errgroup.Group
	for _, x := range raw {
		g.Go(func() error { s.remove(ctx, x.id); return nil })
	}
	_ = g.Wait()

	s.Logger.Info("owners at once", "owners", s.Owners, "via", "Provision")
	mark := s.timed.mark()
	prov := run(func(i int) (time.Duration, string, error) {
		start := time.Now()
		_, err := p.Provision(ctx, fmt.Sprintf("o%d-%d", r, i), []string{s.OwnersEngine})
		return time.Since(start), "", err
	})
	record(prov, FigOwnersOK, FigOwnersP50, FigOwnersP95, "owner")
	execs := s.timed.since(mark)
	s.sample(FigOwnersExecs, float64(len(execs)))
	var ds []float64
	for _, d := range execs {
		ds = append(ds, ms(d))
	}
	if med, _, _ := Stats(ds); len(ds) > 0 {
		s.sample(FigOwnersExecMed, med)
	}
	g = errgroup.Group{}
	for i := range s.Owners {
		g.Go(func() error { s.teardown(ctx, p, fmt.Sprintf("o%d-%d", r, i)); return nil })
	}
	_ = g.Wait()
}
