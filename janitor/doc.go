// Package janitor removes orphaned sandboxes: sibling database containers
// whose owner (an agent container, or a process such as `sandboxer run`)
// is gone.
//
// A sweep makes one List call for every `<prefix>.sandbox=1` container,
// leaves alone every sandbox younger than the grace window (a sandbox is
// created before its owner starts, and an in-flight provision must never
// lose what it just made), asks a Liveness which owners are alive, and
// kills then removes (with its anonymous volumes) every sandbox whose owner
// is gone. A failure on one container never stops the sweep. The janitor
// needs no container of its own: it is a loop in whatever process runs it
// (the CLI's `janitor` command, an orchestrator), written only against the
// runtime.ContainerRuntime port.
//
// Labels read by the janitor, as the provisioner writes them:
//
//	<prefix>.sandbox=1
//	<prefix>.sandbox.owner=<owner container name>
//	<prefix>.sandbox.engine=<engine name>
//
// and, for sandboxes owned by a process rather than a container, the
// labels of ProcessOwnerLabels (boot id, pid namespace, pid and start time
// of that process).
package janitor
