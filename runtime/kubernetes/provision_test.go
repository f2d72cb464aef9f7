package kubernetes_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// TestProvisionEveryEngineAsPods: the provisioner, which knows no adapter,
// provisions every engine on the cluster in network mode (a cluster
// publishes nothing on the host), the kubelet pulling the images; each is
// ready by its engine's real client at its pod address, which the test's
// own clients (pgx, go-redis, mongo-driver) and every engine's login
// (engines.WireChecker) reach with the env handed out; teardown leaves no pod or Secret of theirs, and leaves the
// network (the test's), whose RemoveNetwork then leaves no ConfigMap, as
// kubectl sees.
func TestProvisionEveryEngineAsPods(t *testing.T) {
	h := newHarness(t)
	ctx := testkit.Context(t, 8*time.Minute)
	network := "sbx-k8s-net-" + h.id
	t.Cleanup(func() { _ = h.rt.RemoveNetwork(context.Background(), network) })
	_, err := h.rt.CreateNetwork(ctx, runtime.NetworkSpec{Name: network})
	require.NoError(t, err)

	images := map[string]string{}
	for _, e := range engines.Default.Names() {
		images[e] = testkit.Image(t, h.rt, e)
	}
	p, err := provision.New(h.rt, provision.Options{
		Network:     network,
		Images:      images,
		LabelPrefix: "sbxk" + h.id[:4],
		Labels:      map[string]string{adapterLabel: h.id},
		MemoryBytes: 256 << 20,
		CPUs:        0.5,
	})
	require.NoError(t, err)
	owner := "k" + h.id
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _ = p.Teardown(cctx, owner)
	})
	start := time.Now()
	sb, err := p.Provision(ctx, owner, engines.Default.Names())
	require.NoError(t, err)
	t.Logf("%s provisioned as pods in %s", strings.Join(engines.Default.Names(), ", "), time.Since(start).Round(time.Millisecond))
	env := sb.Map()

	t.Run("PostgresWithPgx", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, env["ROBOCO_TEST_DB_URL"])
		require.NoError(t, err)
		defer conn.Close(ctx)
		var n int
		require.NoError(t, conn.QueryRow(ctx, "select 41 + 1").Scan(&n))
		assert.Equal(t, 42, n)
	})
	t.Run("RedisWithGoRedis", func(t *testing.T) {
		c := redis.NewClient(&redis.Options{
			Addr:     net.JoinHostPort(env["ROBOCO_TEST_REDIS_HOST"], env["ROBOCO_TEST_REDIS_PORT"]),
			Password: env["ROBOCO_TEST_REDIS_PASSWORD"],
		})
		defer c.Close()
		require.NoError(t, c.Set(ctx, "sandboxer:k", "pod", 0).Err())
		got, err := c.Get(ctx, "sandboxer:k").Result()
		require.NoError(t, err)
		assert.Equal(t, "pod", got)
	})
	t.Run("MongoWithMongoDriver", func(t *testing.T) {
		c, err := mongo.Connect(options.Client().ApplyURI(env["ROBOCO_TEST_MONGO_URL"]))
		require.NoError(t, err)
		defer c.Disconnect(ctx)
		_, err = c.Database(env["ROBOCO_TEST_MONGO_DB"]).Collection("t").InsertOne(ctx, map[string]string{"k": "pod"})
		require.NoError(t, err)
	})
	for _, c := range sb.Containers {
		t.Run(c.Engine+"Login", func(t *testing.T) {
			url, ok := sb.Lookup(engines.Default.URLName(c.Engine, provision.DefaultEnvPrefix))
			require.True(t, ok)
			s, err := engines.Default.Login(ctx, c.Engine, url)
			require.NoError(t, err, "the engine's real client logs in with the env handed out")
			t.Logf("%s: %s logged in to %s", c.Name, s.Client, s.Server)
		})
		assert.Equal(t, h.cl.kubectl(t, ctx, "get", "pod", c.Name, "-o", "jsonpath={.status.podIP}"), env[hostVar(c.Engine)], "%s is reached at its pod IP", c.Name)
	}

	for _, c := range sb.Containers {
		h.cl.requireSecret(t, ctx, c.Name)
	}
	removed, err := p.Teardown(ctx, owner)
	require.NoError(t, err)
	assert.Len(t, removed, len(engines.Default.Names()))
	assert.Empty(t, h.cl.kubectl(t, ctx, "get", "pods", "-l", adapterLabel+"="+h.id, "-o", "name"), "teardown leaves no pod")
	for _, c := range sb.Containers {
		assert.NoError(t, h.cl.gone(t, ctx, c.Name), "teardown leaves no pod or Secret of %s", c.Name)
	}
	cm := "configmap/sandboxer-network." + network
	assert.Equal(t, cm, strings.TrimSpace(h.cl.kubectl(t, ctx, "get", cm, "--ignore-not-found", "-o", "name")), "the network is the test's: teardown leaves it")
	require.NoError(t, h.rt.RemoveNetwork(ctx, network))
	assert.Empty(t, h.cl.kubectl(t, ctx, "get", cm, "--ignore-not-found", "-o", "name"), "RemoveNetwork leaves no ConfigMap")
}

// hostVar is the emitted env variable that holds an engine's host: the one
// whose value is the endpoint's host.
func hostVar(engine string) string {
	e, _ := engines.Default.Lookup(engine)
	for _, v := range e.Env(provision.DefaultEnvPrefix, engines.Endpoint{Host: "host.invalid", Port: 1}, engines.Credentials{}) {
		if v.Value == "host.invalid" {
			return v.Name
		}
	}
	return ""
}
