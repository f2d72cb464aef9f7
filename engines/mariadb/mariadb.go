// Package mariadb is sandboxer's MariaDB engine: its container, budget,
// readiness probe, emitted env and its login with go-sql-driver/mysql,
// which only a program that imports it links. Importing it registers the
// engine (engines.Register), as importing a database/sql driver does:
//
//	import _ "github.com/roboco/sandboxer/engines/mariadb"
//
// Its test kit (fill-to-full, per-test databases, the tests' helpers) is
// mariadbtest.
package mariadb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/roboco/sandboxer/engines"
)

func init() { engines.Register(Engine{}) }

// Compile-time proof that mariadb logs in.
var _ engines.WireChecker = Engine{}

// Engine is MariaDB on the official image's contract (mariadb:11:
// MARIADB_USER, MARIADB_PASSWORD, MARIADB_DATABASE, MARIADB_ROOT_PASSWORD,
// MARIADB_ROOT_HOST; data in /var/lib/mysql; first start initialises
// through a temporary server with networking off, then the real server
// starts on TCP).
type Engine struct{}

// Order is mariadb's place in the report order: after mongo.
const Order = 40

// Where a sandbox's MariaDB keeps its files, each on a tmpfs of its own:
//   - dataDir is the image's VOLUME and mariadbd's datadir: the system
//     tables, InnoDB's system and undo tablespaces, its redo log and every
//     database (innodb_file_per_table: a table is a file of its own, so a
//     dropped database gives its pages back at once);
//   - tmpDir is mariadbd's tmpdir (on-disk temporary tables, filesort
//     files), which would otherwise be /tmp on the container's own, unbounded
//     filesystem.
const (
	dataDir = "/var/lib/mysql"
	tmpDir  = "/var/lib/sandboxer/tmp"
)

// installCnfDir is a directory whose *.cnf every server of the image
// reads (/etc/mysql/my.cnf's !includedir, in the official image and in
// Debian's packages alike).
const installCnfDir = "/etc/mysql/conf.d"

// Spec describes the mariadb engine. Its short name "maria" is no longer
// than "redis" or "mongo", so it leaves the longest owner id as it was.
// A cold start runs mariadb-install-db, a temporary server and then the
// real one (about 10 s on an idle host), hence the ready timeout.
func (Engine) Spec() engines.Spec {
	return engines.Spec{
		Name:         "mariadb",
		Short:        "maria",
		Order:        Order,
		Image:        "mariadb:11",
		Port:         3306,
		Tmpfs:        []string{dataDir, tmpDir},
		Capabilities: engines.DropToServerUser(),
		ReadyTimeout: 90 * time.Second,
	}
}

// mariadbStart is the container's command, run by the image's entrypoint
// as `sh -c` (as root, the image's user; the entrypoint runs any command
// that is not mariadbd as it is): it hands tmpDir to mysql and drops an
// init script into /docker-entrypoint-initdb.d, then execs the entrypoint
// again with "$@" (mariadbd and its options), so that mariadbd stays the
// container's main process. The entrypoint sources the script (a *.sh
// that is not executable) during first-start initialisation, on its
// socket-only temporary server, after it made MARIADB_USER: the script
// grants that user every privilege with the grant option, as postgres's
// POSTGRES_USER is a superuser and mongo's user is root, so that the one
// account a sandbox emits may CREATE DATABASE (a per-test database, a
// consumer's own fixtures). Nothing in it is a secret: the user's name
// is escaped the way the entrypoint escapes it.
//
// The redo log's size is also written to a config file (installCnf) that
// every server of the image reads, mariadb-install-db's bootstrap server
// included: that one creates the redo log, and the official image hands
// it the server's arguments but an image that does not (the stand-in)
// would create it at InnoDB's default, 96 MiB, on the bounded data
// tmpfs, where a small budget then has no room left for the undo
// tablespaces and the first start fails.
const mariadbStart = `chown mysql:mysql "` + tmpDir + `"
for a; do
	case "$a" in
	--innodb-log-file-size=*)
		mkdir -p "` + installCnfDir + `"
		printf '[mysqld]\ninnodb_log_file_size=%s\n' "${a#*=}" >"` + installCnfDir + `/sandboxer.cnf" ;;
	esac
done
cat >/docker-entrypoint-initdb.d/sandboxer-grant.sh <<'EOF'
sandboxer_user=$(printf '%s' "$MARIADB_USER" | sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g")
docker_process_sql --database=mysql <<EOSQL
GRANT ALL PRIVILEGES ON *.* TO '$sandboxer_user'@'%' WITH GRANT OPTION;
EOSQL
EOF
exec docker-entrypoint.sh "$@"
`

// Container sets the user, its database and its password through the
// image's environment (never argv), once: root exists only on the unix
// socket inside the container (MARIADB_ROOT_HOST=localhost; the
// entrypoint drops root@127.0.0.1 and root@::1), with no password
// (MARIADB_ALLOW_EMPTY_ROOT_PASSWORD), so that over the network the
// sandbox has one account, the emitted one, and one secret, and root is
// only for whoever may exec into the container anyway. The image's other
// ways to a root password would add a second secret to the env or print
// one in the log (MARIADB_RANDOM_ROOT_PASSWORD). It turns
// durability off (a sandbox is thrown away: no fsync at commit, no
// doublewrite buffer) and native AIO (io_uring or libaio, which a
// runtime's seccomp profile may refuse; tmpfs has no use for it).
//
// Within a memory limit, the budget is sized so that a full sandbox is an
// error for the statement that filled it ("The table '...' is full",
// ER_RECORD_FILE_FULL 1114: InnoDB reserves a file's extension with
// fallocate, which a full tmpfs refuses) and the server keeps serving:
//   - the data directory: 3/8 of the limit (192 MiB of 512 MiB), at
//     least 128 MiB, for a first start's files (about 80 MiB before any
//     table: the system tablespace, three undo tablespaces, the redo log,
//     the temporary tablespace);
//   - tmpdir: 1/32, at least 4 MiB;
//   - innodb_buffer_pool_size 1/8, at least 16 MiB (its pages cache what
//     the data directory holds, in memory of the same limit);
//   - innodb_log_file_size 1/32, at least 16 MiB (on the data directory);
//     innodb_log_buffer_size 1/64, at least 2 MiB;
//   - the temporary tablespace at most 1/16 of the limit (on the data
//     directory), in-memory temporary tables (tmp_table_size,
//     max_heap_table_size) 1/64 each;
//   - the MyISAM key cache and the Aria page cache (the system tables'
//     engine) 1/64 each, at least 1 MiB;
//   - any other VOLUME of the image: 1/128, at least 1 MiB;
//   - the rest (about 40%) is headroom for mariadbd itself, its threads
//     and the clients' buffers.
func (m Engine) Container(cred engines.Credentials, lim engines.Limits, img engines.Image) engines.Container {
	c := engines.Container{
		Env: map[string]string{
			"MARIADB_USER":                      cred.User,
			"MARIADB_PASSWORD":                  cred.Password,
			"MARIADB_DATABASE":                  cred.Database,
			"MARIADB_ROOT_HOST":                 "localhost",
			"MARIADB_ALLOW_EMPTY_ROOT_PASSWORD": "1",
		},
		Command: []string{
			"sh", "-c", mariadbStart, "sandboxer-mariadb",
			"mariadbd",
			"--tmpdir=" + tmpDir,
			"--innodb-flush-log-at-trx-commit=0",
			"--innodb-doublewrite=0",
			"--innodb-use-native-aio=0",
		},
		Tmpfs: map[string]string{dataDir: "", tmpDir: ""},
	}
	if lim.MemoryBytes > 0 {
		c.Tmpfs[dataDir] = engines.TmpfsSize(lim.Share(3, 8, 128*engines.MiB))
		c.Tmpfs[tmpDir] = engines.TmpfsSize(lim.Share(1, 32, 4*engines.MiB))
		c.Command = append(c.Command,
			"--innodb-buffer-pool-size="+engines.Megabytes(lim.Share(1, 8, 16*engines.MiB), "M"),
			"--innodb-log-file-size="+engines.Megabytes(lim.Share(1, 32, 16*engines.MiB), "M"),
			"--innodb-log-buffer-size="+engines.Megabytes(lim.Share(1, 64, 2*engines.MiB), "M"),
			"--innodb-temp-data-file-path=ibtmp1:12M:autoextend:max:"+engines.Megabytes(lim.Share(1, 16, 16*engines.MiB), "M"),
			"--tmp-table-size="+engines.Megabytes(lim.Share(1, 64, engines.MiB), "M"),
			"--max-heap-table-size="+engines.Megabytes(lim.Share(1, 64, engines.MiB), "M"),
			"--key-buffer-size="+engines.Megabytes(lim.Share(1, 64, engines.MiB), "M"),
			"--aria-pagecache-buffer-size="+engines.Megabytes(lim.Share(1, 64, engines.MiB), "M"),
		)
	}
	c.CoverVolumes(img.Volumes(m.Spec().Tmpfs), lim.Share(1, 128, engines.MiB))
	return c
}

// Probe logs in with the image's mariadb client over TCP (never the
// socket, which the temporary server of a first start also listens on),
// the password in MYSQL_PWD (not argv), and expects SELECT 1 to answer 1.
func (Engine) Probe(ep engines.Endpoint, cred engines.Credentials) []engines.ProbeStep {
	return []engines.ProbeStep{{
		Cmd: []string{"mariadb", "--protocol=tcp", "-h", ep.Host, "-P", strconv.Itoa(ep.Port),
			"-u", cred.User, "-D", cred.Database, "--connect-timeout=2", "--skip-ssl",
			"--batch", "--skip-column-names", "-e", "SELECT 1"},
		Env:   map[string]string{"MYSQL_PWD": cred.Password},
		Check: engines.StdoutIs("1"),
	}}
}

// Scheme is the scheme of the URL Env emits: mysql://USER:PASSWORD@HOST:PORT/NAME,
// the form most MySQL and MariaDB tools read (go-sql-driver/mysql takes
// its own DSN instead: Config turns the URL into one).
const Scheme = "mysql"

// Env emits <P>_MYSQL_HOST, PORT, USER, PASSWORD, NAME and URL.
func (Engine) Env(prefix string, ep engines.Endpoint, cred engines.Credentials) []engines.EnvVar {
	u := engines.ConnURL(Scheme, cred.User, cred.Password, ep, cred.Database, "")
	return engines.ConnEnv(prefix+"_MYSQL_", ep, u, append(engines.UserVars(cred), engines.EnvVar{Name: "NAME", Value: cred.Database})...)
}

// Config is go-sql-driver/mysql's configuration for rawURL, a URL of the
// form Env emits (mysql://USER:PASSWORD@HOST:PORT/NAME; the path may be
// empty: no default database), with the driver's defaults otherwise. A
// Go consumer opens it with mysql.NewConnector and sql.OpenDB: the
// credentials never go through a DSN string, so no character of theirs
// needs escaping.
func Config(rawURL string) (*mysql.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != Scheme {
		return nil, fmt.Errorf("scheme %q, want %s://", u.Scheme, Scheme)
	}
	cfg := mysql.NewConfig()
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	return cfg, nil
}

// Login connects with go-sql-driver/mysql, once (database/sql retries a
// connection only on driver.ErrBadConn, which a refused dial or a
// rejected password is not), and asks the server's version: a query, so
// the session is proven past authentication. The driver's own logger is
// silenced for this connection: a caller polling for readiness would get
// each refused attempt printed as well as returned.
func (Engine) Login(ctx context.Context, rawURL string) (engines.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, engines.AttemptTimeout)
	defer cancel()
	s := engines.Session{Client: "go-sql-driver"}
	cfg, err := Config(rawURL)
	if err != nil {
		return s, engines.LoginError("mariadb", rawURL, err)
	}
	cfg.Timeout = engines.AttemptTimeout
	cfg.ReadTimeout = engines.AttemptTimeout
	cfg.WriteTimeout = engines.AttemptTimeout
	cfg.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return s, engines.LoginError("mariadb", rawURL, err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&s.Server); err != nil {
		return s, engines.LoginError("mariadb", rawURL, err)
	}
	return s, nil
}
