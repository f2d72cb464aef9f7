// Package faults holds sandboxer's fault tests: what happens, on real
// runtimes, when things go wrong. The runtime is unreachable; an image is
// missing; a readiness probe never passes; the runtime daemon restarts in
// the middle of a provision (against a private second dockerd the test
// starts itself, never the shared one); many provisions race, on distinct
// owners and on the same owner; and, on the trust side, passwords never
// reach a log at debug level, published ports are bound to 127.0.0.1 only,
// and no sandbox gets a runtime socket, a host path or privileges.
//
// The tests iterate the same runtimes, and make their sandboxes in the same
// per-test World, as the integration package (internal/testruntimes, on
// internal/testkit): the two packages share every helper and differ only in
// what they prove. They stay two packages so that `go test ./...` runs
// them side by side (each takes minutes of real containers; one package of
// both would run them one after the other, close to go test's default
// 10-minute timeout on a loaded host), and so that this one, which needs
// root for its private dockerd, can be run alone. Run them with
//
//	SANDBOXER_REQUIRE=docker go test -v ./faults/
//
// under SANDBOXER_REQUIRE a missing runtime or image fails instead of
// skipping; under -short (unit tests only) every test that needs a runtime
// skips at once, and only the unreachable-endpoint checks, which need
// none, run. Every test uses a label prefix of its own and removes what
// carries it, so that it can run next to other packages' tests and their
// janitor sweeps on the same daemon.
//
// Covered elsewhere, not repeated here: a provisioner SIGKILLed
// mid-provision and the sweep after the grace window
// (integration.TestJanitorCleansUpAfterAKilledProvisioner); fuzzing of
// the owner-id and service-list validation (provision.FuzzValidate, whose
// committed corpus plain `go test` runs).
package faults
