// Package mariadbtest is the mariadb engine's test kit (enginetest.Kit)
// and its test helpers: Sandbox (a mariadb sandbox per test) and DB (a
// database per test on one shared mariadb sandbox per test binary).
// Importing it is what links mariadb and go-sql-driver/mysql into a test
// binary: sandboxtest alone links postgres only.
//
//	func TestOrders(t *testing.T) {
//		db := mariadbtest.DB(t) // mysql://…/t_N, dropped when the test ends
//		cfg, _ := mariadb.Config(db.URL)
//		...
//	}
//
// A per-test database is made by the sandbox's own user: the engine grants
// it every privilege (as postgres's user is a superuser and mongo's is
// root), so the allocator needs no second account, and a test may make
// databases of its own too.
package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/engines/mariadb"
	"github.com/roboco/sandboxer/internal/ids"
)

func init() { enginetest.Register(Kit{}) }

// Kit is the mariadb engine's test kit.
type Kit struct{}

// Engine is the mariadb engine.
func (Kit) Engine() engines.Engine { return mariadb.Engine{} }

// SharedArgs give a shared server a connection or more per parallel test
// (151 by default).
func (Kit) SharedArgs() []string { return []string{"--max-connections=400"} }

// ioTimeout bounds a kit connection's reads and writes: a server that
// stops answering fails the test rather than hanging it.
const ioTimeout = time.Minute

// open is a database/sql handle on rawURL with go-sql-driver/mysql, its
// I/O bounded; errors never show the password.
func open(rawURL string) (*sql.DB, error) {
	cfg, err := mariadb.Config(rawURL)
	if err != nil {
		return nil, engines.LoginError("mariadb", rawURL, err)
	}
	cfg.Timeout = engines.AttemptTimeout
	cfg.ReadTimeout = ioTimeout
	cfg.WriteTimeout = ioTimeout
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, engines.LoginError("mariadb", rawURL, err)
	}
	return sql.OpenDB(conn), nil
}

// NewAllocator hands out databases of the shared server at rawURL.
func (Kit) NewAllocator(rawURL string) (enginetest.Allocator, error) {
	db, err := open(rawURL)
	if err != nil {
		return nil, err
	}
	return &alloc{url: rawURL, db: db, tag: ids.Hex(3)}, nil
}

// alloc makes a database per test on the shared server, as the sandbox's
// user, and drops it on release (innodb_file_per_table: its files go,
// and with them their tmpfs pages). The names carry the allocator's
// random tag: allocators of other test binaries share the server.
type alloc struct {
	url string
	db  *sql.DB
	tag string
	seq atomic.Int64
}

// Acquire creates a new database; req asks nothing of mariadb.
func (a *alloc) Acquire(ctx context.Context, _ enginetest.Request) (string, string, error) {
	name := fmt.Sprintf("t_%s_%d", a.tag, a.seq.Add(1))
	if _, err := a.db.ExecContext(ctx, "CREATE DATABASE "+quote(name)); err != nil {
		return "", "", fmt.Errorf("mariadb: create database %s: %w", name, err)
	}
	url, err := enginetest.WithPath(a.url, name)
	return name, url, err
}

// Release drops the database.
func (a *alloc) Release(ctx context.Context, name string) error {
	if _, err := a.db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+quote(name)); err != nil {
		return fmt.Errorf("mariadb: drop database %s: %w", name, err)
	}
	return nil
}

// Tidy has nothing to return: a release drops the database at once.
func (a *alloc) Tidy(context.Context) error { return nil }

// Close closes the allocator's connections.
func (a *alloc) Close() { _ = a.db.Close() }

// quote is name as a MariaDB identifier.
func quote(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// CLILogin asks the mariadb client for 40 + 2 over TCP. The client takes
// no URL: the line takes $URL apart (mysql://USER:PASSWORD@HOST:PORT/NAME,
// as Env emits it: a generated password and the default user need no
// percent-decoding, and the host is an IPv4 address or a name) and hands
// the password over in MYSQL_PWD, never in argv.
func (Kit) CLILogin() (string, string) { return cliLogin, "42" }

const cliLogin = `r=${URL#*://}; auth=${r%%@*}; r=${r#*@}; hp=${r%%/*}; db=${r#"$hp"}; db=${db#/}
MYSQL_PWD=${auth#*:}; export MYSQL_PWD
exec mariadb --protocol=tcp --skip-ssl -h "${hp%:*}" -P "${hp##*:}" -u "${auth%%:*}" -D "$db" --batch --skip-column-names -e 'select 40 + 2'`

// perBatch is how many rows one INSERT of Fill writes.
const perBatch = 64

// Fill inserts rows of a random hex column of chunk bytes (InnoDB does
// not compress a table unless asked), perBatch to a statement, each its
// own transaction, into the URL's database until an insert fails as full.
func (Kit) Fill(ctx context.Context, rawURL string, chunk int, limit int64) (enginetest.FillResult, error) {
	var res enginetest.FillResult
	db, err := open(rawURL)
	if err != nil {
		return res, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+enginetest.FillTable+
		" (id BIGINT PRIMARY KEY, v LONGTEXT NOT NULL) ENGINE=InnoDB"); err != nil {
		return res, engines.LoginError("mariadb", rawURL, fmt.Errorf("fill: %w", err))
	}
	insert, err := db.PrepareContext(ctx, "INSERT INTO "+enginetest.FillTable+" (id, v) VALUES "+strings.TrimSuffix(strings.Repeat("(?, ?),", perBatch), ","))
	if err != nil {
		return res, fmt.Errorf("mariadb: fill: %w", err)
	}
	defer insert.Close()
	gen := enginetest.NewPayloads()
	args := make([]any, 2*perBatch)
	for res.Bytes < limit {
		for i := range perBatch {
			args[2*i], args[2*i+1] = res.Records+int64(i), gen.Next(chunk)
		}
		_, err := insert.ExecContext(ctx, args...)
		switch {
		case err != nil && full(err):
			res.Full = enginetest.Full(err)
			return res, nil
		case err != nil:
			return res, fmt.Errorf("mariadb: fill after %d bytes: %w", res.Bytes, err)
		}
		res.Records += perBatch
		res.Bytes += perBatch * int64(chunk)
	}
	return res, nil
}

// MariaDB's answers to a write that finds no room (include/mysqld_ername.h):
//   - erRecordFileFull: "The table '%s' is full", what InnoDB answers when it
//     cannot extend a tablespace file (DB_OUT_OF_FILE_SPACE);
//   - erDiskFull: "Disk full (%s); waiting for someone to free some
//     space...", what the server says of a file it writes for itself;
//   - erGetErrno: "Got error %d "%s" from storage engine %s", full when the
//     error is 28, ENOSPC.
const (
	erRecordFileFull = 1114
	erDiskFull       = 1021
	erGetErrno       = 1030
)

// full tells a server's "full" answer from every other error: a
// dropped connection (what a server that died leaves its client with) is
// never one, whatever its message.
func full(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case erRecordFileFull, erDiskFull:
		return true
	case erGetErrno:
		return strings.HasPrefix(me.Message, "Got error 28 ")
	}
	return false
}

// Count counts the rows Fill left.
func (Kit) Count(ctx context.Context, rawURL string) (int64, error) {
	db, err := open(rawURL)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+enginetest.FillTable).Scan(&n); err != nil {
		return 0, engines.LoginError("mariadb", rawURL, fmt.Errorf("count: %w", err))
	}
	return n, nil
}
