package provision

import (
	"context"
	"log/slog"
	"time"

	"github.com/roboco/sandboxer/runtime"
)

// EventKind says what happened.
type EventKind string

// Event kinds, in the order a service goes through them.
const (
	EventPullStart    EventKind = "pull-start"
	EventPullProgress EventKind = "pull-progress"
	EventPulled       EventKind = "pulled"
	EventPreCleared   EventKind = "pre-cleared"
	// EventTemplateBuilt: a warm template was built (Template, Elapsed).
	EventTemplateBuilt EventKind = "template-built"
	// EventWarmFallback: the sandbox starts cold after all; Err says why
	// (no template to be had, or the warm start failed).
	EventWarmFallback EventKind = "warm-fallback"
	// EventTemplateRemoved: a template whose sandbox failed on its own
	// was removed, to be built again on next use.
	EventTemplateRemoved EventKind = "template-removed"
	EventStarted         EventKind = "started"
	EventReady           EventKind = "ready"
	EventFailed          EventKind = "failed"
	EventRolledBack      EventKind = "rolled-back"
	EventRemoved         EventKind = "removed"
	// EventNetworkCreated: the owner's network was created (Event.Network).
	EventNetworkCreated EventKind = "network-created"
	// EventNetworkRemoved: the owner's network was removed with the
	// owner's last sandbox.
	EventNetworkRemoved EventKind = "network-removed"
	// EventNetworkKept: the owner's last sandbox is gone but a container
	// (the agent) is still attached to its network (runtime.ErrInUse): it
	// is left for the janitor. Logged at debug level.
	EventNetworkKept EventKind = "network-kept"
	// EventAdopted: the runtime now removes the sandbox (Container) itself
	// when its owner is deleted (runtime.Adopter).
	EventAdopted EventKind = "adopted"
)

// Event is one step of a provision or teardown. It never carries a
// password.
type Event struct {
	Kind      EventKind
	Owner     string
	Service   string
	Container string
	Image     string
	// Elapsed is the time since the service's work began.
	Elapsed time.Duration
	// Attempts is the number of readiness attempts (EventReady): logins
	// over the wire, or exec probe runs.
	Attempts int
	// Readiness is how the sandbox was judged ready (EventReady):
	// ReadinessWire or ReadinessExec, and ReadinessWhy says why that mode.
	Readiness    Readiness
	ReadinessWhy string
	// Template is the warm template the sandbox starts from (EventStarted,
	// EventReady; "" for a cold start), or the one built or removed.
	Template string
	// Network is the owner's network (EventNetworkCreated,
	// EventNetworkRemoved, EventNetworkKept).
	Network string
	// Progress is set for EventPullProgress.
	Progress *runtime.PullProgress
	// Err is set for EventFailed (redacted).
	Err error
}

// emit sends ev to the callback and the logger.
func (p *Provisioner) emit(ctx context.Context, ev Event) {
	if p.opts.OnEvent != nil {
		p.opts.OnEvent(ev)
	}
	l := p.opts.Logger
	if l == nil || ev.Kind == EventPullProgress {
		return
	}
	attrs := []any{slog.String("owner", ev.Owner)}
	if ev.Service != "" {
		attrs = append(attrs, slog.String("service", ev.Service))
	}
	if ev.Container != "" {
		attrs = append(attrs, slog.String("container", ev.Container))
	}
	if ev.Image != "" {
		attrs = append(attrs, slog.String("image", ev.Image))
	}
	if ev.Elapsed != 0 {
		attrs = append(attrs, slog.Duration("elapsed", ev.Elapsed))
	}
	if ev.Template != "" {
		attrs = append(attrs, slog.String("template", ev.Template))
	}
	if ev.Network != "" {
		attrs = append(attrs, slog.String("network", ev.Network))
	}
	if ev.Attempts != 0 {
		attrs = append(attrs, slog.Int("attempts", ev.Attempts))
	}
	if ev.Readiness != "" {
		attrs = append(attrs, slog.String("readiness", string(ev.Readiness)), slog.String("why", ev.ReadinessWhy))
	}
	level := slog.LevelInfo
	if ev.Err != nil {
		attrs = append(attrs, slog.String("error", ev.Err.Error()))
		level = slog.LevelWarn
	}
	if ev.Kind == EventNetworkKept {
		level = slog.LevelDebug
	}
	l.Log(ctx, level, "sandbox "+string(ev.Kind), attrs...)
}
