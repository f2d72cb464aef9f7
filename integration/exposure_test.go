package integration

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// A runtime that publishes a sandbox's port on 0.0.0.0 when 127.0.0.1 was
// asked for (here: the real runtime, told 0.0.0.0 by a wrapper) fails the
// provision at the publish stage with ErrExposed, never rewritten to
// 127.0.0.1, and the rollback leaves nothing, as the runtime's own CLI sees
// it.
func TestPublishedBeyondLoopbackFailsAndRollsBack(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx := testkit.Context(t, 3*time.Minute)
		rec := &testruntimes.Recorder{ContainerRuntime: b.RT, PublishOn: "0.0.0.0"}
		// Cold: with warm start, whether the template exists yet (another
		// test may have built it) would change what is run.
		p, err := provision.New(rec, provision.Options{LabelPrefix: e.Prefix, Images: e.Images, Getenv: func(string) string { return "" }, Warm: provision.WarmOff})
		require.NoError(t, err)
		id := e.Owner("exposed")

		_, err = p.Provision(ctx, id, []string{"postgres", "redis"})
		require.Error(t, err)
		t.Logf("error: %v", err)
		var pe *provision.Error
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "publish", pe.Stage)
		assert.ErrorIs(t, err, runtime.ErrExposed)
		assert.Regexp(t, `published on 0\.0\.0\.0:\d+, not on loopback only`, err.Error())
		assert.NoError(t, pe.Rollback)
		assert.Len(t, rec.Ran(), 2, "both sandboxes were run (on 0.0.0.0) before the check")
		assert.Empty(t, b.LabelledNames(t, p.Labels().Owner, p.OwnerName(id)), "the runtime's own CLI lists nothing of the owner")
	})
}

// Owner ids follow the strictest name rule of the supported runtimes
// (containerd's identifiers): the longest id the prefix allows provisions
// on every runtime, with a sandbox name of exactly runtime.MaxNameLength;
// one character more, or an id that only Docker and Podman would take, is
// refused before anything is asked of the runtime.
func TestOwnerIDsFollowTheStrictestNameRule(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := newEnv(t, b)
		ctx := testkit.Context(t, 3*time.Minute)
		opts := provision.Options{LabelPrefix: e.Prefix}
		max := opts.MaxOwnerIDLength()
		var pulls atomic.Int32
		rec := &testruntimes.Recorder{ContainerRuntime: b.RT}
		p := e.Provisioner(func(o *provision.Options) { o.OnEvent = countPulls(&pulls) })
		refusing, err := provision.New(rec, provision.Options{
			LabelPrefix: e.Prefix, Getenv: func(string) string { return "" },
			// Never pulled: the id is refused first.
			Images:  map[string]string{"redis": "127.0.0.1:9/sandboxer/never-pulled:0"},
			OnEvent: countPulls(&pulls),
		})
		require.NoError(t, err)

		t.Run("LongestIDProvisions", func(t *testing.T) {
			id := "a" + strings.Repeat("0", max-1)
			sb, err := p.Provision(ctx, id, []string{"redis"})
			require.NoError(t, err)
			require.Len(t, sb.Containers, 1)
			name := sb.Containers[0].Name
			assert.Len(t, name, runtime.MaxNameLength)
			assert.Equal(t, []string{name}, b.LabelledNames(t, p.Labels().Owner, p.OwnerName(id)), "the runtime's own CLI lists it under its name")
			_, err = p.Teardown(ctx, id)
			require.NoError(t, err)
		})
		for _, id := range []string{"a" + strings.Repeat("0", max), "a..b", "a-", "a_-b", "a.-b"} {
			t.Run("Refused/"+id, func(t *testing.T) {
				_, err := refusing.Provision(ctx, id, []string{"redis"})
				require.Error(t, err)
				assert.ErrorIs(t, err, provision.ErrInvalid)
				assert.ErrorIs(t, err, runtime.ErrInvalid)
				assert.ErrorContains(t, err, `owner id "`+id+`"`)
				assert.Empty(t, rec.Ran(), "nothing run")
				assert.Zero(t, pulls.Load(), "nothing pulled")
			})
		}
	})
}
