package provision

import (
	"context"
	"strings"
)

// EnvEnabled is the master switch orchestrators read: sandboxes are
// provisioned for a spawn only when it is on. It is off by default.
const EnvEnabled = "ROBOCO_SANDBOX_DB_ENABLED"

// Gate decides what a spawn gets: nothing unless the master switch is on
// and the project lists services.
type Gate struct {
	// Enabled is the master switch.
	Enabled bool
	// Services is the project's service list.
	Services []string
}

// GateFromEnv reads the master switch from getenv(EnvEnabled) (unset or
// empty: off) for a project's service list. A switch value that is not a
// recognisable boolean is an ErrInvalid error naming it.
func GateFromEnv(getenv func(string) string, projectServices []string) (Gate, error) {
	on, err := ParseSwitch(getenv(EnvEnabled))
	if err != nil {
		return Gate{}, err
	}
	return Gate{Enabled: on, Services: projectServices}, nil
}

// ParseSwitch reads an on/off value: 1, true, yes, on / 0, false, no, off,
// or empty (off), in any case.
func ParseSwitch(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "", "0", "false", "no", "off":
		return false, nil
	}
	return false, invalid(EnvEnabled, v, "want true or false")
}

// Active reports whether the gate lets the spawn have sandboxes.
func (g Gate) Active() bool { return g.Enabled && len(g.Services) > 0 }

// Spawn provisions what the gate allows for ownerID. When the gate is off
// or the list is empty it returns an empty Sandbox (no containers, no env)
// without touching the runtime. A list naming an unknown service is an
// ErrInvalid error naming it.
func (p *Provisioner) Spawn(ctx context.Context, ownerID string, g Gate) (Sandbox, error) {
	if !g.Active() {
		return Sandbox{}, nil
	}
	return p.Provision(ctx, ownerID, g.Services)
}
