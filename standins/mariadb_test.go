package standins

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
)

// mariadbReadyDeadline bounds a first start: mariadb-install-db, the
// temporary server, the users, the real server.
const mariadbReadyDeadline = 90 * time.Second

// TestMariaDBContract holds the mariadb stand-in to what the official
// mariadb:11 image is (docker-library/mariadb 11.8/Dockerfile: `groupadd
// --gid 999 -r mysql && useradd -r -g mysql mysql --home-dir
// /var/lib/mysql --uid 999`, `VOLUME /var/lib/mysql`, `EXPOSE 3306`, `CMD
// ["mariadbd"]`; its docker-entrypoint.sh: MARIADB_USER, MARIADB_PASSWORD,
// MARIADB_DATABASE, MARIADB_ROOT_PASSWORD, init through a temporary server
// with networking off, then the real server on TCP, run as mysql): from
// the host, with go-sql-driver/mysql, the user logs in to its database
// and owns it, root logs in from outside the container (root@'%'), a
// wrong password is refused with the server's own access-denied error,
// and a first argument that is an option reaches mariadbd.
func TestMariaDBContract(t *testing.T) {
	t.Parallel()
	ref := standinImage(t, "mariadb")
	user, db := "sandbox", "sandbox"
	password, rootPassword := testkit.RandomHex(16), testkit.RandomHex(16)
	c := runContainer(t, ref, runOpts{
		Env: []string{"MARIADB_USER=" + user, "MARIADB_PASSWORD=" + password, "MARIADB_DATABASE=" + db,
			"MARIADB_ROOT_PASSWORD=" + rootPassword},
		Publish: []string{"3306/tcp"},
		Tmpfs:   []string{"/var/lib/mysql"},
		Cmd:     []string{"--max-connections=42"},
	})
	addr := c.hostAddr(t, "3306/tcp")
	open := func(t *testing.T, user, password, db string) *sql.DB {
		cfg := mysql.NewConfig()
		cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = user, password, "tcp", addr, db
		cfg.Timeout = 5 * time.Second
		conn, err := mysql.NewConnector(cfg)
		require.NoError(t, err)
		d := sql.OpenDB(conn)
		t.Cleanup(func() { d.Close() })
		return d
	}
	ctx := testkit.Context(t, 3*time.Minute)
	app := open(t, user, password, db)
	// Ready: the real server answers on TCP (the temporary one never
	// listens there).
	testkit.Poll(t, mariadbReadyDeadline, 200*time.Millisecond, func() error { return app.PingContext(ctx) },
		"the user logs in over TCP within %s", mariadbReadyDeadline)

	t.Run("ServerAndOptions", func(t *testing.T) {
		var version, maxConn, dataDir string
		require.NoError(t, app.QueryRowContext(ctx, "SELECT VERSION(), @@max_connections, @@datadir").Scan(&version, &maxConn, &dataDir))
		assert.True(t, strings.HasPrefix(version, "11."), "server %s is MariaDB 11", version)
		assert.Contains(t, version, "MariaDB")
		assert.Equal(t, "42", maxConn, "`--max-connections=42` as the command reaches mariadbd")
		assert.Equal(t, "/var/lib/mysql/", dataDir)
	})
	t.Run("UserOwnsItsDatabase", func(t *testing.T) {
		_, err := app.ExecContext(ctx, "CREATE TABLE t (id INT PRIMARY KEY, v TEXT)")
		require.NoError(t, err)
		_, err = app.ExecContext(ctx, "INSERT INTO t VALUES (1, 'one')")
		require.NoError(t, err)
		var v string
		require.NoError(t, app.QueryRowContext(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v))
		assert.Equal(t, "one", v)
	})
	t.Run("RootFromOutside", func(t *testing.T) {
		var n int
		require.NoError(t, open(t, "root", rootPassword, "").QueryRowContext(ctx, "SELECT COUNT(*) FROM mysql.global_priv WHERE User = ?", user).Scan(&n))
		assert.Equal(t, 1, n, "root@'%' sees the user the entrypoint made")
	})
	t.Run("WrongPasswordRefused", func(t *testing.T) {
		err := open(t, user, password+"x", db).PingContext(ctx)
		var me *mysql.MySQLError
		require.True(t, errors.As(err, &me), "a server error, not a dial failure: %v", err)
		assert.Equal(t, uint16(1045), me.Number, "ER_ACCESS_DENIED_ERROR")
	})
	t.Run("RunsAsMySQLUID999", func(t *testing.T) {
		assert.Equal(t, "999", c.uid(t), "mariadbd runs as mysql, uid 999, as in mariadb:11")
		res, err := c.exec(context.WithoutCancel(ctx), nil, "stat", "-c", "%u", "/var/lib/mysql/mysql")
		require.NoError(t, err)
		assert.Equal(t, "999", strings.TrimSpace(res.Stdout), "the data directory is mysql's")
	})
}
