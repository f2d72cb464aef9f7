package faults

import (
	"fmt"
	"maps"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/redis"
	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

// TestImageMissingForOneOfThree: one of three services names an image
// that cannot be had. The provision fails loud, naming that service and
// image with the image-not-found kind, after the other two (started in
// parallel, possibly mid-run or mid-probe) are rolled back: when it
// returns, no container carries the test's sandbox label.
func TestImageMissingForOneOfThree(t *testing.T) {
	registry := testenv.Getenv("SANDBOXER_REGISTRY")
	missing := []struct {
		name    string
		service string
		ref     func() string
	}{
		{"AbsentFromTheRegistry", "redis", func() string {
			if registry == "" {
				return "127.0.0.1:1/sandboxer/does-not-exist:" + testkit.RandomHex(4)
			}
			return registry + "/sandboxer/does-not-exist:" + testkit.RandomHex(4)
		}},
		{"RegistryUnreachable", "postgres", func() string { return "127.0.0.1:1/sandboxer/postgres:" + testkit.RandomHex(4) }},
	}
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		for _, tt := range missing {
			t.Run(tt.name, func(t *testing.T) {
				e := testruntimes.NewWorld(t, b)
				ctx := testkit.Context(t, 3*time.Minute)
				e.Warm()
				ref := tt.ref()
				images := maps.Clone(e.Images)
				images[tt.service] = ref
				rec := &testruntimes.Recorder{ContainerRuntime: b.RT}
				p, err := provision.New(rec, provision.Options{
					LabelPrefix: e.Prefix,
					Images:      images,
					Getenv:      func(string) string { return "" },
				})
				require.NoError(t, err)

				start := time.Now()
				_, err = p.Provision(ctx, "noimg", allEngines)
				elapsed := time.Since(start)
				require.Error(t, err)
				t.Logf("failed after %s: %v", elapsed.Round(time.Millisecond), err)
				var pe *provision.Error
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, tt.service, pe.Service, "the failing service")
				assert.Equal(t, "pull", pe.Stage)
				assert.Equal(t, ref, pe.Image)
				assert.ErrorIs(t, err, runtime.ErrImageNotFound)
				assert.Contains(t, err.Error(), ref, "the message names the image")
				assert.NoError(t, pe.Rollback, "a clean rollback")
				assert.Empty(t, e.SandboxNames(ctx), "zero containers left, checked as soon as Provision returns")
				// The owner network the call made while the images were
				// checked goes too, though the failure cut its create
				// short (seen leaking on docker and podman before).
				requireNetwork(t, ctx, newOwnTool(t, b), e, provision.OwnerNetworkName(p.OwnerName("noimg")), false,
					"the owner network of the failed call is rolled back with its sandboxes (the runtime's own network inspect)")
				t.Logf("the other services ran %d container(s) before the rollback", len(rec.Ran()))
			})
		}
	})
}

// stuckRedis is redis whose probe never passes: each attempt prints which
// attempt it is (counted in the sandbox) and fails, and its deadline is
// short. Its siblings keep their own, long, deadlines.
type stuckRedis struct{ redis.Engine }

const stuckDeadline = 3 * time.Second

func (stuckRedis) Spec() engines.Spec {
	s := redis.Engine{}.Spec()
	s.ReadyTimeout = stuckDeadline
	return s
}

func (stuckRedis) Probe(ep engines.Endpoint, cred engines.Credentials) []engines.ProbeStep {
	return []engines.ProbeStep{{
		Cmd: []string{"sh", "-c", `n=$(( $(cat /tmp/sbx-attempts 2>/dev/null || echo 0) + 1 )); echo $n > /tmp/sbx-attempts; ` +
			`echo "warming up"; echo "not ready yet: attempt $n" >&2; exit 1`},
		Check: engines.ExitZero,
	}}
}

// TestProbeNeverReady: a probe that never passes, with a short deadline,
// while two siblings are still coming up. The provision fails after that
// deadline (not the siblings' minute) with the not-ready kind, the error
// carries the probe's LAST output (not the first), one line, and every
// sandbox of the call is gone when it returns.
func TestProbeNeverReady(t *testing.T) {
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := testruntimes.NewWorld(t, b)
		ctx := testkit.Context(t, 3*time.Minute)
		e.Warm()
		reg := registryWith(stuckRedis{})
		rec := &testruntimes.Recorder{ContainerRuntime: b.RT}
		p, err := provision.New(rec, provision.Options{
			Registry: reg, LabelPrefix: e.Prefix, Images: e.Images, Getenv: func(string) string { return "" },
			Readiness: provision.ReadinessExec, // the probe under test is the exec one (wire: TestWireCheckOfAServerThatNeverAcceptsThePassword)
		})
		require.NoError(t, err)

		start := time.Now()
		_, err = p.Provision(ctx, "stuck", allEngines)
		elapsed := time.Since(start)
		require.Error(t, err)
		t.Logf("failed after %s: %v", elapsed.Round(time.Millisecond), err)
		var pe *provision.Error
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "redis", pe.Service)
		assert.Equal(t, "probe", pe.Stage)
		assert.ErrorIs(t, err, provision.ErrNotReady)
		assert.GreaterOrEqual(t, elapsed, stuckDeadline, "the probe had its whole deadline")
		// The siblings' own deadlines (a minute and more) are far off:
		// a failure that waited for them would come after the shortest.
		sibling := time.Duration(math.MaxInt64)
		for _, e := range engines.Default.All() {
			if e.Spec().Name != "redis" {
				sibling = min(sibling, e.Spec().ReadyTimeout)
			}
		}
		assert.Less(t, elapsed, sibling, "the failure does not wait for the siblings' deadlines (the shortest: %s)", sibling)

		attempts := rec.Execs(pe.Container)
		require.Positive(t, attempts, "the probe ran")
		last := fmt.Sprintf("not ready yet: attempt %d", attempts)
		assert.Equal(t, "warming up\n"+last, pe.ProbeOutput, "the last attempt's output, stdout then stderr")
		assert.Contains(t, err.Error(), "last probe output: warming up | "+last)
		assert.NotContains(t, err.Error(), "\n", "one line")
		assert.NoError(t, pe.Rollback, "a clean rollback")
		assert.Empty(t, e.SandboxNames(ctx), "zero containers left, checked as soon as Provision returns")
		for _, pw := range rec.Passwords() {
			assert.NotContains(t, err.Error(), pw)
		}
	})
}
