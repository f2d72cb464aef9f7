package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/roboco/sandboxer/provision"
)

// FigWarmTrio is the trio provisioned at once with warm start on.
const FigWarmTrio = "provision trio, parallel, warm"

// FigWarm is the name of an engine's warm provision figure.
func FigWarm(engine string) string { return "provision " + engine + ", warm" }

// FigFirstUse is the name of an engine's first warm provision, which
// builds the template on the way.
func FigFirstUse(engine string) string {
	return "provision " + engine + ", first use (template built on the way)"
}

// figTemplateBuild is the name of an engine's template build.
func figTemplateBuild(engine string) string { return "  " + engine + ": warm template build" }

// declareWarm lists the warm figures of the engines that start warm.
func (s *Suite) declareWarm(warm []string) {
	add := func(f *Figure) {
		s.report.Figures = append(s.report.Figures, f)
		s.warmFigs = append(s.warmFigs, f.Name)
	}
	for _, n := range warm {
		add(&Figure{Name: FigWarm(n), Unit: UnitMS, Baseline: FigBaseline(n), Target: &Target{Kind: TargetRatio, Value: 0.45},
			Note: "Provision with warm start on (the template present), " + string(s.mode) + " mode, until it returns ready"})
		add(&Figure{Name: FigFirstUse(n), Unit: UnitMS, Baseline: FigBaseline(n),
			Note: "once per run, after the template is removed: what the first provision on a host costs"})
		add(&Figure{Name: figTemplateBuild(n), Unit: UnitMS, Note: "run, ready, clean stop, tar of every tmpfs path, save, append one layer, load"})
	}
	if len(warm) > 0 {
		add(&Figure{Name: FigWarmTrio, Unit: UnitMS, Target: &Target{Kind: TargetRatio, Value: 0.6}, Compare: FigRawTrio,
			Note: "every engine at once, warm where it can; vs the slowest single-engine baseline"})
	}
}

// firstUse removes each warm engine's template and times the provision
// that builds it again.
func (s *Suite) firstUse(ctx context.Context, pw *provision.Provisioner) {
	for _, n := range pw.WarmServices() {
		if _, err := pw.RemoveTemplate(ctx, n); err != nil {
			s.fail(FigFirstUse(n), err)
			continue
		}
		owner := "first-" + n
		d, err := s.provisionTimed(ctx, pw, owner, []string{n})
		if err != nil {
			s.fail(FigFirstUse(n), err)
			continue
		}
		s.sample(FigFirstUse(n), ms(d))
		if ev, ok := s.evs.find(pw.OwnerName(owner), n, provision.EventTemplateBuilt); ok {
			s.sample(figTemplateBuild(n), ms(ev.Elapsed))
		} else {
			s.fail(figTemplateBuild(n), fmt.Errorf("the first provision of %s built no template", n))
		}
	}
}

// warmRound measures each warm engine alone and the trio, warm.
func (s *Suite) warmRound(ctx context.Context, pw *provision.Provisioner, r int) {
	for _, n := range pw.WarmServices() {
		d, err := s.provisionTimed(ctx, pw, fmt.Sprintf("r%d-warm-%s", r, n), []string{n})
		if err != nil {
			s.fail(FigWarm(n), err)
			continue
		}
		s.sample(FigWarm(n), ms(d))
	}
	d, err := s.provisionTimed(ctx, pw, fmt.Sprintf("r%d-warm-trio", r), s.Registry.Names())
	if err != nil {
		s.fail(FigWarmTrio, err)
		return
	}
	s.sample(FigWarmTrio, ms(d))
}

// provisionTimed times one Provision, checks the first login of every
// sandbox, and tears down (untimed); unlike provisionOnce it records no
// phases (they are the cold start's).
func (s *Suite) provisionTimed(ctx context.Context, p *provision.Provisioner, owner string, services []string) (time.Duration, error) {
	defer s.teardown(ctx, p, owner)
	start := time.Now()
	sb, err := p.Provision(ctx, owner, services)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	for _, c := range sb.Containers {
		if err := s.firstLogin(ctx, sb, c); err != nil {
			return 0, err
		}
	}
	return d, nil
}
