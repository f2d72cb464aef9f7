package bench

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// sweepPrefix is the label prefix of the real sweeps' sandboxes, apart
// from the provisioning rounds' so that a sweep sees only its own.
func (s *Suite) sweepPrefix() string { return s.prefix + "sw" }

// fakeSweeps times sweeps over FakeSweep sandboxes on the in-memory
// runtime, and counts their listing calls (Snapshot and List). Each owner
// has two sandboxes, of the registry's first two engines, named and
// labelled as the provisioner would name and label them.
func (s *Suite) fakeSweeps(ctx context.Context) {
	const prefix = labels.DefaultPrefix
	keys := labels.For(prefix)
	opts := provision.Options{LabelPrefix: prefix}
	all := s.Registry.All()
	seed := func(live bool) *fakeruntime.Runtime {
		f := fakeruntime.New()
		now := time.Now()
		for i := range s.FakeSweep {
			id := strconv.Itoa(i / 2)
			owner := opts.OwnerName(id)
			if live && i%2 == 0 {
				f.Seed(runtime.Container{Name: owner, Image: "agent", State: runtime.StateRunning, Created: now.Add(-time.Hour)})
			}
			sp := all[i%2%len(all)].Spec()
			lbls := keys.OwnedBy(owner)
			lbls[keys.Engine] = sp.Name
			f.Seed(runtime.Container{
				Name:    provision.ContainerName(prefix, sp.Short, id),
				Image:   sp.Image,
				State:   runtime.StateRunning,
				Labels:  lbls,
				Created: now.Add(-time.Hour),
			})
		}
		return f
	}
	for range max(s.Rounds, 10) {
		for _, live := range []bool{true, false} {
			fig, lists := FigFakeGone, FigFakeGoneList
			if live {
				fig, lists = FigFakeKept, FigFakeKeptList
			}
			f := seed(live)
			if !live {
				start := time.Now()
				cs, err := f.List(ctx, keys.Sandboxes())
				d := time.Since(start)
				if err == nil && len(cs) == s.FakeSweep {
					s.sample(FigFakeList, ms(d))
				}
			}
			j, err := janitor.New(f, janitor.Options{Prefix: prefix})
			if err != nil {
				s.fail(fig, err)
				_ = f.Close()
				continue
			}
			listings := func() int { return f.Calls(fakeruntime.VerbList) + f.Calls(fakeruntime.VerbSnapshot) }
			before := listings()
			start := time.Now()
			rep, err := j.Sweep(ctx)
			d := time.Since(start)
			calls := listings() - before
			want := len(rep.Removed)
			if live {
				want = len(rep.Kept)
			}
			if err != nil || want != s.FakeSweep {
				s.fail(fig, fmt.Errorf("sweep: %v (%s)", err, rep))
			} else {
				s.sample(fig, ms(d))
				s.sample(lists, float64(calls))
			}
			_ = f.Close()
		}
	}
}

// realSweeps seeds RealSweep real sandboxes of SweepEngine of one owner,
// sweeps them with the owner alive (kept) and gone (removed), and times
// the floor's list and removal of as many for comparison.
func (s *Suite) realSweeps(ctx context.Context, r int) {
	prefix := s.sweepPrefix()
	keys := labels.For(prefix)
	owner := provision.Options{LabelPrefix: prefix}.OwnerName(strconv.Itoa(r))
	lbls := keys.OwnedBy(owner)
	lbls[keys.Engine] = s.SweepEngine
	maps.Copy(lbls, s.benchLabels())
	// NoAdopt: the sweeps measure judging and removing; a sweep that
	// adopted the kept sandboxes (Kubernetes) would hand their removal to
	// the cluster's garbage collector once the agent goes.
	j, err := janitor.New(s.RT, janitor.Options{Prefix: prefix, NoGrace: true, NoAdopt: true})
	if err != nil {
		s.fail(FigRealKept(s.RealSweep), err)
		return
	}
	dry, err := janitor.New(s.RT, janitor.Options{Prefix: prefix, NoGrace: true, DryRun: true})
	if err != nil {
		s.fail(FigRealKept(s.RealSweep), err)
		return
	}

	if err := s.seedSandboxes(ctx, r, "a", lbls); err != nil {
		s.fail(FigRealKept(s.RealSweep), err)
		return
	}
	agent, err := s.RT.Run(ctx, runtime.RunSpec{
		Name: owner, Image: s.Images["busybox"], Command: []string{"sleep", "3600"}, Labels: s.benchLabels(),
	})
	if err != nil {
		s.fail(FigRealKept(s.RealSweep), err)
		return
	}
	// Past the grace window (whole-second creation times) before timing.
	if err := waitFor(ctx, 30*time.Second, func() bool {
		rep, err := dry.Sweep(ctx)
		return err == nil && len(rep.Skipped) == 0 && len(rep.Kept) == s.RealSweep
	}); err != nil {
		s.fail(FigRealKept(s.RealSweep), err)
	}
	for range 5 {
		start := time.Now()
		rep, err := j.Sweep(ctx)
		d := time.Since(start)
		if err != nil || len(rep.Kept) != s.RealSweep {
			s.fail(FigRealKept(s.RealSweep), fmt.Errorf("sweep: %v (%s)", err, rep))
			continue
		}
		s.sample(FigRealKept(s.RealSweep), ms(d))
		start = time.Now()
		n, err := s.Floor.List(ctx, keys.Sandboxes())
		d = time.Since(start)
		if err != nil || n != s.RealSweep {
			s.fail(FigRawList(s.RealSweep), fmt.Errorf("list: %d, %v", n, err))
			continue
		}
		s.sample(FigRawList(s.RealSweep), ms(d))
	}

	s.remove(ctx, agent.ID)
	start := time.Now()
	rep, err := j.Sweep(ctx)
	d := time.Since(start)
	if err != nil || len(rep.Removed) != s.RealSweep {
		s.fail(FigRealGone(s.RealSweep), fmt.Errorf("sweep: %v (%s)", err, rep))
	} else {
		s.sample(FigRealGone(s.RealSweep), ms(d))
	}

	if err := s.seedSandboxes(ctx, r, "b", lbls); err != nil {
		s.fail(FigRawRemoveN(s.RealSweep), err)
		return
	}
	cs, err := s.RT.List(ctx, keys.Sandboxes())
	if err != nil || len(cs) != s.RealSweep {
		s.fail(FigRawRemoveN(s.RealSweep), fmt.Errorf("list: %d, %v", len(cs), err))
		return
	}
	var g errgroup.Group
	g.SetLimit(janitor.DefaultConcurrency)
	start = time.Now()
	for _, c := range cs {
		g.Go(func() error { return s.Floor.Remove(ctx, c.ID) })
	}
	if err := g.Wait(); err != nil {
		s.fail(FigRawRemoveN(s.RealSweep), err)
		return
	}
	s.sample(FigRawRemoveN(s.RealSweep), ms(time.Since(start)))
}

// seedSandboxes runs RealSweep containers of SweepEngine labelled as
// sandboxes of the sweep prefix, eight at a time.
func (s *Suite) seedSandboxes(ctx context.Context, r int, tag string, lbls map[string]string) error {
	e, _ := s.Registry.Lookup(s.SweepEngine)
	var g errgroup.Group
	g.SetLimit(8)
	for i := range s.RealSweep {
		g.Go(func() error {
			cred, err := engines.NewCredentials()
			if err != nil {
				return err
			}
			name := provision.ContainerName(s.sweepPrefix(), e.Spec().Short, fmt.Sprintf("%d%s-%d", r, tag, i))
			spec := s.spec(s.SweepEngine, name, cred, lbls)
			spec.Ports = nil
			_, err = s.RT.Run(ctx, spec)
			return err
		})
	}
	return g.Wait()
}
