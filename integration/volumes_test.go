package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/runtime/docker"
)

// TestImageVolumesAreBoundedOrRefused: an image built with `docker build`
// FROM the postgres stand-in with one VOLUME more than it has starts, and
// every one of its VOLUMEs is a bounded tmpfs inside the container, as
// docker inspect and the container's own /proc/mounts tell; one built with
// VOLUMEs up to engines.MaxVolumes+1 is refused before anything runs
// (engines.ErrImageLayout, naming the image and the count): docker's own
// event log shows no container ever made of it, and `docker ps -a` and
// `docker volume ls` show nothing of it.
func TestImageVolumesAreBoundedOrRefused(t *testing.T) {
	r := testruntimes.Connect(t, docker.Name)
	e := newEnv(t, r)
	ctx := testkit.Context(t, 5*time.Minute)
	base := testkit.EnsureImage(t, r.RT, testenv.Image(t, r.Name, "postgres"))
	var baseImg []struct {
		Config struct{ Volumes map[string]struct{} }
	}
	require.NoError(t, json.Unmarshal(r.Own(t, ctx, "image", "inspect", base), &baseImg))
	require.Len(t, baseImg, 1)
	have := len(baseImg[0].Config.Volumes)
	require.Positive(t, have, "the stand-in declares its data VOLUME")

	repo := "sandboxer-test/pg-volumes-" + testkit.RandomHex(4)
	build := func(t *testing.T, total int) string {
		t.Helper()
		tag := fmt.Sprintf("%s:%d", repo, total)
		var df strings.Builder
		fmt.Fprintf(&df, "FROM %s\n", base)
		for i := have; i < total; i++ {
			fmt.Fprintf(&df, "VOLUME /var/lib/sandboxer-test/extra%02d\n", i)
		}
		dockerCLI := []string{"docker", "--host", r.RT.Endpoint()} // what r.Own runs, fed a Dockerfile on stdin
		cmd := exec.CommandContext(ctx, dockerCLI[0], append(dockerCLI[1:], "build", "-q", "-t", tag, "-")...)
		cmd.Stdin = strings.NewReader(df.String())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "docker build %s: %s", tag, out)
		t.Cleanup(func() {
			rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = exec.CommandContext(rctx, dockerCLI[0], append(dockerCLI[1:], "rmi", "-f", tag)...).Run()
		})
		var img []struct {
			Config struct{ Volumes map[string]struct{} }
		}
		require.NoError(t, json.Unmarshal(r.Own(t, ctx, "image", "inspect", tag), &img))
		require.Len(t, img[0].Config.Volumes, total, "%s declares %d VOLUMEs", tag, total)
		return tag
	}

	t.Run("OneMoreVolumeIsABoundedTmpfs", func(t *testing.T) {
		tag := build(t, have+1)
		e.Images["postgres"] = tag
		sb, err := e.Provisioner(nil).Provision(ctx, e.Owner("vol1"), []string{"postgres"})
		require.NoError(t, err, "an image with %d VOLUMEs starts", have+1)
		c := sb.Containers[0]
		_, err = testruntimes.Login(ctx, sb, c)
		require.NoError(t, err, "and serves")

		var img []struct {
			Config struct{ Volumes map[string]struct{} }
		}
		require.NoError(t, json.Unmarshal(r.Own(t, ctx, "image", "inspect", tag), &img))
		var ctr []struct {
			HostConfig struct{ Tmpfs map[string]string }
			Mounts     []struct{ Type, Destination string }
		}
		require.NoError(t, json.Unmarshal(r.Own(t, ctx, "inspect", c.Name), &ctr))
		require.Len(t, ctr, 1)
		for _, m := range ctr[0].Mounts {
			assert.NotEqual(t, "volume", m.Type, "%s is a volume, not a tmpfs", m.Destination)
		}
		mounts := map[string]string{} // mount point -> "fstype options"
		for _, line := range strings.Split(string(r.Own(t, ctx, "exec", c.Name, "cat", "/proc/mounts")), "\n") {
			if f := strings.Fields(line); len(f) >= 4 {
				mounts[f[1]] = f[2] + " " + f[3]
			}
		}
		for v := range img[0].Config.Volumes {
			assert.Contains(t, ctr[0].HostConfig.Tmpfs[v], "size=", "docker inspect: VOLUME %s is a bounded tmpfs", v)
			got, ok := mounts[v]
			if assert.True(t, ok, "/proc/mounts: VOLUME %s is mounted", v) {
				assert.True(t, strings.HasPrefix(got, "tmpfs "), "/proc/mounts: VOLUME %s is a tmpfs: %s", v, got)
				assert.Contains(t, got, "size=", "/proc/mounts: VOLUME %s is bounded: %s", v, got)
			}
		}
	})

	t.Run("TooManyVolumesAreRefusedBeforeAnythingRuns", func(t *testing.T) {
		total := engines.MaxVolumes + 1
		tag := build(t, total)
		danglingBefore := strings.Fields(r.OwnCLI(t, "volume", "ls", "-q", "--filter", "dangling=true"))
		since := time.Now().Add(-time.Second)
		e.Images["postgres"] = tag
		p := e.Provisioner(nil)
		owner := e.Owner("vol17")
		_, err := p.Provision(ctx, owner, []string{"postgres"})
		require.ErrorIs(t, err, engines.ErrImageLayout)
		assert.Contains(t, err.Error(), tag, "the error names the image")
		assert.Contains(t, err.Error(), fmt.Sprintf("%d VOLUMEs", total), "the error names the count")

		until := time.Now().Add(time.Second)
		events := r.OwnCLI(t, "events", "--since", since.Format(time.RFC3339Nano), "--until", until.Format(time.RFC3339Nano),
			"--filter", "type=container", "--filter", "image="+tag, "--format", "{{.Action}} {{.Actor.Attributes.name}}")
		assert.Empty(t, strings.TrimSpace(events), "docker events: no container was ever made of %s", tag)
		assert.Empty(t, strings.TrimSpace(r.OwnCLI(t, "ps", "-a", "-q", "--filter", "ancestor="+tag)), "docker ps -a: no container of %s", tag)
		ps := []string{"ps", "-a", "-q"}
		for k, v := range labels.For(e.Prefix).OwnedBy(p.OwnerName(owner)) {
			ps = append(ps, "--filter", "label="+k+"="+v)
		}
		assert.Empty(t, strings.TrimSpace(r.OwnCLI(t, ps...)), "docker ps -a: no container of the owner")
		var leaked []string
		for _, v := range strings.Fields(r.OwnCLI(t, "volume", "ls", "-q", "--filter", "dangling=true")) {
			if !slices.Contains(danglingBefore, v) {
				leaked = append(leaked, v)
			}
		}
		assert.Empty(t, leaked, "docker volume ls: no volume left behind")
	})
}
