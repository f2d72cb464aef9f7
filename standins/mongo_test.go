package standins_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/roboco/sandboxer/internal/testenv"
)

// mongoLabel marks every container these tests start, so that cleanup (and
// a human) can find exactly them.
const mongoLabel = "sandboxer.test=standins"

// mongoReadyDeadline bounds the wait for a fresh stand-in to accept an
// authenticated ping: the mongo engine's probe deadline.
const mongoReadyDeadline = 60 * time.Second

// TestMongoStandin proves that the Mongo stand-in honours the mongo:8
// contract sandboxer relies on: MONGO_INITDB_ROOT_* create a user that logs
// in with authSource=admin, a wrong password is refused, and the real mongosh
// inside the container pings with those credentials. It runs once with the
// image's VOLUMEs and once with root-owned tmpfs mounts on them, which is how
// sandboxer starts it.
func TestMongoStandin(t *testing.T) {
	image := mongoImage(t)
	assertMongoImageConfig(t, image)

	cases := []struct {
		name  string
		mount []string
	}{
		{name: "Volumes"},
		{name: "Tmpfs", mount: []string{"--tmpfs", "/data/db", "--tmpfs", "/data/configdb"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			user, pass := "sandbox", mongoSecret(t)
			c := mongoStart(t, image, user, pass, tc.mount...)

			t.Run("RightPasswordPingsAndRoundTrips", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				client := mongoConnect(t, c.uri(user, pass, "sandbox"))
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
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				client := mongoConnect(t, c.uri(user, pass+"-wrong", "sandbox"))
				err := client.Ping(ctx, readpref.Primary())
				require.Error(t, err)
				assert.Contains(t, err.Error(), "Authentication failed")
			})

			t.Run("NoCredentialsIsRefused", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				client := mongoConnect(t, c.uri("", "", "sandbox"))
				_, err := client.Database("sandbox").Collection("roundtrip").InsertOne(ctx, bson.D{{Key: "n", Value: 1}})
				require.Error(t, err)
				assert.Contains(t, err.Error(), "requires authentication")
			})

			t.Run("MongoshPingsInside", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
				defer cancel()
				uri := fmt.Sprintf("mongodb://%s:%s@127.0.0.1:27017/sandbox?authSource=admin", user, pass)
				out, err := mongoDocker(ctx, "exec", c.id, "mongosh", "--quiet", uri, "--eval", "db.runCommand({ping:1}).ok")
				require.NoError(t, err, "mongosh in the container")
				assert.Equal(t, "1", strings.TrimSpace(out))
			})

			t.Run("MongoshWrongPasswordIsAuthenticationFailed", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
				defer cancel()
				uri := fmt.Sprintf("mongodb://%s:%s-wrong@127.0.0.1:27017/sandbox?authSource=admin", user, pass)
				_, err := mongoDocker(ctx, "exec", c.id, "mongosh", "--quiet", uri, "--eval", "db.runCommand({ping:1}).ok")
				require.Error(t, err)
				assert.Contains(t, err.Error(), "Authentication failed")
			})

			t.Run("ServerRunsAsUID999", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				out, err := mongoDocker(ctx, "exec", c.id, "sh", "-c", "grep '^Uid:' /proc/1/status")
				require.NoError(t, err)
				assert.Equal(t, []string{"Uid:", "999", "999", "999", "999"}, strings.Fields(out))
			})
		})
	}
}

// mongoContainer is a running stand-in and its published port on the host.
type mongoContainer struct {
	id   string
	addr string // 127.0.0.1:<port>
}

// uri is the connection string a consumer of sandboxer's env gets; with an
// empty user it has no credentials.
func (c mongoContainer) uri(user, pass, db string) string {
	if user == "" {
		return fmt.Sprintf("mongodb://%s/%s?directConnection=true", c.addr, db)
	}
	return fmt.Sprintf("mongodb://%s:%s@%s/%s?authSource=admin&directConnection=true", user, pass, c.addr, db)
}

// mongoImage returns the stand-in's ref (SANDBOXER_IMAGE_MONGO), present in
// the daemon: pulled when absent. A missing docker CLI, daemon or image ends
// the test through testenv.Unavailable.
func mongoImage(t *testing.T) string {
	t.Helper()
	image := testenv.Image(t, "docker", "mongo")
	if _, err := exec.LookPath("docker"); err != nil {
		testenv.Unavailable(t, "docker", "no docker CLI: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if _, err := mongoDocker(ctx, "version", "--format", "{{.Server.Version}}"); err != nil {
		testenv.Unavailable(t, "docker", "daemon: %v", err)
	}
	if _, err := mongoDocker(ctx, "image", "inspect", image); err != nil {
		if _, err := mongoDocker(ctx, "pull", "--quiet", image); err != nil {
			testenv.Unavailable(t, "docker", "image %s: %v", image, err)
		}
	}
	return image
}

// assertMongoImageConfig checks the image metadata that sandboxer's mongo
// engine derives from mongo:8: the port and the VOLUMEs it puts tmpfs on.
func assertMongoImageConfig(t *testing.T, image string) {
	t.Helper()
	out, err := mongoDocker(t.Context(), "image", "inspect", "--format", "{{json .Config}}", image)
	require.NoError(t, err)
	var cfg struct {
		ExposedPorts map[string]struct{}
		Volumes      map[string]struct{}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &cfg))
	assert.Contains(t, cfg.ExposedPorts, "27017/tcp")
	assert.Equal(t, map[string]struct{}{"/data/db": {}, "/data/configdb": {}}, cfg.Volumes)
}

// mongoStart runs the stand-in with the official image's root credentials,
// published on 127.0.0.1, removed (with its volumes) when the test ends, and
// returns once an authenticated ping from the host succeeds.
func mongoStart(t *testing.T, image, user, pass string, extra ...string) mongoContainer {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), mongoReadyDeadline)
	defer cancel()

	args := []string{"run", "-d", "--label", mongoLabel, "-p", "127.0.0.1::27017",
		"-e", "MONGO_INITDB_ROOT_USERNAME=" + user, "-e", "MONGO_INITDB_ROOT_PASSWORD=" + pass}
	args = append(args, extra...)
	args = append(args, image)
	out, err := mongoDocker(ctx, args...)
	require.NoError(t, err, "docker run %s", image)
	c := mongoContainer{id: strings.TrimSpace(out)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := mongoDocker(ctx, "rm", "--force", "--volumes", c.id); err != nil {
			t.Errorf("remove mongo stand-in %s: %v", c.id, err)
		}
	})

	out, err = mongoDocker(ctx, "port", c.id, "27017/tcp")
	require.NoError(t, err)
	hostPort, ok := mongoHostPort(out)
	require.True(t, ok, "no 127.0.0.1 binding for 27017/tcp in %q", out)
	c.addr = hostPort

	client := mongoConnect(t, c.uri(user, pass, "admin"))
	var last error
	ready := assert.Eventually(t, func() bool {
		if state, err := mongoDocker(ctx, "inspect", "--format", "{{.State.Status}}", c.id); err == nil &&
			strings.TrimSpace(state) == "exited" {
			last = fmt.Errorf("container exited")
			return true // nothing left to wait for; reported below
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		last = client.Ping(pctx, readpref.Primary())
		return last == nil
	}, mongoReadyDeadline, 250*time.Millisecond)
	if !ready || last != nil {
		logs, _ := mongoDocker(context.Background(), "logs", "--tail", "30", c.id)
		t.Fatalf("mongo stand-in %s not ready: %v\n%s", c.id, last, logs)
	}
	return c
}

// mongoHostPort picks the 127.0.0.1 binding out of `docker port` output.
func mongoHostPort(out string) (string, bool) {
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		host, port, err := net.SplitHostPort(strings.TrimSpace(line))
		if err == nil && host == "127.0.0.1" {
			return net.JoinHostPort(host, port), true
		}
	}
	return "", false
}

// mongoConnect makes a client (lazy: no I/O until the first operation) that
// is disconnected when the test ends.
func mongoConnect(t *testing.T, uri string) *mongo.Client {
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

// mongoDocker runs the docker CLI (DOCKER_HOST from build/images.env via
// testenv) and returns its stdout; on failure the error carries stderr.
func mongoDocker(ctx context.Context, args ...string) (string, error) {
	testenv.Load()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("docker %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()+"\n"+stdout.String()))
	}
	return stdout.String(), nil
}

// mongoSecret is a fresh password: 32 hex chars, as sandboxer makes them.
func mongoSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}
