package provision

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/roboco/sandboxer/engines"
)

// DefaultSwitchPrefix prefixes the master switch's name when no other
// prefix is given: ROBOCO_SANDBOX_DB_ENABLED.
const DefaultSwitchPrefix = "ROBOCO"

// SwitchSuffix follows the switch prefix in the master switch's name.
const SwitchSuffix = "_SANDBOX_DB_ENABLED"

// EnvEnabled is the master switch orchestrators read under the default
// prefix: sandboxes are provisioned for a spawn only when it is on. It is
// off by default.
const EnvEnabled = DefaultSwitchPrefix + SwitchSuffix

// SwitchName is the master switch's name under prefix ("" : the default):
// <prefix>_SANDBOX_DB_ENABLED. A prefix follows the env prefix's rule
// (upper-case letters, digits and '_', starting with a letter); an invalid
// one is an ErrInvalid error.
func SwitchName(prefix string) (string, error) {
	if prefix == "" {
		prefix = DefaultSwitchPrefix
	}
	if !envPrefixRE.MatchString(prefix) {
		return "", invalid("switch prefix", prefix, "must be upper-case letters, digits and '_', starting with a letter")
	}
	return prefix + SwitchSuffix, nil
}

// Gate decides what a spawn gets: nothing unless the master switch is on
// and the project lists services.
type Gate struct {
	// Enabled is the master switch (false when unset or unreadable).
	Enabled bool
	// Services is the project's service list (nil when it has none or
	// could not be read).
	Services []string
	// Unchecked is what is wrong with the project's list while the switch
	// is off, which lets the spawn through without refusing it: the
	// project's spawns fail with this error once the switch is turned on.
	// It is nil otherwise.
	Unchecked error
}

// NotParticipating says why a gate lets a spawn through untouched.
type NotParticipating string

// Why a spawn does not participate.
const (
	// SwitchOff: the master switch is off (unset, empty or false).
	SwitchOff NotParticipating = "switch_off"
	// NoServices: the project lists no services (absent, null, [] or "").
	NoServices NotParticipating = "no_services"
)

// GateFromEnv reads a spawn's gate: the master switch called switchName
// (SwitchName; EnvEnabled by default) from getenv, unset or empty being
// off, and the project's service list as stored (ParseServiceList), whose
// names are checked against reg (nil: engines.Default).
//
// A project that lists no services does not participate whatever the
// switch says, so a switch value that is not a recognisable boolean
// refuses only the spawns of projects that list services. While the switch
// is off the list is not refused either: what is wrong with it is
// Gate.Unchecked. Otherwise a bad switch value, then a bad list, is an
// ErrInvalid error naming it. The Gate returned with an error still holds
// what was read, for a report; Spawn provisions nothing for it (it is
// inactive, or names a service Provision refuses).
func GateFromEnv(getenv func(string) string, switchName string, reg *engines.Registry, storedList string) (Gate, error) {
	services, listErr := ParseServiceList(storedList)
	on, switchErr := parseSwitch(switchName, getenv(switchName))
	g := Gate{Enabled: on && switchErr == nil, Services: services}
	switch {
	case listErr == nil && len(services) == 0:
		return g, nil
	case switchErr != nil:
		return g, switchErr
	}
	if listErr == nil {
		_, listErr = ValidateServices(reg, services)
	}
	if !on {
		g.Unchecked = listErr
		return g, nil
	}
	return g, listErr
}

// parseSwitch reads an on/off value v of the switch called name, which its
// error names: 1, true, yes, on / 0, false, no, off, or empty (off), in
// any case.
func parseSwitch(name, v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "", "0", "false", "no", "off":
		return false, nil
	}
	return false, invalid(name, v, "want true or false (1, yes, on / 0, no, off)")
}

// Active reports whether the gate lets the spawn have sandboxes.
func (g Gate) Active() bool { return g.Enabled && len(g.Services) > 0 }

// Why says why an inactive gate lets the spawn through untouched ("" when
// it is active): a project without services (an unreadable list while the
// switch is off counts as the switch's), then a switch that is off.
func (g Gate) Why() NotParticipating {
	switch {
	case len(g.Services) == 0 && g.Unchecked == nil:
		return NoServices
	case !g.Enabled:
		return SwitchOff
	}
	return ""
}

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

// ParseServiceList reads a project's service list as orchestrators store
// it: a JSON list of names (["postgres","redis"]), or null, [] or nothing
// at all (blank) for a project without sandboxes, which returns nil. It
// checks the JSON shape only (a list of strings); ValidateServices checks
// the names. Errors match ErrInvalid.
func ParseServiceList(data string) ([]string, error) {
	data = strings.TrimSpace(data)
	if data == "" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal([]byte(data), &list); err != nil {
		return nil, invalid("service list", data, "want a JSON list of service names such as [\"postgres\",\"redis\"], null or []")
	}
	if len(list) == 0 {
		return nil, nil
	}
	return list, nil
}

// CheckServiceList validates a project's stored service list on its own,
// as ParseServiceList reads it and ValidateServices checks it, so that a
// typo is caught when the project is configured, not when the switch is
// turned on. An empty list is valid (the project does not participate).
func CheckServiceList(reg *engines.Registry, data string) ([]string, error) {
	list, err := ParseServiceList(data)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	if _, err := ValidateServices(reg, list); err != nil {
		return nil, err
	}
	return list, nil
}
