package standins

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/roboco/sandboxer/internal/testkit"
)

// mongoReadyDeadline bounds the wait for a fresh stand-in to accept an
// authenticated ping: the mongo engine's probe deadline.
const mongoReadyDeadline = 60 * time.Second

// mongoPing is the mongo engine's probe, run inside the container by exec:
// mongosh pings with the credentials in the env (never in argv, so that no
// failure message carries them), authenticating against admin as consumers
// of mongo:8 do. HOST is the address to reach the server on.
const mongoPing = `exec mongosh --quiet "mongodb://$MONGO_USER:$MONGO_PASS@$MONGO_HOST:27017/sandbox?authSource=admin" --eval 'db.runCommand({ping:1}).ok'`

// TestMongoStandin proves that the Mongo stand-in honours the mongo:8
// contract sandboxer relies on: its port and VOLUMEs; MONGO_INITDB_ROOT_*
// create a user that logs in with authSource=admin; a wrong password is
// refused with "Authentication failed" and no credentials with "requires
// authentication"; the real mongosh inside the container pings with the
// right credentials; the server runs as uid 999. It runs once with the
// image's VOLUMEs and once with root-owned tmpfs mounts on them, which is how
// sandboxer starts it.
func TestMongoStandin(t *testing.T) {
	ref := standinImage(t, "mongo")

	t.Run("ImageConfig", func(t *testing.T) {
		img := inspectImage(t, ref)
		assert.Contains(t, img.Config.ExposedPorts, "27017/tcp")
		assert.Equal(t, map[string]struct{}{"/data/db": {}, "/data/configdb": {}}, img.Config.Volumes)
		assert.Equal(t, []string{"docker-entrypoint.sh"}, img.Config.Entrypoint)
		assert.Equal(t, []string{"mongod"}, img.Config.Cmd)
	})

	cases := []struct {
		name  string
		tmpfs []string
	}{
		{name: "Volumes"},
		{name: "Tmpfs", tmpfs: []string{"/data/db", "/data/configdb"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			user, pass := "sandbox", testkit.RandomHex(16)
			c := runContainer(t, ref, runOpts{
				Env:     []string{"MONGO_INITDB_ROOT_USERNAME=" + user, "MONGO_INITDB_ROOT_PASSWORD=" + pass},
				Publish: []string{"27017/tcp"},
				Tmpfs:   tc.tmpfs,
			})
			addr := c.hostAddr(t, "27017/tcp")
			client := mongoClient(t, mongoURI(addr, user, pass))
			testkit.Poll(t, mongoReadyDeadline, pollInterval, func() error {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				require.NoError(t, c.exited(ctx), "gave up waiting for an authenticated ping to %s", ref)
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				defer pcancel()
				return client.Ping(pctx, readpref.Primary())
			}, "authenticated ping to %s", ref)

			t.Run("RightPasswordPingsAndRoundTrips", func(t *testing.T) {
				ctx := testkit.Context(t, 30*time.Second)
				require.NoError(t, client.Ping(ctx, readpref.Primary()))

				coll := client.Database("sandbox").Collection("roundtrip")
				_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "k1"}, {Key: "n", Value: int32(42)}})
				require.NoError(t, err)
				var got struct {
					ID string `bson:"_id"`
					N  int32  `bson:"n"`
				}
				require.NoError(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: "k1"}}).Decode(&got))
				assert.Equal(t, "k1", got.ID)
				assert.Equal(t, int32(42), got.N)
			})

			t.Run("WrongPasswordIsAuthenticationFailed", func(t *testing.T) {
				ctx := testkit.Context(t, 30*time.Second)
				err := mongoClient(t, mongoURI(addr, user, pass+"x")).Ping(ctx, readpref.Primary())
				require.Error(t, err)
				assert.Contains(t, err.Error(), "Authentication failed")
			})

			t.Run("NoCredentialsIsRefused", func(t *testing.T) {
				ctx := testkit.Context(t, 30*time.Second)
				coll := mongoClient(t, mongoURI(addr, "", "")).Database("sandbox").Collection("roundtrip")
				_, err := coll.InsertOne(ctx, bson.D{{Key: "n", Value: 1}})
				require.Error(t, err)
				assert.Contains(t, err.Error(), "requires authentication")
			})

			probe := []struct {
				name     string
				host     string
				pass     string
				wantExit bool
				want     string
			}{
				{name: "MongoshPingsOnLoopback", host: "127.0.0.1", pass: pass, want: "1"},
				{name: "MongoshPingsOnContainerAddress", host: c.ip(t), pass: pass, want: "1"},
				{name: "MongoshWrongPasswordIsAuthenticationFailed", host: "127.0.0.1", pass: pass + "x",
					wantExit: true, want: "Authentication failed"},
			}
			for _, p := range probe {
				t.Run(p.name, func(t *testing.T) {
					res, err := c.exec(testkit.Context(t, time.Minute),
						[]string{"MONGO_USER=" + user, "MONGO_PASS=" + p.pass, "MONGO_HOST=" + p.host},
						"sh", "-c", mongoPing)
					require.NoError(t, err)
					if p.wantExit {
						assert.NotZero(t, res.ExitCode)
						assert.Contains(t, res.Stdout+res.Stderr, p.want)
						return
					}
					require.Zero(t, res.ExitCode, "mongosh: %s%s", res.Stdout, res.Stderr)
					assert.Equal(t, p.want+"\n", res.Stdout)
				})
			}

			t.Run("ServerRunsAsUID999", func(t *testing.T) {
				assert.Equal(t, "999", c.uid(t))
			})
		})
	}
}

// mongoURI is the connection string a consumer of sandboxer's env gets for
// the stand-in published on addr; with an empty user it has no credentials.
func mongoURI(addr, user, pass string) string {
	if user == "" {
		return fmt.Sprintf("mongodb://%s/sandbox?directConnection=true", addr)
	}
	return fmt.Sprintf("mongodb://%s:%s@%s/sandbox?authSource=admin&directConnection=true", user, pass, addr)
}

// mongoClient makes a client for uri (lazy: no I/O until the first
// operation), disconnected when the test ends.
func mongoClient(t testing.TB, uri string) *mongo.Client {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(5 * time.Second).SetConnectTimeout(5 * time.Second))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Disconnect(ctx)
	})
	return client
}
