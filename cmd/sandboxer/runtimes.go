package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"

	"github.com/roboco/sandboxer/runtime/detect"
)

// lookRuleHelp is the rule by which down, ls and gc choose the runtimes they
// look at. up and run pick one runtime, the first that answers; on a host
// with several, a later command that picked again could land on another
// one (the first timed out) and report "nothing there" while the sandboxes
// live on: so these commands look everywhere unless told where.
const lookRuleHelp = `Runtimes looked at: the one --runtime (or SANDBOXER_RUNTIME) names, found
as up and run find it. Otherwise (auto), every runtime that is present,
wherever an earlier up may have landed: each configured endpoint
(DOCKER_HOST, CONTAINER_HOST, CONTAINERD_ADDRESS, or their flags) and each
well-known socket that exists and that this user may open. When a present
runtime does not answer, the command still acts on the others, then exits 3
naming it, since what it holds was not looked at; name a runtime with
--runtime to look at that one only.`

// defaultTimeout bounds each runtime's part of down, ls and gc.
const defaultTimeout = 2 * time.Minute

// target is one runtime that down, ls or gc looks at.
type target struct {
	detect.Connected
	// label names the runtime in output and errors: its name, with the
	// candidate's source when two targets share a name ("podman (rootless
	// Podman socket)").
	label string
}

// looked are the runtimes a command looks at.
type looked struct {
	// targets answered; each is connected.
	targets []target
	// missing, when not nil, names the present runtimes that did not
	// answer (it matches runtime.ErrUnavailable): the command acts on the
	// targets, then returns it.
	missing error
	release func()
}

// Close closes the targets' runtimes.
func (l *looked) Close() { l.release() }

// lookAt connects to the runtimes down, ls and gc look at (lookRuleHelp).
// When none can be looked at, the error says why.
func (a *app) lookAt(ctx context.Context) (*looked, error) {
	opts := a.detectOptions()
	asked, _, err := detect.Choice(opts)
	if err != nil {
		return nil, err
	}
	if asked != detect.Auto {
		sel, err := detect.Detect(ctx, opts)
		if err != nil {
			return nil, err
		}
		a.log.Debug("runtime chosen", "runtime", sel.Chosen.Runtime, "endpoint", sel.Chosen.Shown(), "reason", sel.Reason)
		t := target{Connected: detect.Connected{Probe: sel.Chosen, RT: sel.Runtime}, label: sel.Chosen.Runtime}
		return &looked{targets: []target{t}, release: func() { sel.Runtime.Close() }}, nil
	}
	s, err := detect.DetectAll(ctx, opts)
	if s == nil {
		return nil, err
	}
	if len(s.Answered) == 0 {
		s.Close()
		return nil, err
	}
	l := &looked{targets: labelTargets(s.Answered), release: s.Close}
	if err != nil {
		l.missing = fmt.Errorf("%w: what it holds was not looked at (name a runtime with --runtime to look at that one only)", err)
	}
	for _, t := range l.targets {
		a.log.Debug("looking at runtime", "runtime", t.Runtime, "endpoint", t.Shown(), "source", t.Source)
	}
	return l, nil
}

// labelTargets names each connected runtime for output.
func labelTargets(cs []detect.Connected) []target {
	count := map[string]int{}
	for _, c := range cs {
		count[c.Runtime]++
	}
	ts := make([]target, len(cs))
	for i, c := range cs {
		ts[i] = target{Connected: c, label: c.Runtime}
		if count[c.Runtime] > 1 {
			ts[i].label += " (" + c.Source + ")"
		}
	}
	return ts
}

// onEach runs fn on every target at once, each with its own deadline
// (timeout), and returns fn's errors in target order, each naming its
// target. One runtime that hangs or fails holds up none of the others.
func onEach(ctx context.Context, ts []target, timeout time.Duration, fn func(ctx context.Context, i int, t target) error) []error {
	errs := make([]error, len(ts))
	var g errgroup.Group
	for i, t := range ts {
		g.Go(func() error {
			tctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			err := fn(tctx, i, t)
			switch {
			case err == nil:
			case ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded):
				errs[i] = fmt.Errorf("on %s: gave up after %s (--timeout): %w", t.label, timeout, err)
			default:
				errs[i] = fmt.Errorf("on %s: %w", t.label, err)
			}
			return nil
		})
	}
	g.Wait() // the goroutines report through errs, never an error
	return errs
}

// timeoutFlag adds --timeout to a command that looks at runtimes.
func timeoutFlag(f *pflag.FlagSet, d *time.Duration) {
	f.DurationVar(d, "timeout", defaultTimeout, "give up on a runtime that has not finished within this (each runtime has its own)")
}

// checkTimeout validates --timeout: every runtime call of these commands
// has a deadline, so there is no "none".
func checkTimeout(d time.Duration) error {
	if d <= 0 {
		return usagef("--timeout %s: must be positive", d)
	}
	return nil
}

// errorList is errors.Join on one line: Main prints one line per failure,
// and "; " reads better there than the newlines it would flatten.
type errorList []error

func (l errorList) Error() string {
	parts := make([]string, len(l))
	for i, err := range l {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (l errorList) Unwrap() []error { return l }

// joinErrors joins the non-nil errs (nil when there is none).
func joinErrors(errs ...error) error {
	var l errorList
	for _, err := range errs {
		if err != nil {
			l = append(l, err)
		}
	}
	switch len(l) {
	case 0:
		return nil
	case 1:
		return l[0]
	}
	return l
}
