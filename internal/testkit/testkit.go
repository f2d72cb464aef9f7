// Package testkit is the one vocabulary sandboxer's tests share, whatever
// they test: a context bounded within go test's timeout, random ids, a
// poll with a deadline (never a bare sleep), the stand-in images made
// present on a runtime, cleanup by label of every container a test made,
// a buffer that concurrent loggers may write to, and the rule that -short
// touches no runtime.
//
// It imports the port (runtime) and internal/testenv, never an adapter or
// a lifecycle package: the adapters' own tests, which live inside the
// adapter packages, import it too, and Go allows no import cycle. What
// needs the concrete runtimes or the provisioner (the list of runtimes the
// cross-runtime suites cover, a test's world of sandboxes on one) is in
// internal/testruntimes, built on this package.
package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/roboco/sandboxer/internal/ids"
)

// RequireRuntime ends the test at once, as a skip, under -short: -short
// (`make test-unit`) runs the unit tests only, and a unit test touches no
// container runtime. Every test that talks to a runtime calls it first,
// directly or through the helpers that connect one.
func RequireRuntime(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a container runtime (-short runs unit tests only)")
	}
}

// Context returns a context that ends after d, or when the test ends
// (after the cleanups registered later than this call have run, so that
// they may still use it).
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// RandomHex returns n random bytes from crypto/rand, hex-encoded (2n
// characters): label prefixes, names and tags that no other test uses.
func RandomHex(n int) string { return ids.Hex(n) }
