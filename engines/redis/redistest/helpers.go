package redistest

import (
	"testing"

	"github.com/roboco/sandboxer/engines/redis"
	"github.com/roboco/sandboxer/sandboxtest"
)

// name is the redis engine's service name.
var name = redis.Engine{}.Spec().Name

// Sandbox starts a redis sandbox of t's own (sandboxtest.Start); its URL
// is sb.DSN("redis").
func Sandbox(t testing.TB) *sandboxtest.Sandbox { t.Helper(); return sandboxtest.Start(t, name) }

// DB hands out a redis logical database of t's own on the run's shared
// redis sandbox (sandboxtest.NewDB), flushed and handed out again
// when t ends.
func DB(t testing.TB) *sandboxtest.DB {
	t.Helper()
	return sandboxtest.NewDB(t, name, sandboxtest.DBOptions{})
}
