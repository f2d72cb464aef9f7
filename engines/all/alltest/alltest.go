// Package alltest links every engine's test kit (enginetest.Kit) and with
// it every engine, for the suites and the bench that fill, or hand out
// per-test databases of, every engine:
//
//	import _ "github.com/roboco/sandboxer/engines/all/alltest"
package alltest

import (
	_ "github.com/roboco/sandboxer/engines/mariadb/mariadbtest"
	_ "github.com/roboco/sandboxer/engines/mongo/mongotest"
	_ "github.com/roboco/sandboxer/engines/postgres/postgrestest"
	_ "github.com/roboco/sandboxer/engines/redis/redistest"
)
