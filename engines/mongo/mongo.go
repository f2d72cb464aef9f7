// Package mongo is sandboxer's MongoDB engine: its container, budget,
// readiness probe, emitted env and its login with mongo-driver, which
// only a program that imports it links. Importing it registers the engine
// (engines.Register), as importing a database/sql driver does:
//
//	import _ "github.com/roboco/sandboxer/engines/mongo"
//
// Its test kit (fill-to-full, per-test databases, the tests' helpers) is
// mongotest.
package mongo

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/roboco/sandboxer/engines"
)

func init() { engines.Register(Engine{}) }

// Compile-time proof that mongo logs in.
var _ engines.WireChecker = Engine{}

// Engine is MongoDB on the official image's contract
// (MONGO_INITDB_ROOT_USERNAME / MONGO_INITDB_ROOT_PASSWORD create a root
// user in the admin database; first start initialises through a temporary
// server on 127.0.0.1).
type Engine struct{}

// Order is mongo's place in the report order: after redis.
const Order = 30

// selection bounds one login's server selection. mongo-driver re-checks a
// server it found down only after 500 ms (its minimum heartbeat), so a
// selection this short makes one attempt exactly one check of the server,
// and lets a caller poll faster than the driver.
const selection = 100 * time.Millisecond

// Spec describes the mongo engine. Its default memory limit is 1 GiB, not
// the provisioner's 512 MiB: by MongoDB's own figures mongod's floor does
// not fit in 512 MiB. The WiredTiger cache alone is at least 0.25 GB
// (storage.wiredTiger.engineConfig.cacheSizeGB: "values can range from
// 0.25 GB to 10000 GB", docs /reference/configuration-options), the data
// directory is a tmpfs counted against the same limit, and the official
// image's first start runs a temporary mongod plus mongosh (Node.js)
// before the real server; 256 MiB of cache, 128 MiB of data and mongod's
// own memory outside the cache (connections, the oplog-less catalog,
// the journal buffers) leave nothing for that.
func (Engine) Spec() engines.Spec {
	return engines.Spec{
		Name:         "mongo",
		Short:        "mongo",
		Order:        Order,
		Image:        "mongo:8",
		Port:         27017,
		Tmpfs:        []string{"/data/db", "/data/configdb"},
		Capabilities: engines.DropToServerUser(),
		ReadyTimeout: 60 * time.Second,
		MemoryBytes:  memoryBytes,
	}
}

// memoryBytes is the mongo engine's default memory limit (see Spec).
const memoryBytes = 1 << 30

// Container sets the root user. Within a memory limit, the data directory
// gets a quarter of it and the storage engine's cache is sized for the
// rest (--wiredTigerCacheSizeGB: a quarter of the limit, at least the
// 0.25 GB mongod accepts), so that a full sandbox refuses writes instead
// of being killed for memory; /data/configdb holds next to nothing, and
// so does any other VOLUME of img (1/64 of the limit each). The server
// parameters below give real mongod what MongoDB documents it needs on a
// small, bounded data directory; the FerretDB stand-in ignores them (see
// the README: they are not verified against mongod here).
func (m Engine) Container(cred engines.Credentials, lim engines.Limits, img engines.Image) engines.Container {
	c := engines.Container{
		Env: map[string]string{
			"MONGO_INITDB_ROOT_USERNAME": cred.User,
			"MONGO_INITDB_ROOT_PASSWORD": cred.Password,
		},
		Tmpfs: map[string]string{"/data/db": "", "/data/configdb": ""},
	}
	if lim.MemoryBytes > 0 {
		cache := float64(lim.Share(1, 4, engines.MiB)) / (1 << 30)
		data := lim.Share(1, 4, 16*engines.MiB)
		c.Command = []string{"mongod",
			"--wiredTigerCacheSizeGB", strconv.FormatFloat(max(cache, 0.25), 'f', 2, 64),
			// From 7.1, mongod refuses to start an index build, and
			// aborts a running one, while the data directory has less
			// free space than indexBuildMinAvailableDiskSpaceMB (default
			// 500 MB: docs /reference/parameters,
			// "indexBuildMinAvailableDiskSpaceMB"; jstests
			// noPassthrough/index_build_min_disk_space*.js): more than the
			// whole bounded /data/db. A sixteenth of it keeps the guard.
			"--setParameter", "indexBuildMinAvailableDiskSpaceMB=" + strconv.FormatInt(max(data/16/engines.MiB, 1), 10),
			// Full-time diagnostic data capture writes diagnostic.data
			// into the data directory, up to
			// diagnosticDataCollectionDirectorySizeMB (200 MB by default):
			// docs /reference/parameters,
			// "diagnosticDataCollectionEnabled".
			"--setParameter", "diagnosticDataCollectionEnabled=false",
			// The journal is WiredTiger's log, which mongod opens as
			// log=(enabled=true,remove=true,path=journal,...)
			// (src/mongo/db/storage/wiredtiger/wiredtiger_kv_engine.cpp)
			// with WiredTiger's defaults of file_max=100MB and
			// prealloc=true: a log file and a preallocated one, 200 MB,
			// more than the bounded /data/db. The engine config string is
			// appended to mongod's own (storage.wiredTiger.engineConfig.
			// configString); WiredTiger documents both keys under
			// wiredtiger_open's "log" settings.
			"--wiredTigerEngineConfigString", "log=(file_max=" + strconv.FormatInt(max(data/16/engines.MiB, 1), 10) + "MB,prealloc=false)",
		}
		c.Tmpfs["/data/db"] = engines.TmpfsSize(data)
		c.Tmpfs["/data/configdb"] = engines.TmpfsSize(lim.Share(1, 64, engines.MiB))
	}
	c.CoverVolumes(img.Volumes(m.Spec().Tmpfs), lim.Share(1, 64, engines.MiB))
	return c
}

// probeURLEnv carries the probe's connection URL into mongosh, so that the
// password is never in argv.
const probeURLEnv = "SANDBOXER_PROBE_URL"

// Probe connects with mongosh as the root user (auth database admin) and
// runs ping, expecting 1. mongosh boots Node.js, which costs far more
// than the ping, so one attempt waits up to 5 s for the server (the driver
// re-checks it every 500 ms) rather than failing fast and booting again.
func (Engine) Probe(ep engines.Endpoint, cred engines.Credentials) []engines.ProbeStep {
	u := url.URL{
		Scheme:   "mongodb",
		User:     url.UserPassword(cred.User, cred.Password),
		Host:     ep.HostPort(),
		Path:     "/admin",
		RawQuery: "authSource=admin&directConnection=true&serverSelectionTimeoutMS=5000&connectTimeoutMS=2000",
	}
	return []engines.ProbeStep{{
		Cmd: []string{"mongosh", "--nodb", "--quiet", "--norc", "--eval",
			"print(connect(process.env." + probeURLEnv + ").runCommand({ping: 1}).ok)"},
		Env:   map[string]string{probeURLEnv: u.String()},
		Check: engines.StdoutIs("1"),
	}}
}

// Env emits <P>_MONGO_HOST, PORT, USER, PASSWORD, DB, AUTH_DB and URL.
func (Engine) Env(prefix string, ep engines.Endpoint, cred engines.Credentials) []engines.EnvVar {
	u := engines.ConnURL("mongodb", cred.User, cred.Password, ep, cred.Database, "authSource=admin")
	vars := append(engines.UserVars(cred), engines.EnvVar{Name: "DB", Value: cred.Database}, engines.EnvVar{Name: "AUTH_DB", Value: "admin"})
	return engines.ConnEnv(prefix+"_MONGO_", ep, u, vars...)
}

// mongoPing connects with mongo-driver and pings admin, with selection as
// the server selection timeout. disconnect ends the client, once err is
// nil.
func mongoPing(ctx context.Context, rawURL string, selection time.Duration) (admin *mongodriver.Database, disconnect func(), err error) {
	c, err := mongodriver.Connect(options.Client().ApplyURI(rawURL).
		SetServerSelectionTimeout(selection).SetConnectTimeout(engines.AttemptTimeout).
		SetRetryReads(false).SetRetryWrites(false))
	if err != nil {
		return nil, nil, err
	}
	disconnect = func() { _ = c.Disconnect(context.WithoutCancel(ctx)) }
	admin = c.Database("admin")
	if err := admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		disconnect()
		return nil, nil, err
	}
	return admin, disconnect, nil
}

// slowNotDown reports whether a ping failed only for want of time: a
// connection checkout that timed out, or a selection that timed out while
// no server showed an error of its own (a refused or closed connection
// does: that server is down).
func slowNotDown(err error) bool {
	var wq topology.WaitQueueTimeoutError
	if errors.As(err, &wq) {
		return true
	}
	var se topology.ServerSelectionError
	if !errors.As(err, &se) || len(se.Desc.Servers) == 0 {
		return false
	}
	for _, srv := range se.Desc.Servers {
		if srv.LastError != nil {
			return false
		}
	}
	return true
}

// Login connects with mongo-driver, authenticating against the URL's
// auth database, pings admin and asks buildInfo for the server's version.
// One server check (see selection), no retried reads; a server that
// answered but whose login outlasted that check gets one more try within
// the attempt's deadline (slowNotDown).
func (Engine) Login(ctx context.Context, rawURL string) (engines.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, engines.AttemptTimeout)
	defer cancel()
	s := engines.Session{Client: "mongo-driver"}
	admin, disconnect, err := mongoPing(ctx, rawURL, selection)
	if err != nil && slowNotDown(err) && ctx.Err() == nil {
		// The server answered but its login did not end within the short
		// selection timeout, which mongo-driver also applies to a new
		// connection's checkout (handshake and SCRAM, a PBKDF2 on each
		// side: slow on a loaded host). One more try with the attempt's
		// own deadline; a server that is down failed above at once.
		admin, disconnect, err = mongoPing(ctx, rawURL, engines.AttemptTimeout)
	}
	if err != nil {
		return s, engines.LoginError("mongo", rawURL, err)
	}
	defer disconnect()
	var build struct {
		Version string `bson:"version"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&build); err != nil {
		return s, engines.LoginError("mongo", rawURL, err)
	}
	s.Server = build.Version
	return s, nil
}
