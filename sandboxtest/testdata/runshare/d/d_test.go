// Package d is one more package of the run (see runshare).
package d_test

import (
	"os"
	"testing"

	"github.com/roboco/sandboxer/sandboxtest"
	"github.com/roboco/sandboxer/sandboxtest/testdata/runshare/hold"
)

func TestMain(m *testing.M) { os.Exit(sandboxtest.Main(m)) }

func TestHoldADatabase(t *testing.T) { hold.ADatabase(t) }
