// Package lifetime is the lifetime rule, in one place for the janitor and
// the provisioner's pre-clear: who owns a sandbox, as its labels say
// (FromLabels), and whether that owner still lives (Judge).
//
// A sandbox lives exactly as long as its owner. An owner container is
// alive while it exists, in any state (created, running, paused, exited),
// and gone once removed; it is looked up as the runtime's own tools name
// it, in one runtime.Snapshot. An owner process (`sandboxer run`, the Go
// test helper, a warm template build) is alive while that process lives
// (ProcessLiveness). An owner run (sandboxtest's server shared by every
// test binary of a `go test ./...`) is alive while one of its processes
// takes part in it (Join, RunLiveness); like a process owner, it is
// judged on its own host only. Nothing is judged on a guess: an owner that cannot be
// read from the labels is an error, and an owner that cannot be observed
// gets no verdict.
package lifetime
