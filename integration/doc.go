// Package integration holds the tests that drive the lifecycle packages
// (provision, janitor) against real runtimes with the stand-in images. It
// is a package of its own so that provision and janitor never import an
// adapter: only these tests pick concrete runtimes (through
// internal/testruntimes).
//
// Run them with `SANDBOXER_REQUIRE=docker go test -v ./integration/`; under
// SANDBOXER_REQUIRE a missing runtime or image fails instead of skipping,
// and under -short (unit tests only) every test skips at once. The faults
// package shares every helper (see its documentation for why the two stay
// apart).
package integration
