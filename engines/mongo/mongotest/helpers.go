package mongotest

import (
	"testing"

	"github.com/roboco/sandboxer/engines/mongo"
	"github.com/roboco/sandboxer/sandboxtest"
)

// name is the mongo engine's service name.
var name = mongo.Engine{}.Spec().Name

// Sandbox starts a mongo sandbox of t's own (sandboxtest.Start); its URL
// is sb.DSN("mongo").
func Sandbox(t testing.TB) *sandboxtest.Sandbox { t.Helper(); return sandboxtest.Start(t, name) }

// DB hands out a mongo database of t's own on the run's shared
// mongo sandbox (sandboxtest.NewDB), dropped when t ends.
func DB(t testing.TB) *sandboxtest.DB {
	t.Helper()
	return sandboxtest.NewDB(t, name, sandboxtest.DBOptions{})
}
