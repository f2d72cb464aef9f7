package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime/docker"
)

// TestUpPostgres18ColdAndWarm runs `up` with an image laid out as
// postgres:18 is (the 18 stand-in: PGDATA /var/lib/postgresql/18/docker,
// VOLUME /var/lib/postgresql, an entrypoint that refuses a mount at the
// old /var/lib/postgresql/data), given with --image as a user would:
// cold with --warm off, then warm, first building the template, then
// starting from it. Every time pgx logs in at the URL up emitted and the
// server says 18, and Docker's own inspect says which image the sandbox
// runs: the 18 image cold, the template warm.
func TestUpPostgres18ColdAndWarm(t *testing.T) {
	c := newCLI(t, "postgres")
	ref := testkit.EnsureImage(t, c.rt, testenv.Image(t, docker.Name, "postgres18"))
	// A limit no other test uses gives this test a template of its own
	// (the template's key holds the budget the limit sizes), so removing
	// it cannot pull one from under a concurrent test.
	flags := []string{"--image", "postgres=" + ref, "--memory", "608m"}
	removeTemplate := func() { c.sbx(append([]string{"warm", "--remove", "--services", "postgres"}, flags...)...) }
	removeTemplate() // one an earlier, interrupted run left
	t.Cleanup(removeTemplate)

	// up provisions one postgres sandbox with extra flags, logs in to it
	// with pgx, checks the server's major and the image Docker says the
	// container runs, tears it down, and returns up's log.
	up := func(t *testing.T, extra ...string) (image, log string) {
		t.Helper()
		owner := "p18" + testkit.RandomHex(3)
		args := append(append([]string{"up", "--verbose", "--owner", owner, "--services", "postgres"}, flags...), extra...)
		r := c.mustSbx(args...)
		env := parseDotenv(t, r.stdout)
		ctx := testkit.Context(t, 2*time.Minute)
		conn, err := pgx.Connect(ctx, env["ROBOCO_TEST_DB_URL"])
		require.NoError(t, err, "pgx logs in at the URL up emitted")
		var version string
		require.NoError(t, conn.QueryRow(ctx, "SHOW server_version").Scan(&version))
		require.NoError(t, conn.Close(ctx))
		assert.Regexp(t, `^18\.`, version, "the server is the 18 stand-in's")
		require.Len(t, c.ownedBy(owner), 1)
		name := c.ownedBy(owner)[0].Name
		image = strings.TrimSpace(c.own.OwnCLI(t, "inspect", "--format", "{{.Config.Image}}", name))
		c.mustSbx("down", "--owner", owner)
		return image, r.stderr
	}

	t.Run("Cold", func(t *testing.T) {
		image, log := up(t, "--warm", "off")
		assert.Equal(t, ref, image, "a cold sandbox runs the 18 image itself")
		assert.NotContains(t, log, "sandbox template-built")
	})
	t.Run("WarmBuildsTheTemplate", func(t *testing.T) {
		image, log := up(t, "--warm", "auto")
		assert.Contains(t, log, "sandbox template-built", "the first warm up builds the 18 image's template")
		assert.NotContains(t, log, "sandbox warm-fallback", "and starts from it, not cold")
		assert.True(t, strings.HasPrefix(image, provision.TemplateRepo+"postgres:"), "runs the template, as docker inspect says: %s", image)
	})
	t.Run("WarmFromTheTemplate", func(t *testing.T) {
		image, log := up(t, "--warm", "auto")
		assert.NotContains(t, log, "sandbox template-built", "the template is there")
		assert.NotContains(t, log, "sandbox warm-fallback")
		assert.True(t, strings.HasPrefix(image, provision.TemplateRepo+"postgres:"), "runs the template, as docker inspect says: %s", image)
	})
}
