package kubernetes_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/enginetest"
	"github.com/roboco/sandboxer/engines/postgres/postgrestest"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
)

// TestPostgres18AsAPod: the postgres engine on the 18 stand-in (shaped
// like postgres:18: PGDATA /var/lib/postgresql/18/docker, VOLUME
// /var/lib/postgresql, an entrypoint that refuses to initialise while
// /var/lib/postgresql/data is a mount point and PGDATA is its default),
// cold, as a pod the kubelet pulls from the loopback registry. The
// cluster has no image store, so the engine cannot read the image's
// layout: its fallback (PGDATA set to /var/lib/postgresql/data, on a
// tmpfs of its own) must be one the 18 entrypoint accepts. The sandbox is
// ready, logged in to (server 18), fills to postgres's own "full" error
// (SQLSTATE 53100) within the default limit, and still serves, with no
// restart and no OOM kill, as kubectl sees the pod.
func TestPostgres18AsAPod(t *testing.T) {
	cl, w := world(t)
	ctx := testkit.Context(t, 10*time.Minute)
	w.Images["postgres"] = testenv.Image(t, w.Name, "postgres18")
	p := networkProvisioner(ctx, w)

	start := time.Now()
	sb, err := p.Provision(ctx, w.Owner("pg18"), []string{"postgres"})
	require.NoError(t, err, "cold start of the 18 stand-in as a pod")
	t.Logf("postgres 18 provisioned as a pod in %s", time.Since(start).Round(time.Millisecond))
	c := sb.Containers[0]
	url, err := testruntimes.URL(sb, c)
	require.NoError(t, err)
	s, err := engines.Default.Login(ctx, "postgres", url)
	require.NoError(t, err, "login")
	assert.Regexp(t, `^18\.`, s.Server, "the server is the 18 stand-in's")

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	var dataDir string
	require.NoError(t, conn.QueryRow(ctx, "show data_directory").Scan(&dataDir))
	conn.Close(ctx)
	assert.Equal(t, "/var/lib/postgresql/data", dataDir,
		"without an image store, PGDATA is the layout every official image accepts (18's with PGDATA set to it)")
	var dataMount string
	for _, line := range strings.Split(cl.kubectl(t, ctx, "exec", c.Name, "--", "cat", "/proc/mounts"), "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[1] == dataDir {
			dataMount = f[2] + " " + f[3]
		}
	}
	assert.True(t, strings.HasPrefix(dataMount, "tmpfs "), "the pod's /proc/mounts: %s is a tmpfs: %q", dataDir, dataMount)
	assert.Contains(t, dataMount, "size=", "the pod's /proc/mounts: %s is bounded", dataDir)

	f := postgrestest.Kit{}
	res, err := f.Fill(ctx, url, 1000, 2*provision.DefaultMemoryBytes)
	require.NoError(t, err, "fill: every write succeeds until the server says full")
	require.ErrorIs(t, res.Full, enginetest.ErrFull, "%d MiB written without postgres's full error", res.Bytes>>20)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(res.Full, &pgErr), "the full error is postgres's own: %v", res.Full)
	assert.Equal(t, "53100", pgErr.Code, "SQLSTATE disk_full")
	t.Logf("postgres 18 as a pod: full after %d records (%.1f MiB): %v", res.Records, float64(res.Bytes)/(1<<20), res.Full)

	n, err := f.Count(ctx, url)
	require.NoError(t, err, "a full sandbox still serves reads")
	assert.GreaterOrEqual(t, n, res.Records, "every accepted record is there")
	_, err = engines.Default.Login(ctx, "postgres", url)
	assert.NoError(t, err, "a full sandbox still takes logins")

	var pod corev1.Pod
	require.NoError(t, json.Unmarshal([]byte(cl.kubectl(t, ctx, "get", "pod", c.Name, "-o", "json")), &pod))
	require.Len(t, pod.Status.ContainerStatuses, 1)
	st := pod.Status.ContainerStatuses[0]
	assert.NotNil(t, st.State.Running, "the container is running, as kubectl sees it: %+v", st.State)
	assert.Zero(t, st.RestartCount, "never restarted, as kubectl sees it")
	if lt := st.LastTerminationState.Terminated; lt != nil {
		assert.NotEqual(t, "OOMKilled", lt.Reason, "never OOM-killed, as kubectl sees it")
	}
}
