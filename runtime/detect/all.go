package detect

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/runtime"
)

// Connected is a candidate that answered, with its runtime.
type Connected struct {
	Probe
	// RT is connected and answered a ping; Survey.Close closes it. (Probe
	// has the runtime's name as Runtime.)
	RT runtime.ContainerRuntime
}

// Survey is the outcome of DetectAll.
type Survey struct {
	// Asked is the runtime name asked for (Auto or one of Choosable) and
	// AskedBy where that came from ("--runtime", "SANDBOXER_RUNTIME",
	// "default").
	Asked, AskedBy string
	// Probes are every candidate, in order, with its outcome (never
	// StatusNotTried).
	Probes []Probe
	// Answered are the candidates that answered, in order, connected.
	Answered []Connected
}

// Unanswered are the present candidates that did not answer (StatusFailed)
// or could not be asked (StatusNotLinked), in order.
func (s *Survey) Unanswered() []Probe {
	var out []Probe
	for _, p := range s.Probes {
		if p.Status == StatusFailed || p.Status == StatusNotLinked {
			out = append(out, p)
		}
	}
	return out
}

// Close closes every connected runtime.
func (s *Survey) Close() {
	for _, c := range s.Answered {
		c.RT.Close()
	}
}

// DetectAll connects to every present candidate (see the package comment:
// a configured endpoint, or a well-known socket that exists and that this
// process may connect to), pinging them concurrently, each within
// Options.PingTimeout. Options.All is implied.
//
// The error is nil when every present candidate answered and at least one
// is present. Otherwise it is an *UnavailableError (matching
// runtime.ErrUnavailable) that names, on one line, each present candidate
// that did not answer, or says that none is present; the Survey still holds
// the candidates that answered, so that a caller can do what it can on them
// before it reports the error. An unknown runtime name is an error matching
// ErrUnknownRuntime, with a nil Survey.
func DetectAll(ctx context.Context, opts Options) (*Survey, error) {
	opts, asked, askedBy, cands, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	s := &Survey{Asked: asked, AskedBy: askedBy, Probes: make([]Probe, len(cands))}
	rts := make([]runtime.ContainerRuntime, len(cands))
	var g errgroup.Group
	for i, c := range cands {
		s.Probes[i] = Probe{Candidate: c}
		if !opts.present(&s.Probes[i]) {
			continue
		}
		g.Go(func() error {
			rts[i] = ping(ctx, opts, &s.Probes[i])
			return nil
		})
	}
	g.Wait() // the goroutines report through Probes, never an error
	for i, p := range s.Probes {
		opts.Logger.Debug("runtime candidate", "runtime", p.Runtime, "endpoint", p.Shown(), "source", p.Source, "status", string(p.Status), "detail", p.Describe())
		if rts[i] != nil {
			s.Answered = append(s.Answered, Connected{Probe: p, RT: rts[i]})
		}
	}
	if reason := s.problem(); reason != "" {
		return s, unavailable(reason, s.Probes)
	}
	return s, nil
}

// problem says, on one line, why the survey is incomplete: the present
// candidates that did not answer, or that none is present. "" when every
// present candidate answered.
func (s *Survey) problem() string {
	var failed, skipped []string
	for _, p := range s.Probes {
		switch p.Status {
		case StatusFailed:
			failed = append(failed, fmt.Sprintf("%s did not answer: %s", p.Candidate, oneLine(p.Err)))
		case StatusNotLinked:
			failed = append(failed, fmt.Sprintf("%s was not asked: %s", p.Candidate, oneLine(p.Err)))
		case StatusAbsent, StatusNoAccess:
			skipped = append(skipped, p.skipped())
		}
	}
	switch {
	case len(failed) > 0 && len(s.Answered) > 0:
		return strings.Join(failed, "; ")
	case len(failed) > 0:
		return s.none(true) + ": " + strings.Join(failed, "; ")
	case len(s.Answered) > 0:
		return ""
	case len(skipped) == 0:
		return s.none(false) + ": no candidate"
	}
	return s.none(false) + ": " + strings.Join(skipped, "; ")
}

// none says that no runtime (or not the one asked for) answered, or that
// none is present.
func (s *Survey) none(present bool) string {
	switch {
	case s.Asked != Auto && present:
		return fmt.Sprintf("%s (asked for by %s) did not answer", s.Asked, s.AskedBy)
	case s.Asked != Auto:
		return fmt.Sprintf("%s (asked for by %s) is not present", s.Asked, s.AskedBy)
	case present:
		return "no container runtime answered"
	}
	return "no container runtime is present"
}
