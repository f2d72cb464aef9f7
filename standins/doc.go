// Package standins tests sandboxer's offline stand-in images: the busybox,
// postgres, redis and mongo images that hack/images.sh builds from Debian
// packages (no container registry is reachable where sandboxer is
// developed) and serves from a loopback registry, with their refs in
// build/images.env.
//
// A stand-in is not a look-alike: it honours the contract of the official
// image it replaces (postgres:16-alpine, redis:8-alpine, mongo:8) as far as
// sandboxer and the code it serves depend on it — the same environment
// variables, default command, entrypoint behaviour (first-start
// initialisation through a temporary server that is unreachable from
// outside, then the real server), volumes, exposed ports, stop signal and
// non-root user — so that code written and tested against a stand-in
// behaves the same against the real image. The tests here prove that with
// the docker CLI and the real client libraries, from the host.
//
// The package holds no code besides this comment: everything is in its
// tests, which need Docker and build/images.env (`make images`). Under
// SANDBOXER_REQUIRE=docker a missing daemon or image fails them instead of
// skipping them.
package standins
