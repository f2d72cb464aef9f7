// Package janitor removes orphaned sandboxes: sibling database containers
// whose owner (an agent container, or a process such as `sandboxer run`)
// is gone.
//
// A sweep takes one runtime.Snapshot: every `<prefix>.sandbox=1`
// container, and the references of every container of the runtime. It
// leaves alone every sandbox younger than the grace window (a sandbox is
// created before its owner starts, and an in-flight provision must never
// lose what it just made), judges the owners, and kills then removes (with
// its anonymous volumes) every sandbox whose owner is gone, after checking
// that the container is still the one the snapshot listed.
//
// The lifetime rule (package lifetime, which the provisioner's pre-clear
// applies too): a sandbox lives exactly as long as its owner. An owner
// container is alive while it exists, in any state (created, running,
// paused, exited), and gone once removed; it is looked up as the
// runtime's own tools name it (the container name on Docker and Podman;
// on containerd, in any namespace, the container ID or nerdctl's
// "nerdctl/name" label). An owner process is alive while it runs (see
// lifetime.ProcessLiveness). Nothing is removed on a guess: a sandbox
// without an owner label, or with a malformed one, is kept and reported
// as an error.
//
// A failure on one container never stops the sweep, and every runtime
// call has a deadline (Options.CallTimeout), so a hung container never
// stalls a sweep or the loop. The janitor
// needs no container of its own: it is a loop in whatever process runs it
// (the CLI's `janitor` command, an orchestrator), written only against the
// runtime.ContainerRuntime port.
//
// The janitor reads the labels the provisioner writes (package labels owns
// the schema): the sandbox marker, the owner container's name, the engine,
// and, for sandboxes owned by a process rather than a container, the
// process-owner keys that lifetime.ProcessOwnerLabels fills (boot id, pid
// namespace, pid and start time of that process).
package janitor
