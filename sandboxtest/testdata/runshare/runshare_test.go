// Package runshare is a test binary of a `go test ./...` as sandboxtest's
// run tests start several at once (hold.ADatabase); b, c and d are three
// more packages of the same run. It is under testdata so that `go test
// ./...` leaves it alone.
package runshare_test

import (
	"os"
	"testing"

	"github.com/roboco/sandboxer/sandboxtest"
	"github.com/roboco/sandboxer/sandboxtest/testdata/runshare/hold"
)

func TestMain(m *testing.M) { os.Exit(sandboxtest.Main(m)) }

func TestHoldADatabase(t *testing.T) { hold.ADatabase(t) }
