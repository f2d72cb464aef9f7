// Package labels is the label schema of sandboxer's containers: the keys
// the provisioner writes and the janitor, the CLI and the tests read, the
// default label prefix, and the rule a prefix must follow. It is the only
// place that spells a key out.
//
// With prefix "roboco", a sandbox of agent 42 carries:
//
//	roboco.sandbox=1
//	roboco.sandbox.owner=roboco-agent-42
//	roboco.sandbox.engine=postgres
//	roboco.sandbox.call=<16 hex chars>
//
// and, when a process rather than a container owns it (`sandboxer run`, the
// Go test helper), the process-owner keys:
//
//	roboco.sandbox.owner.boot=<boot id>
//	roboco.sandbox.owner.pidns=<pid namespace inode>
//	roboco.sandbox.owner.pid=<pid>
//	roboco.sandbox.owner.start=<start time in clock ticks>
//
// and, when a run of several processes owns it (sandboxtest's one server
// per engine for every test binary of a `go test ./...`), the run-owner
// keys:
//
//	roboco.sandbox.owner.boot=<boot id>
//	roboco.sandbox.owner.run=<path of the run file>
//	roboco.sandbox.owner.run.id=<generation of the run>
//
// An owner's network (provision.OwnerNetworkName) carries the sandbox
// marker, the owner (and the process-owner keys when a process owns it),
// and the network keys:
//
//	roboco.sandbox.network=owner
//	roboco.sandbox.created=<unix seconds>
package labels

import (
	"errors"
	"fmt"
	"regexp"
)

// DefaultPrefix is the label prefix when none is given. It also prefixes
// container names: roboco-sandbox-pg-42, owned by roboco-agent-42.
const DefaultPrefix = "roboco"

// SandboxValue is the value of the Sandbox key on every sandbox.
const SandboxValue = "1"

// NetworkOwnerValue is the value of the Network key on an owner's
// network: the network of one owner's sandboxes.
const NetworkOwnerValue = "owner"

// PrefixRule says which prefixes ValidatePrefix accepts, for messages.
const PrefixRule = "must be 1..32 lower-case letters and digits, with single '.' or '-' between them (not first, last or twice in a row)"

// ErrInvalidPrefix is the kind of ValidatePrefix's errors (errors.Is).
var ErrInvalidPrefix = errors.New("invalid label prefix")

// prefixRE keeps every key a valid label key on every runtime and every
// name derived from the prefix a valid container name on every runtime
// (containerd's identifiers refuse a doubled separator: "a..b-sandbox-…").
var prefixRE = regexp.MustCompile(`^[a-z0-9]+(?:[.-][a-z0-9]+)*$`)

// ValidatePrefix reports whether prefix can prefix label keys and
// container names (PrefixRule). The empty prefix is not valid: a caller
// that defaults it does so before asking.
func ValidatePrefix(prefix string) error {
	if len(prefix) > 32 || !prefixRE.MatchString(prefix) {
		return fmt.Errorf("%w %q: %s", ErrInvalidPrefix, prefix, PrefixRule)
	}
	return nil
}

// Keys are the label keys of one prefix.
type Keys struct {
	// Prefix is the prefix the keys are built from.
	Prefix string
	// Sandbox ("<prefix>.sandbox", value SandboxValue) marks every sandbox.
	Sandbox string
	// Owner ("<prefix>.sandbox.owner") holds the owner container's name.
	Owner string
	// Engine ("<prefix>.sandbox.engine") holds the engine's name.
	Engine string
	// Call ("<prefix>.sandbox.call") identifies the Provision call that
	// created the sandbox, so that its rollback removes exactly its own.
	Call string

	// Network ("<prefix>.sandbox.network", value NetworkOwnerValue) is
	// the role of a network sandboxer made: an owner's network.
	Network string
	// Created ("<prefix>.sandbox.created") holds when sandboxer created a
	// network, in unix seconds, for the janitor's grace window (a network's
	// creation time is not reported alike by every runtime).
	Created string

	// OwnerBoot ("<prefix>.sandbox.owner.boot") holds the boot id of the
	// owning process's host.
	OwnerBoot string
	// OwnerPIDNS ("<prefix>.sandbox.owner.pidns") holds the inode of the
	// owning process's pid namespace.
	OwnerPIDNS string
	// OwnerPID ("<prefix>.sandbox.owner.pid") holds the owning process's
	// pid within that namespace.
	OwnerPID string
	// OwnerStart ("<prefix>.sandbox.owner.start") holds the owning
	// process's start time in clock ticks after boot.
	OwnerStart string

	// OwnerRun ("<prefix>.sandbox.owner.run") holds the path of the run
	// file of the run that owns the sandbox (lifetime.Run: the processes
	// that share it, such as every test binary of a `go test ./...`);
	// OwnerBoot holds its host's boot id.
	OwnerRun string
	// OwnerRunID ("<prefix>.sandbox.owner.run.id") holds the generation
	// of that run.
	OwnerRunID string
}

// For returns the keys of prefix; the empty prefix stands for
// DefaultPrefix. It does not validate the prefix (ValidatePrefix does).
func For(prefix string) Keys {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	sandbox := prefix + ".sandbox"
	owner := sandbox + ".owner"
	return Keys{
		Prefix:     prefix,
		Sandbox:    sandbox,
		Owner:      owner,
		Engine:     sandbox + ".engine",
		Call:       sandbox + ".call",
		Network:    sandbox + ".network",
		Created:    sandbox + ".created",
		OwnerBoot:  owner + ".boot",
		OwnerPIDNS: owner + ".pidns",
		OwnerPID:   owner + ".pid",
		OwnerStart: owner + ".start",
		OwnerRun:   owner + ".run",
		OwnerRunID: owner + ".run.id",
	}
}

// Sandboxes is the list selector of every sandbox of the prefix.
func (k Keys) Sandboxes() map[string]string {
	return map[string]string{k.Sandbox: SandboxValue}
}

// OwnedBy is the list selector of the sandboxes of one owner container.
func (k Keys) OwnedBy(owner string) map[string]string {
	return map[string]string{k.Sandbox: SandboxValue, k.Owner: owner}
}

// OwnerNetworks is the network list selector of every owner network of
// the prefix.
func (k Keys) OwnerNetworks() map[string]string {
	return map[string]string{k.Sandbox: SandboxValue, k.Network: NetworkOwnerValue}
}

// NetworkOf is the network list selector of one owner's network.
func (k Keys) NetworkOf(owner string) map[string]string {
	sel := k.OwnerNetworks()
	sel[k.Owner] = owner
	return sel
}

// Reserved reports whether key is one of the keys the provisioner sets
// itself (Sandbox, Owner, Engine, Call, Network, Created), which a
// caller's extra labels may not replace.
func (k Keys) Reserved(key string) bool {
	return key == k.Sandbox || key == k.Owner || key == k.Engine || key == k.Call || key == k.Network || key == k.Created
}
