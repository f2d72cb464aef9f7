package engines

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Mongo is MongoDB on the official image's contract
// (MONGO_INITDB_ROOT_USERNAME / MONGO_INITDB_ROOT_PASSWORD create a root
// user in the admin database; first start initialises through a temporary
// server on 127.0.0.1).
type Mongo struct{}

// Spec describes the mongo engine.
func (Mongo) Spec() Spec {
	return Spec{
		Name:         "mongo",
		Short:        "mongo",
		Image:        "mongo:8",
		Port:         27017,
		Tmpfs:        []string{"/data/db", "/data/configdb"},
		Capabilities: dropToServerUser,
		ReadyTimeout: 60 * time.Second,
	}
}

// Container sets the root user. Within a memory limit, the data directory
// gets a quarter of it and the storage engine's cache is sized for the
// rest (--wiredTigerCacheSizeGB: a quarter of the limit, at least the
// 0.25 GB mongod accepts), so that a full sandbox refuses writes instead
// of being killed for memory; /data/configdb holds next to nothing.
func (Mongo) Container(cred Credentials, lim Limits) Container {
	c := Container{
		Env: map[string]string{
			"MONGO_INITDB_ROOT_USERNAME": cred.User,
			"MONGO_INITDB_ROOT_PASSWORD": cred.Password,
		},
		Tmpfs: map[string]string{"/data/db": "", "/data/configdb": ""},
	}
	if lim.MemoryBytes > 0 {
		cache := float64(lim.share(1, 4, mib)) / (1 << 30)
		c.Command = []string{"mongod", "--wiredTigerCacheSizeGB", strconv.FormatFloat(max(cache, 0.25), 'f', 2, 64)}
		c.Tmpfs["/data/db"] = tmpfsSize(lim.share(1, 4, 16*mib))
		c.Tmpfs["/data/configdb"] = tmpfsSize(lim.share(1, 64, mib))
	}
	return c
}

// probeURLEnv carries the probe's connection URL into mongosh, so that the
// password is never in argv.
const probeURLEnv = "SANDBOXER_PROBE_URL"

// Probe connects with mongosh as the root user (auth database admin) and
// runs ping, expecting 1. mongosh boots Node.js, which costs far more
// than the ping, so one attempt waits up to 5 s for the server (the driver
// re-checks it every 500 ms) rather than failing fast and booting again.
func (Mongo) Probe(ep Endpoint, cred Credentials) []ProbeStep {
	u := url.URL{
		Scheme:   "mongodb",
		User:     url.UserPassword(cred.User, cred.Password),
		Host:     hostPort(ep),
		Path:     "/admin",
		RawQuery: "authSource=admin&directConnection=true&serverSelectionTimeoutMS=5000&connectTimeoutMS=2000",
	}
	return []ProbeStep{{
		Cmd: []string{"mongosh", "--nodb", "--quiet", "--norc", "--eval",
			"print(connect(process.env." + probeURLEnv + ").runCommand({ping: 1}).ok)"},
		Env:   map[string]string{probeURLEnv: u.String()},
		Check: StdoutIs("1"),
	}}
}

// Env emits <P>_MONGO_HOST, PORT, USER, PASSWORD, DB, AUTH_DB and URL.
func (Mongo) Env(prefix string, ep Endpoint, cred Credentials) []EnvVar {
	u := url.URL{
		Scheme:   "mongodb",
		User:     url.UserPassword(cred.User, cred.Password),
		Host:     hostPort(ep),
		Path:     "/" + cred.Database,
		RawQuery: "authSource=admin",
	}
	p := prefix + "_MONGO_"
	return []EnvVar{
		{Name: p + "HOST", Value: ep.Host},
		{Name: p + "PORT", Value: strconv.Itoa(ep.Port)},
		{Name: p + "USER", Value: cred.User},
		{Name: p + "PASSWORD", Value: cred.Password, Secret: true},
		{Name: p + "DB", Value: cred.Database},
		{Name: p + "AUTH_DB", Value: "admin"},
		{Name: p + "URL", Value: u.String(), Secret: true},
	}
}

// Login connects with mongo-driver, authenticating against the URL's
// auth database, pings admin and asks buildInfo for the server's version.
// One server check (see mongoSelection), no retried reads.
func (Mongo) Login(ctx context.Context, rawURL string) (Session, error) {
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	s := Session{Client: "mongo-driver"}
	c, err := mongo.Connect(options.Client().ApplyURI(rawURL).
		SetServerSelectionTimeout(mongoSelection).SetConnectTimeout(AttemptTimeout).
		SetRetryReads(false).SetRetryWrites(false))
	if err != nil {
		return s, loginError("mongo", rawURL, err)
	}
	defer c.Disconnect(context.WithoutCancel(ctx))
	admin := c.Database("admin")
	if err := admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		return s, loginError("mongo", rawURL, err)
	}
	var build struct {
		Version string `bson:"version"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&build); err != nil {
		return s, loginError("mongo", rawURL, err)
	}
	s.Server = build.Version
	return s, nil
}
