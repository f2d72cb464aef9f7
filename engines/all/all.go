// Package all links every engine sandboxer ships, for the programs that
// serve them all (the CLI, the bench, the project's own suites):
//
//	import _ "github.com/roboco/sandboxer/engines/all"
//
// A program that needs fewer imports only those engines' packages, and
// links only their clients. Whatever the order the engines' packages are
// initialised in, engines.Default reports them in their Spec.Order.
package all

import (
	_ "github.com/roboco/sandboxer/engines/mariadb"
	_ "github.com/roboco/sandboxer/engines/mongo"
	_ "github.com/roboco/sandboxer/engines/postgres"
	_ "github.com/roboco/sandboxer/engines/redis"
)
