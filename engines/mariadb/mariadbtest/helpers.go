package mariadbtest

import (
	"testing"

	"github.com/roboco/sandboxer/engines/mariadb"
	"github.com/roboco/sandboxer/sandboxtest"
)

// name is the mariadb engine's service name.
var name = mariadb.Engine{}.Spec().Name

// Sandbox starts a mariadb sandbox of t's own (sandboxtest.Start); its URL
// is sb.DSN("mariadb"), which mariadb.Config opens with go-sql-driver/mysql.
func Sandbox(t testing.TB) *sandboxtest.Sandbox { t.Helper(); return sandboxtest.Start(t, name) }

// DB hands out a mariadb database of t's own on the test binary's shared
// mariadb sandbox (sandboxtest.NewDB), dropped when t ends.
func DB(t testing.TB) *sandboxtest.DB {
	t.Helper()
	return sandboxtest.NewDB(t, name, sandboxtest.DBOptions{})
}
