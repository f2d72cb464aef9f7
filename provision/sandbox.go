package provision

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/roboco/sandboxer/engines"
)

// Sandbox is what a successful Provision hands back: the owner, one
// container per service and the env consumers read, in registry order.
type Sandbox struct {
	// OwnerID is the id Provision was called with ("42").
	OwnerID string `json:"owner_id"`
	// Owner is the owner container's name, the owner label's value
	// ("roboco-agent-42").
	Owner string `json:"owner"`
	// Containers are the sandboxes, in registry order.
	Containers []Container `json:"containers"`
	// Env is the union of the engines' env, in registry order, each
	// engine's variables in the engine's order. It holds passwords, so
	// json.Marshal leaves it out; Render writes it when asked to.
	Env []engines.EnvVar `json:"-"`
	// AdoptedBy is the owner whose deletion makes the runtime itself remove
	// these sandboxes (runtime.Adopter): set when the owner already existed
	// when Provision returned; empty otherwise, and on a runtime that
	// cannot adopt (see Provisioner.Adopt).
	AdoptedBy string `json:"adopted_by,omitempty"`
	// Network is the network the sandboxes joined: the owner's
	// (OwnerNetworkName; in private network mode the one the caller
	// attaches its agent to, with `docker network connect` or the like),
	// or the caller's (Options.Network).
	Network string `json:"network,omitempty"`

	// call is the Provision call that made the sandboxes (its call
	// label), for TeardownSandbox.
	call string
}

// Container is one running sandbox.
type Container struct {
	Name   string `json:"name"`
	ID     string `json:"id"`
	Engine string `json:"engine"`
	Image  string `json:"image"`
	// Endpoint is where consumers connect: the address on the sibling
	// network, or 127.0.0.1 and the published port in host mode.
	Endpoint engines.Endpoint `json:"endpoint"`
}

// Empty reports whether the sandbox has no containers (a gated-off spawn).
func (s Sandbox) Empty() bool { return len(s.Containers) == 0 }

// Environ returns the env as KEY=value strings, for exec.Cmd.Env.
func (s Sandbox) Environ() []string {
	out := make([]string, len(s.Env))
	for i, v := range s.Env {
		out[i] = v.Name + "=" + v.Value
	}
	return out
}

// Map returns the env as a map.
func (s Sandbox) Map() map[string]string {
	m := make(map[string]string, len(s.Env))
	for _, v := range s.Env {
		m[v.Name] = v.Value
	}
	return m
}

// Lookup returns the value of one emitted variable.
func (s Sandbox) Lookup(name string) (string, bool) {
	for _, v := range s.Env {
		if v.Name == name {
			return v.Value, true
		}
	}
	return "", false
}

// Mask is the stand-in for a password in Masked output.
const Mask = "****"

// Masked returns a copy whose secrets are masked: passwords replaced by
// Mask, and URLs keep everything but their password. For output meant for
// humans and logs.
func (s Sandbox) Masked() Sandbox {
	env := make([]engines.EnvVar, len(s.Env))
	for i, v := range s.Env {
		if v.Secret {
			v.Value = maskValue(v.Value)
		}
		env[i] = v
	}
	s.Env = env
	return s
}

func maskValue(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User == nil {
		return Mask
	}
	if _, ok := u.User.Password(); !ok {
		return v
	}
	const placeholder = "SANDBOXERMASK"
	u.User = url.UserPassword(u.User.Username(), placeholder)
	return strings.Replace(u.String(), ":"+placeholder+"@", ":"+Mask+"@", 1)
}

// String renders the sandbox for humans with its secrets masked, so that
// printing or logging a Sandbox never leaks a password.
func (s Sandbox) String() string {
	names := make([]string, len(s.Containers))
	for i, c := range s.Containers {
		names[i] = c.Name
	}
	return fmt.Sprintf("sandbox of %s: %s", s.Owner, strings.Join(names, ", "))
}

// Format is an env rendering.
type Format string

// Formats.
const (
	// FormatDotenv is KEY=value lines, unquoted (Docker's --env-file reads
	// values literally; no emitted value contains a newline), then
	// NetworkVar=<network> when the sandbox names one.
	FormatDotenv Format = "dotenv"
	// FormatShell is `export KEY='value'` lines, safe for sh's eval, then
	// the NetworkVar line when the sandbox names a network.
	FormatShell Format = "shell"
	// FormatJSON is one object: owner, adopted_by (when set), network
	// (when set), containers and env.
	FormatJSON Format = "json"
)

// NetworkVar is the variable of the dotenv and shell renderings that names
// the network the sandboxes joined (Sandbox.Network).
const NetworkVar = "SANDBOXER_NETWORK"

// Render writes the env in format f.
func (s Sandbox) Render(w io.Writer, f Format) error {
	var b strings.Builder
	switch f {
	case FormatDotenv, "":
		for _, v := range s.Env {
			fmt.Fprintf(&b, "%s=%s\n", v.Name, v.Value)
		}
		if s.Network != "" {
			fmt.Fprintf(&b, "%s=%s\n", NetworkVar, s.Network)
		}
	case FormatShell:
		for _, v := range s.Env {
			fmt.Fprintf(&b, "export %s=%s\n", v.Name, shellQuote(v.Value))
		}
		if s.Network != "" {
			fmt.Fprintf(&b, "export %s=%s\n", NetworkVar, shellQuote(s.Network))
		}
	case FormatJSON:
		env := make([]jsonVar, len(s.Env))
		for i, v := range s.Env {
			env[i] = jsonVar{Name: v.Name, Value: v.Value}
		}
		containers := s.Containers
		if containers == nil {
			containers = []Container{}
		}
		out, err := json.MarshalIndent(struct {
			OwnerID    string      `json:"owner_id"`
			Owner      string      `json:"owner"`
			AdoptedBy  string      `json:"adopted_by,omitempty"`
			Network    string      `json:"network,omitempty"`
			Containers []Container `json:"containers"`
			Env        []jsonVar   `json:"env"`
		}{s.OwnerID, s.Owner, s.AdoptedBy, s.Network, containers, env}, "", "  ")
		if err != nil {
			return fmt.Errorf("provision: render json: %w", err)
		}
		b.Write(out)
		b.WriteByte('\n')
	default:
		return invalid("format", string(f), "want dotenv, shell or json")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("provision: render %s: %w", f, err)
	}
	return nil
}

type jsonVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// shellQuote single-quotes s for POSIX shells.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
