package provision_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/engines/mongo"
	"github.com/roboco/sandboxer/engines/postgres"
	"github.com/roboco/sandboxer/engines/redis"
	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/lifetime"
	"github.com/roboco/sandboxer/provision"
	"github.com/roboco/sandboxer/runtime"
)

func TestValidation(t *testing.T) {
	tests := []struct {
		name     string
		owner    string
		services []string
		want     []string // substrings of the error
	}{
		{"EmptyOwner", "", []string{"postgres"}, []string{`owner id ""`}},
		{"OwnerTooLong", strings.Repeat("a", 56), []string{"postgres"}, []string{"owner id", "1..55", `"roboco-sandbox-redis-` + strings.Repeat("a", 56) + `"`}},
		{"OwnerEndsWithDash", "42-", []string{"postgres"}, []string{`"42-"`}},
		{"OwnerDoubleSeparator", "a..b", []string{"postgres"}, []string{`"a..b"`, "twice in a row"}},
		{"OwnerDashUnderscore", "a-_b", []string{"postgres"}, []string{`"a-_b"`}},
		{"OwnerStartsWithDash", "-42", []string{"postgres"}, []string{`"-42"`}},
		{"OwnerStartsWithDot", ".42", []string{"postgres"}, []string{`".42"`}},
		{"OwnerWithSlash", "a/b", []string{"postgres"}, []string{`"a/b"`}},
		{"OwnerWithSpace", "a b", []string{"postgres"}, []string{`"a b"`}},
		{"OwnerNonASCII", "agént", []string{"postgres"}, []string{`"agént"`}},
		{"OwnerUpperCase", "Agent1", []string{"postgres"}, []string{`"Agent1"`, "lower-case"}},
		{"OwnerUnderscore", "a_b", []string{"postgres"}, []string{`"a_b"`, "lower-case letters and digits, with single '.' or '-' between them"}},
		{"NoServices", "42", nil, []string{"no service", validServices}},
		{"UnknownService", "42", []string{"postgres", "mysql"}, []string{`"mysql"`, "unknown service", validServices}},
		{"ServiceWrongCase", "42", []string{"Postgres"}, []string{`"Postgres"`, validServices}},
		{"DuplicateService", "42", []string{"redis", "postgres", "redis"}, []string{`"redis"`, "twice", validServices}},
		{"EmptyServiceName", "42", []string{""}, []string{`service ""`, "valid services"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			p := w.provisioner(w.options())
			_, err := p.Provision(ctxT(t), tt.owner, tt.services)
			require.Error(t, err)
			assert.ErrorIs(t, err, provision.ErrInvalid)
			var ve *provision.ValidationError
			assert.ErrorAs(t, err, &ve)
			for _, s := range tt.want {
				assert.Contains(t, err.Error(), s)
			}
			assert.Zero(t, w.totalCalls(), "nothing is asked of the runtime")
			assert.Empty(t, w.fake.Containers())
		})
	}
}

// validServices is how a validation error lists the services: every
// engine linked into this test binary, in report order.
var validServices = "valid services: " + strings.Join(engines.Default.Names(), ", ")

// TestServiceWhoseEngineIsNotLinked: a registry that lacks an engine (a
// program that does not import it) refuses its service before anything
// is contacted, as engines.ErrNotLinked, naming the import to add.
func TestServiceWhoseEngineIsNotLinked(t *testing.T) {
	reg := engines.MustRegistry(postgres.Engine{})
	_, err := provision.ValidateServices(reg, []string{"postgres", "redis"})
	require.ErrorIs(t, err, provision.ErrInvalid)
	require.ErrorIs(t, err, engines.ErrNotLinked)
	assert.Contains(t, err.Error(), `invalid service "redis": unknown service; valid services: postgres`)
	assert.Contains(t, err.Error(), `add import _ "github.com/roboco/sandboxer/engines/redis"`)
}

func TestValidationAccepts(t *testing.T) {
	for _, owner := range []string{"42", "a", "a-b.c.d", strings.Repeat("z", 55), "9abc"} {
		_, err := provision.Validate(engines.Default, owner, []string{"mongo", "postgres"})
		assert.NoError(t, err, owner)
	}
	got, err := provision.Validate(engines.Default, "1", []string{"mongo", "redis", "postgres"})
	require.NoError(t, err)
	var names []string
	for _, e := range got {
		names = append(names, e.Spec().Name)
	}
	assert.Equal(t, []string{"postgres", "redis", "mongo"}, names, "registry order, whatever the asked order")
}

// TestOwnerIDLengthFollowsTheNameRule: the longest owner id is what the
// longest sandbox name leaves of the runtimes' name limit, whatever the
// prefix.
func TestOwnerIDLengthFollowsTheNameRule(t *testing.T) {
	for _, prefix := range []string{"", "roboco", "h9t0123abcd", strings.Repeat("p", 32)} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			o := provision.Options{LabelPrefix: prefix}
			max := o.MaxOwnerIDLength()
			longest := ""
			for _, e := range engines.Default.All() {
				if n := provision.ContainerName(cmp.Or(prefix, "roboco"), e.Spec().Short, strings.Repeat("i", max)); len(n) > len(longest) {
					longest = n
				}
			}
			assert.Len(t, longest, runtime.MaxNameLength, "the longest sandbox name is exactly at the limit")
			assert.NoError(t, o.ValidateOwnerID(strings.Repeat("i", max)))
			err := o.ValidateOwnerID(strings.Repeat("i", max+1))
			assert.ErrorIs(t, err, provision.ErrInvalid)
			assert.ErrorIs(t, err, runtime.ErrInvalid, "the rule is the port's")
		})
	}
	assert.Equal(t, 55, provision.Options{}.MaxOwnerIDLength(), "the default prefix: 76 - len(\"roboco-sandbox-redis-\")")
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		opts provision.Options
		want string
	}{
		{"UnknownImageOverride", provision.Options{Images: map[string]string{"mysql": "mysql:8"}}, `"mysql"`},
		{"UnknownServerArguments", provision.Options{Args: map[string][]string{"mysql": {"--x"}}}, `server arguments "mysql": unknown service`},
		{"BadLabelPrefix", provision.Options{LabelPrefix: "Bad Prefix"}, "label prefix"},
		{"BadEnvPrefix", provision.Options{EnvPrefix: "lower"}, "env prefix"},
		{"TemplateWithoutID", provision.Options{OwnerTemplate: "agent"}, "{id}"},
		{"ReservedLabel", provision.Options{Labels: map[string]string{keys.Owner: "x"}}, "set by the provisioner"},
		{"NegativeMemory", provision.Options{MemoryBytes: -1}, "memory"},
		{"NegativePreClearGrace", provision.Options{PreClearGrace: -time.Second}, `pre-clear grace "-1s": must not be negative`},
		{"PreClearGraceWithNoPreClearGrace", provision.Options{PreClearGrace: time.Minute, NoPreClearGrace: true}, "say one or the other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			assert.ErrorIs(t, err, provision.ErrInvalid)
			assert.ErrorContains(t, err, tt.want)
			_, newErr := provision.New(fakeruntime.New(), tt.opts)
			assert.Equal(t, err, newErr, "New checks what Validate checks")
		})
	}
	for _, ok := range []provision.Options{{}, {NoPreClearGrace: true}, {PreClearGrace: time.Minute}} {
		assert.NoError(t, ok.Validate(), "%+v", ok)
	}
}

func TestOwnerName(t *testing.T) {
	assert.Equal(t, "roboco-agent-42", provision.Options{}.OwnerName("42"))
	assert.Equal(t, "sbx-agent-42", provision.Options{LabelPrefix: "sbx"}.OwnerName("42"))
	assert.Equal(t, "ci-42-sbx", provision.Options{LabelPrefix: "sbx", OwnerTemplate: "ci-{id}-{prefix}"}.OwnerName("42"))
}

// TestLabelPrefixRuleIsTheSchemas: the label prefix is checked by the
// labels package's rule, and the error is both kinds.
func TestLabelPrefixRuleIsTheSchemas(t *testing.T) {
	_, err := provision.New(fakeruntime.New(), provision.Options{LabelPrefix: "Bad Prefix"})
	assert.ErrorIs(t, err, provision.ErrInvalid)
	assert.ErrorIs(t, err, labels.ErrInvalidPrefix)
	assert.ErrorContains(t, err, labels.PrefixRule)
}

func TestHostModeEnv(t *testing.T) {
	w := newWorld(t)
	p := w.provisioner(w.options())
	sb, err := p.Provision(ctxT(t), "42", []string{"mongo", "redis", "postgres"})
	require.NoError(t, err)

	assert.Equal(t, "42", sb.OwnerID)
	assert.Equal(t, "roboco-agent-42", sb.Owner)
	require.Len(t, sb.Containers, 3)
	wantNames := []string{
		"ROBOCO_TEST_DB_HOST", "ROBOCO_TEST_DB_PORT", "ROBOCO_TEST_DB_USER", "ROBOCO_TEST_DB_PASSWORD",
		"ROBOCO_TEST_DB_NAME", "ROBOCO_TEST_DB_ADMIN_DB", "ROBOCO_TEST_DB_URL",
		"ROBOCO_TEST_REDIS_HOST", "ROBOCO_TEST_REDIS_PORT", "ROBOCO_TEST_REDIS_PASSWORD", "ROBOCO_TEST_REDIS_URL",
		"ROBOCO_TEST_MONGO_HOST", "ROBOCO_TEST_MONGO_PORT", "ROBOCO_TEST_MONGO_USER", "ROBOCO_TEST_MONGO_PASSWORD",
		"ROBOCO_TEST_MONGO_DB", "ROBOCO_TEST_MONGO_AUTH_DB", "ROBOCO_TEST_MONGO_URL",
	}
	var gotNames []string
	for _, v := range sb.Env {
		gotNames = append(gotNames, v.Name)
	}
	assert.Equal(t, wantNames, gotNames, "stable order: registry order, then each engine's order")

	env := sb.Map()
	for i, c := range sb.Containers {
		assert.Equal(t, []string{"postgres", "redis", "mongo"}[i], c.Engine)
		assert.Equal(t, "127.0.0.1", c.Endpoint.Host, "host mode hands out the published address")
		ctr, err := w.fake.Inspect(ctxT(t), c.ID)
		require.NoError(t, err)
		require.Len(t, ctr.Ports, 1)
		assert.Equal(t, ctr.Ports[0].HostPort, c.Endpoint.Port)
		assert.Equal(t, "127.0.0.1", ctr.Ports[0].HostIP, "published on loopback only")
	}
	pg, redis, mongo := sb.Containers[0], sb.Containers[1], sb.Containers[2]
	assert.Equal(t, "127.0.0.1", env["ROBOCO_TEST_DB_HOST"])
	assert.Equal(t, strconv.Itoa(pg.Endpoint.Port), env["ROBOCO_TEST_DB_PORT"])
	assert.Equal(t, "sandbox", env["ROBOCO_TEST_DB_USER"])
	assert.Equal(t, "sandbox", env["ROBOCO_TEST_DB_NAME"])
	assert.Equal(t, "postgres", env["ROBOCO_TEST_DB_ADMIN_DB"])
	assert.Equal(t, fmt.Sprintf("postgres://sandbox:%s@127.0.0.1:%d/sandbox?sslmode=disable", env["ROBOCO_TEST_DB_PASSWORD"], pg.Endpoint.Port), env["ROBOCO_TEST_DB_URL"])
	assert.Equal(t, fmt.Sprintf("redis://default:%s@127.0.0.1:%d/0", env["ROBOCO_TEST_REDIS_PASSWORD"], redis.Endpoint.Port), env["ROBOCO_TEST_REDIS_URL"])
	assert.Equal(t, "admin", env["ROBOCO_TEST_MONGO_AUTH_DB"])
	assert.Equal(t, fmt.Sprintf("mongodb://sandbox:%s@127.0.0.1:%d/sandbox?authSource=admin", env["ROBOCO_TEST_MONGO_PASSWORD"], mongo.Endpoint.Port), env["ROBOCO_TEST_MONGO_URL"])

	pws := passwords(sb)
	require.Len(t, pws, 3, "one password per service")
	for _, pw := range pws {
		assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{32}$`), pw)
	}
	assert.NotEqual(t, pws[0], pws[1])
	assert.NotEqual(t, pws[1], pws[2])
	assert.NotEqual(t, pws[0], pws[2])

	for _, c := range sb.Containers {
		conn, err := net.Dial("tcp", net.JoinHostPort(c.Endpoint.Host, strconv.Itoa(c.Endpoint.Port)))
		require.NoError(t, err, "the handed-out endpoint accepts connections")
		conn.Close()
	}
}

func TestSiblingMode(t *testing.T) {
	w := newWorld(t)
	_, err := w.fake.CreateNetwork(ctxT(t), runtime.NetworkSpec{Name: "agents"})
	require.NoError(t, err)
	var argv record[string]
	w.fake.OnCall(func(_ context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbExec {
			argv.add(strings.Join(c.Exec.Cmd, " "))
		}
		return nil
	})
	opts := w.options()
	opts.Network = "agents"
	p := w.provisioner(opts)
	sb, err := p.Provision(ctxT(t), "7", []string{"postgres", "redis"})
	require.NoError(t, err)
	probeArgv := argv.get()

	for _, c := range sb.Containers {
		ctr, err := w.fake.Inspect(ctxT(t), c.ID)
		require.NoError(t, err)
		assert.Empty(t, ctr.Ports, "nothing is published in sibling mode")
		addr := ctr.Networks["agents"]
		require.NotEmpty(t, addr)
		assert.Equal(t, addr, c.Endpoint.Host, "the address on the sibling network")
		assert.Contains(t, strings.Join(probeArgv, "\n"), "-h "+addr, "the probe targets the very address handed out")
	}
	assert.Equal(t, 5432, sb.Containers[0].Endpoint.Port, "the container port")
	assert.Equal(t, sb.Containers[0].Endpoint.Host, sb.Map()["ROBOCO_TEST_DB_HOST"])
	assert.Equal(t, "6379", sb.Map()["ROBOCO_TEST_REDIS_PORT"])
	assert.NotContains(t, strings.Join(probeArgv, "\n"), "127.0.0.1")
	for _, pw := range passwords(sb) {
		assert.NotContains(t, strings.Join(probeArgv, "\n"), pw, "no password in a probe's argv")
	}
}

func TestHostModeProbesTheContainerAddress(t *testing.T) {
	w := newWorld(t)
	var probed record[string]
	w.fake.OnCall(func(_ context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbExec && c.Exec.Cmd[0] == "redis-cli" {
			probed.add(c.Exec.Cmd[2])
		}
		return nil
	})
	p := w.provisioner(w.options())
	sb, err := p.Provision(ctxT(t), "h1", []string{"redis"})
	require.NoError(t, err)
	ctr, err := w.fake.Inspect(ctxT(t), sb.Containers[0].ID)
	require.NoError(t, err)
	targets := probed.get()
	require.NotEmpty(t, targets)
	assert.NotContains(t, ctr.Networks, fakeruntime.DefaultNetwork, "host mode joins the owner's network, not the default one")
	assert.Equal(t, ctr.Networks[provision.OwnerNetworkName(sb.Owner)], targets[0], "the address on the owner's network, not loopback")
	assert.NotEmpty(t, targets[0])
}

func TestNamingLabelsAndLimits(t *testing.T) {
	tests := []struct {
		name      string
		opts      func(*provision.Options)
		owner     string
		wantNames []string
		wantOwner string
		prefix    string
	}{
		{"Defaults", func(*provision.Options) {}, "42",
			[]string{"roboco-sandbox-mongo-42", "roboco-sandbox-pg-42", "roboco-sandbox-redis-42"}, "roboco-agent-42", "roboco"},
		{"LabelPrefix", func(o *provision.Options) { o.LabelPrefix = "acme" }, "a1",
			[]string{"acme-sandbox-mongo-a1", "acme-sandbox-pg-a1", "acme-sandbox-redis-a1"}, "acme-agent-a1", "acme"},
		{"OwnerTemplate", func(o *provision.Options) { o.OwnerTemplate = "worker_{id}" }, "9",
			[]string{"roboco-sandbox-mongo-9", "roboco-sandbox-pg-9", "roboco-sandbox-redis-9"}, "worker_9", "roboco"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			var runs record[runtime.RunSpec]
			w.fake.OnCall(func(_ context.Context, c fakeruntime.Call) error {
				if c.Verb == fakeruntime.VerbRun {
					runs.add(c.Run)
				}
				return nil
			})
			opts := w.options()
			opts.Labels = map[string]string{"team": "core"}
			tt.opts(&opts)
			p := w.provisioner(opts)
			_, err := p.Provision(ctxT(t), tt.owner, []string{"postgres", "redis", "mongo"})
			require.NoError(t, err)

			var names []string
			for _, c := range w.fake.Containers() {
				names = append(names, c.Name)
			}
			assert.Equal(t, tt.wantNames, names)
			specs := runs.get()
			require.Len(t, specs, 3)
			for _, s := range specs {
				engine := s.Labels[labels.For(tt.prefix).Engine]
				e, ok := engines.Default.Lookup(engine)
				require.True(t, ok, "engine label %q", engine)
				assert.Equal(t, "1", s.Labels[labels.For(tt.prefix).Sandbox])
				assert.Equal(t, tt.wantOwner, s.Labels[labels.For(tt.prefix).Owner])
				assert.Regexp(t, `^[0-9a-f]{16}$`, s.Labels[labels.For(tt.prefix).Call])
				assert.Equal(t, "core", s.Labels["team"], "extra labels are added")
				assert.Len(t, s.Labels, 5)
				assert.Equal(t, cmp.Or(e.Spec().MemoryBytes, int64(512<<20)), s.MemoryBytes, "the engine's own default limit, else 512 MiB")
				assert.Equal(t, 1.0, s.CPUs)
				assert.Equal(t, e.Spec().Image, s.Image)
				var tmpfs []string
				for path := range s.Tmpfs {
					tmpfs = append(tmpfs, path)
				}
				assert.ElementsMatch(t, e.Spec().Tmpfs, tmpfs)
			}
			assert.Empty(t, w.fake.Volumes(), "every image VOLUME is a tmpfs: no anonymous volume")
		})
	}
}

// TestServerArgsAreAppended: Options.Args goes after the engine's own
// command, for its engine only.
func TestServerArgsAreAppended(t *testing.T) {
	w := newWorld(t)
	var runs record[runtime.RunSpec]
	w.fake.OnCall(func(_ context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbRun {
			runs.add(c.Run)
		}
		return nil
	})
	opts := w.options()
	opts.Args = map[string][]string{"redis": {"--databases", "1024"}}
	_, err := w.provisioner(opts).Provision(ctxT(t), "1", []string{"postgres", "redis"})
	require.NoError(t, err)
	cred := engines.Credentials{}
	for _, s := range runs.get() {
		e, ok := engines.Default.Lookup(s.Labels[keys.Engine])
		require.True(t, ok)
		own := e.Container(cred, engines.Limits{MemoryBytes: s.MemoryBytes}, engines.Image{}).Command
		require.GreaterOrEqual(t, len(s.Command), len(own))
		if e.Spec().Name == "redis" {
			assert.Equal(t, []string{"--databases", "1024"}, s.Command[len(own):])
		} else {
			assert.Len(t, s.Command, len(own), "no arguments for %s", e.Spec().Name)
		}
	}
}

// TestImageOverrides: images come from the explicit overrides, then the
// environment, then the engine's default; non-default limits are what each
// run asks for (faults.TestCLILimitsReachTheCgroup shows them reaching the
// container's cgroup on every real runtime).
func TestImageOverrides(t *testing.T) {
	w := newWorld(t)
	var runs record[runtime.RunSpec]
	w.fake.OnCall(func(_ context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbRun {
			runs.add(c.Run)
		}
		return nil
	})
	w.fake.AddImage("mirror/pg:16")
	w.fake.AddImage("mirror/redis:8")
	env := map[string]string{"SANDBOXER_IMAGE_REDIS": "mirror/redis:8", "SANDBOXER_IMAGE_POSTGRES": "ignored/pg:1"}
	opts := w.options()
	opts.Getenv = func(k string) string { return env[k] }
	opts.Images = map[string]string{"postgres": "mirror/pg:16"}
	opts.MemoryBytes = 256 << 20
	opts.CPUs = 0.5
	p := w.provisioner(opts)
	want := map[string]string{}
	for _, e := range engines.Default.All() {
		want[e.Spec().Name] = e.Spec().Image
	}
	want["postgres"], want["redis"] = "mirror/pg:16", "mirror/redis:8"
	assert.Equal(t, want, p.Images(), "explicit override, then SANDBOXER_IMAGE_<ENGINE>, then the default")
	sb, err := p.Provision(ctxT(t), "1", []string{"postgres", "redis"})
	require.NoError(t, err)
	assert.Equal(t, "mirror/pg:16", sb.Containers[0].Image)
	assert.Equal(t, "mirror/redis:8", sb.Containers[1].Image)
	specs := runs.get()
	require.Len(t, specs, 2)
	for _, s := range specs {
		assert.Equal(t, int64(256<<20), s.MemoryBytes, "%s: memory", s.Name)
		assert.Equal(t, 0.5, s.CPUs, "%s: CPUs", s.Name)
	}
}

func TestPullsOnlyWhenAbsent(t *testing.T) {
	w := newWorld(t)
	w.fake.AddRemoteImage("registry.local/redis:8", "/data")
	opts := w.options()
	opts.Images = map[string]string{"redis": "registry.local/redis:8"}
	p := w.provisioner(opts)
	_, err := p.Provision(ctxT(t), "1", []string{"postgres", "redis"})
	require.NoError(t, err)
	assert.Equal(t, 1, w.fake.Calls(fakeruntime.VerbPull), "only the absent image is pulled")
	assert.Len(t, w.events(provision.EventPulled), 1)
	assert.NotEmpty(t, w.events(provision.EventPullProgress), "pull progress reaches the callback")

	_, err = p.Teardown(ctxT(t), "1")
	require.NoError(t, err)
	_, err = p.Provision(ctxT(t), "1", []string{"postgres", "redis"})
	require.NoError(t, err)
	assert.Equal(t, 1, w.fake.Calls(fakeruntime.VerbPull), "a present image is not pulled again")
}

func TestPullTimeout(t *testing.T) {
	w := newWorld(t)
	w.fake.AddRemoteImage("slow/redis:8")
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbPull {
			<-ctx.Done() // a registry that never answers
			return ctx.Err()
		}
		return nil
	})
	opts := w.options()
	opts.Images = map[string]string{"redis": "slow/redis:8"}
	opts.PullTimeout = 50 * time.Millisecond
	p := w.provisioner(opts)
	_, err := p.Provision(ctxT(t), "1", []string{"postgres", "redis"})
	var pe *provision.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "redis", pe.Service)
	assert.Equal(t, "pull", pe.Stage)
	assert.ErrorContains(t, err, "timed out after 50ms")
	assert.Empty(t, w.owned("roboco-agent-1"))
}

func TestServicesStartConcurrently(t *testing.T) {
	w := newWorld(t)
	const n = 3
	arrived := make(chan struct{}, n)
	release := make(chan struct{})
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb != fakeruntime.VerbRun {
			return nil
		}
		arrived <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	p := w.provisioner(w.options())
	done := make(chan error, 1)
	go func() {
		_, err := p.Provision(ctxT(t), "par", []string{"postgres", "redis", "mongo"})
		done <- err
	}()
	for i := range n {
		select {
		case <-arrived:
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of %d runs started before the first one returned: services are serialised", i, n)
		}
	}
	close(release)
	require.NoError(t, <-done)
	assert.Equal(t, n, w.fake.MaxInFlight(fakeruntime.VerbRun))
}

func TestRollback(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(w *world, o *provision.Options)
		service   string
		stage     string
		kind      error
		inMessage []string
	}{
		{
			name:  "SecondRunFails",
			setup: func(w *world, _ *provision.Options) { w.fake.FailNth(fakeruntime.VerbRun, 2, runtime.ErrUnavailable) },
			stage: "run",
			kind:  runtime.ErrUnavailable,
		},
		{
			name: "MissingImage",
			setup: func(_ *world, o *provision.Options) {
				o.Images = map[string]string{"mongo": "nowhere/mongo:0"}
			},
			service:   "mongo",
			stage:     "pull",
			kind:      runtime.ErrImageNotFound,
			inMessage: []string{"mongo", "roboco-sandbox-mongo-rb"},
		},
		{
			name: "ProbeNeverReady",
			setup: func(w *world, o *provision.Options) {
				w.fake.Script("redis-cli", fakeruntime.Result{Stdout: "LOADING Redis is loading the dataset in memory\n"})
				o.ReadyTimeout = 300 * time.Millisecond
			},
			service:   "redis",
			stage:     "probe",
			kind:      provision.ErrNotReady,
			inMessage: []string{"redis", "roboco-sandbox-redis-rb", "last probe output: LOADING Redis is loading", "after 300ms"},
		},
		{
			name: "SandboxExitsWhileProbed",
			setup: func(w *world, _ *provision.Options) {
				w.fake.SetExec(func(_ context.Context, c runtime.Container, spec runtime.ExecSpec) (runtime.ExecResult, error) {
					if spec.Cmd[0] == "pg_isready" {
						w.fake.SetState(c.ID, runtime.StateExited, 1)
						return runtime.ExecResult{}, errors.New("container is not running")
					}
					return runtime.ExecResult{Stdout: []byte("PONG\n1\n")}, nil
				})
			},
			service:   "postgres",
			stage:     "probe",
			kind:      provision.ErrNotReady,
			inMessage: []string{"exited (exit code 1)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			opts := w.options()
			tt.setup(w, &opts)
			p := w.provisioner(opts)
			start := time.Now()
			_, err := p.Provision(ctxT(t), "rb", []string{"postgres", "redis", "mongo"})
			require.Error(t, err)
			assert.Less(t, time.Since(start), 10*time.Second, "fails fast, not at the engines' deadlines")

			var pe *provision.Error
			require.ErrorAs(t, err, &pe)
			if tt.service != "" {
				assert.Equal(t, tt.service, pe.Service)
			}
			assert.Equal(t, tt.stage, pe.Stage)
			assert.Equal(t, "roboco-agent-rb", pe.Owner)
			assert.NoError(t, pe.Rollback)
			assert.ErrorIs(t, err, tt.kind)
			for _, s := range tt.inMessage {
				assert.Contains(t, err.Error(), s)
			}
			assert.Empty(t, w.owned("roboco-agent-rb"), "zero containers carry the owner's label")
			assert.Empty(t, w.fake.Containers())
			assert.NotEmpty(t, w.events(provision.EventFailed))
		})
	}
}

func TestFailureNeverShowsAPassword(t *testing.T) {
	w := newWorld(t)
	// A probe whose output echoes its environment, as a careless image
	// might: the password must be redacted from the error.
	w.fake.SetExec(func(_ context.Context, _ runtime.Container, spec runtime.ExecSpec) (runtime.ExecResult, error) {
		if len(spec.Env) == 0 {
			return runtime.ExecResult{}, nil // pg_isready passes; the login echoes
		}
		var b strings.Builder
		for k, v := range spec.Env {
			fmt.Fprintf(&b, "%s=%s\n", k, v)
		}
		return runtime.ExecResult{ExitCode: 1, Stderr: []byte("auth failed with " + b.String())}, nil
	})
	var secrets record[string]
	w.fake.OnCall(func(_ context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbRun {
			for _, v := range c.Run.Env {
				secrets.add(v)
			}
			secrets.add(c.Run.Command...)
		}
		return nil
	})
	opts := w.options()
	opts.ReadyTimeout = 200 * time.Millisecond
	p := w.provisioner(opts)
	_, err := p.Provision(ctxT(t), "pw", []string{"postgres", "redis", "mongo"})
	require.Error(t, err)
	var pe *provision.Error
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, pe.ProbeOutput, "[REDACTED]")
	for _, pw := range secrets.get() {
		if regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(pw) {
			assert.NotContains(t, err.Error(), pw)
			assert.NotContains(t, w.logs.String(), pw)
		}
	}
}

func TestCancelledProvisionLeavesNothing(t *testing.T) {
	w := newWorld(t)
	w.fake.Script("mongosh", fakeruntime.Result{ExitCode: 1, Stderr: "ECONNREFUSED"})
	ctx, cancel := context.WithCancel(ctxT(t))
	w.fake.OnCall(func(_ context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbExec && c.Exec.Cmd[0] == "mongosh" {
			cancel() // the caller gives up while mongo is still starting
		}
		return nil
	})
	p := w.provisioner(w.options())
	_, err := p.Provision(ctx, "cx", []string{"postgres", "redis", "mongo"})
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, w.fake.Containers(), "the rollback runs even though the caller's context ended")
}

func TestRunIsNeverCutShort(t *testing.T) {
	// A daemon finishes a create whose client went away; if the caller's
	// cancellation reached Run, the container would appear after the
	// rollback looked. So Run completes, and the rollback removes it.
	w := newWorld(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	var runSawCancel record[bool]
	w.fake.OnCall(func(runCtx context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbRun {
			cancel()
			runSawCancel.add(runCtx.Err() != nil)
		}
		return nil
	})
	p := w.provisioner(w.options())
	_, err := p.Provision(ctx, "rc", []string{"postgres", "redis"})
	require.ErrorIs(t, err, context.Canceled)
	assert.NotContains(t, runSawCancel.get(), true, "Run's context is detached from the call's")
	assert.Equal(t, w.fake.Calls(fakeruntime.VerbRun), w.fake.Calls(fakeruntime.VerbRemove), "every container Run made is rolled back")
	assert.Empty(t, w.fake.Containers())
}

func TestRollbackCatchesARunCancelledMidFlight(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	// The runtime creates the container, but the caller's context ends
	// before Run returns: the provisioner never learns the ID.
	w.fake.OnCall(func(_ context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbRun && c.Run.Labels[keys.Engine] == "redis" {
			spec := c.Run
			spec.Name = c.Run.Name
			w.fake.Seed(runtime.Container{Name: spec.Name, Image: spec.Image, Labels: spec.Labels})
			cancel()
			return context.Canceled
		}
		return nil
	})
	p := w.provisioner(w.options())
	_, err := p.Provision(ctx, "mid", []string{"postgres", "redis"})
	require.Error(t, err)
	assert.Empty(t, w.fake.Containers(), "found by the call label and removed")
}

func TestPreClear(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	labels := func(owner string) map[string]string {
		return map[string]string{keys.Sandbox: "1", keys.Owner: owner, keys.Engine: "postgres"}
	}
	withProcess := func(p lifetime.Process) map[string]string {
		l := labels("roboco-agent-5")
		maps.Copy(l, p.Labels(keys.Prefix))
		return l
	}
	self, err := lifetime.CurrentProcess()
	require.NoError(t, err)
	tests := []struct {
		name     string
		existing runtime.Container
		// owner, when set, is the state of an owner container
		// roboco-agent-5 that exists.
		owner   runtime.State
		noGrace bool // Options.NoPreClearGrace
		wantErr error
		// wantMsg is in the error: what it names.
		wantMsg string
	}{
		{
			name:     "StaleSandboxOfOwnerIsReplaced",
			existing: runtime.Container{Name: "roboco-sandbox-pg-5", Labels: labels("roboco-agent-5"), Created: now.Add(-10 * time.Minute)},
		},
		{
			name:     "StaleExitedSandboxIsReplaced",
			existing: runtime.Container{Name: "roboco-sandbox-pg-5", Labels: labels("roboco-agent-5"), Created: now.Add(-time.Hour), State: runtime.StateExited},
		},
		{
			name:     "SandboxInGraceIsLeftAlone",
			existing: runtime.Container{Name: "roboco-sandbox-pg-5", Labels: labels("roboco-agent-5"), Created: now.Add(-30 * time.Second)},
			wantErr:  provision.ErrConflict,
			wantMsg:  "grace window",
		},
		{
			name:     "LiveOwnerContainerKeepsItsSandbox",
			existing: runtime.Container{Name: "roboco-sandbox-pg-5", Labels: labels("roboco-agent-5"), Created: now.Add(-time.Hour)},
			owner:    runtime.StateRunning,
			wantErr:  provision.ErrConflict,
			wantMsg:  "its owner roboco-agent-5 is alive",
		},
		{
			name:     "StoppedOwnerContainerStillOwnsItsSandbox",
			existing: runtime.Container{Name: "roboco-sandbox-pg-5", Labels: labels("roboco-agent-5"), Created: now.Add(-time.Hour)},
			owner:    runtime.StateExited,
			wantErr:  provision.ErrConflict,
			wantMsg:  "its owner roboco-agent-5 is alive",
		},
		{
			name:     "CreatedOwnerContainerStillOwnsItsSandbox",
			existing: runtime.Container{Name: "roboco-sandbox-pg-5", Labels: labels("roboco-agent-5"), Created: now.Add(-time.Hour)},
			owner:    runtime.StateCreated,
			wantErr:  provision.ErrConflict,
			wantMsg:  "its owner roboco-agent-5 is alive",
		},
		{
			name:     "LiveOwnerProcessKeepsItsSandbox",
			existing: runtime.Container{Name: "roboco-sandbox-pg-5", Labels: withProcess(self), Created: now.Add(-time.Hour)},
			wantErr:  provision.ErrConflict,
			wantMsg:  fmt.Sprintf("pid %d", self.PID),
		},
		{
			// The process decides: a container of the owner's name does
			// not keep a dead process's sandbox.
			name:     "GoneOwnerProcessIsCleared",
			existing: runtime.Container{Name: "roboco-sandbox-pg-5", Labels: withProcess(lifetime.Process{BootID: "a-boot-before-this-one", PID: self.PID, Start: self.Start}), Created: now.Add(-time.Hour)},
			owner:    runtime.StateRunning,
		},
		{
			name: "MalformedOwnerIsLeftAlone",
			existing: runtime.Container{Name: "roboco-sandbox-pg-5", Created: now.Add(-time.Hour), Labels: func() map[string]string {
				l := withProcess(self)
				l[keys.OwnerPID] = "not-a-pid"
				return l
			}()},
			wantErr: lifetime.ErrMalformedOwner,
			wantMsg: "cannot be judged",
		},
		{
			name:     "NoPreClearGraceReplacesASandboxInGrace",
			existing: runtime.Container{Name: "roboco-sandbox-pg-5", Labels: labels("roboco-agent-5"), Created: now.Add(-30 * time.Second)},
			noGrace:  true,
		},
		{
			name:     "NoPreClearGraceReplacesOneCreatedAheadOfTheClock",
			existing: runtime.Container{Name: "roboco-sandbox-pg-5", Labels: labels("roboco-agent-5"), Created: now.Add(time.Second)},
			noGrace:  true,
		},
		{
			name:     "ForeignContainerWithTheNameIsLeftAlone",
			existing: runtime.Container{Name: "roboco-sandbox-pg-5", Labels: map[string]string{"app": "other"}, Created: now.Add(-time.Hour)},
			wantErr:  runtime.ErrAlreadyExists,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.fake.SetClock(func() time.Time { return now })
			old := w.fake.Seed(tt.existing)
			want := 1
			if tt.owner != "" {
				w.fake.Seed(runtime.Container{Name: "roboco-agent-5", State: tt.owner, Created: now.Add(-time.Hour)})
				want++
			}
			opts := w.options()
			opts.Now = func() time.Time { return now }
			opts.NoPreClearGrace = tt.noGrace
			p := w.provisioner(opts)
			sb, err := p.Provision(ctxT(t), "5", []string{"postgres", "redis"})
			got, inspectErr := w.fake.Inspect(ctxT(t), old.ID)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				var pe *provision.Error
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, "postgres", pe.Service)
				assert.ErrorContains(t, err, tt.wantMsg)
				assert.NoError(t, inspectErr, "the existing container is not touched")
				assert.Len(t, w.fake.Containers(), want, "only the existing containers remain")
				assert.Equal(t, old.State, got.State, "the existing sandbox still runs")
				assert.Empty(t, w.events(provision.EventPreCleared))
				return
			}
			require.NoError(t, err)
			assert.ErrorIs(t, inspectErr, runtime.ErrNotFound, "the stale sandbox is gone")
			assert.NotEqual(t, old.ID, sb.Containers[0].ID)
			assert.Len(t, w.events(provision.EventPreCleared), 1)
		})
	}
}

// TestPreClearOwnerSnapshotFails: when the runtime cannot say whether the
// owner exists, the leftover is not removed on a guess: the provision
// fails and touches nothing.
func TestPreClearOwnerSnapshotFails(t *testing.T) {
	w := newWorld(t)
	old := w.fake.Seed(runtime.Container{Name: "roboco-sandbox-pg-6", Created: time.Now().Add(-time.Hour),
		Labels: map[string]string{keys.Sandbox: "1", keys.Owner: "roboco-agent-6", keys.Engine: "postgres"}})
	w.fake.Fail(fakeruntime.VerbSnapshot, "", runtime.ErrUnavailable)
	_, err := w.provisioner(w.options()).Provision(ctxT(t), "6", []string{"postgres"})
	require.ErrorIs(t, err, runtime.ErrUnavailable)
	assert.ErrorContains(t, err, "look for the owner")
	_, err = w.fake.Inspect(ctxT(t), old.ID)
	assert.NoError(t, err, "the leftover is still there")
	assert.Len(t, w.fake.Containers(), 1)
	assert.Zero(t, w.fake.Calls(fakeruntime.VerbRun))
}

func TestTeardown(t *testing.T) {
	w := newWorld(t)
	w.fake.AddImage("redis:8-alpine", "/data", "/extra")
	// A VOLUME no tmpfs covers: on a runtime without an image store the
	// image's config is not read, so /extra becomes an anonymous volume.
	w.noImageStore()
	var calls record[string]
	w.fake.OnCall(func(_ context.Context, c fakeruntime.Call) error {
		if c.Verb == fakeruntime.VerbKill || c.Verb == fakeruntime.VerbRemove {
			calls.add(c.Object + " " + c.Verb)
		}
		return nil
	})
	p := w.provisioner(w.options())
	other, err := p.Provision(ctxT(t), "other", []string{"redis"})
	require.NoError(t, err)
	sb, err := p.Provision(ctxT(t), "td", []string{"postgres", "redis", "mongo"})
	require.NoError(t, err)
	require.Len(t, w.fake.Volumes(), 2)
	calls.reset()

	removed, err := p.Teardown(ctxT(t), "td")
	require.NoError(t, err)
	var names []string
	for _, c := range removed {
		names = append(names, c.Name)
	}
	assert.ElementsMatch(t, []string{"roboco-sandbox-pg-td", "roboco-sandbox-redis-td", "roboco-sandbox-mongo-td"}, names)
	assert.Empty(t, w.owned(sb.Owner))
	assert.Len(t, w.fake.Volumes(), 1, "the anonymous volume goes with its container")
	order := calls.get()
	assert.Len(t, order, 3, "one forced remove per sandbox, no separate kill")
	for _, c := range sb.Containers {
		assert.Contains(t, order, c.ID+" remove", "%s is removed by its ID", c.Name)
	}

	again, err := p.Teardown(ctxT(t), "td")
	assert.NoError(t, err, "a second teardown succeeds")
	assert.Empty(t, again)
	nothing, err := p.Teardown(ctxT(t), "never-provisioned")
	assert.NoError(t, err, "a teardown of an owner with nothing succeeds")
	assert.Empty(t, nothing)

	assert.Len(t, w.owned(other.Owner), 1, "other owners' sandboxes are untouched")
	_, err = p.Teardown(ctxT(t), "bad/id")
	assert.ErrorIs(t, err, provision.ErrInvalid)
}

func TestTeardownRemovesInParallel(t *testing.T) {
	w := newWorld(t)
	p := w.provisioner(w.options())
	_, err := p.Provision(ctxT(t), "tp", []string{"postgres", "redis", "mongo"})
	require.NoError(t, err)
	const n = 3
	arrived := make(chan struct{}, n)
	release := make(chan struct{})
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb != fakeruntime.VerbRemove {
			return nil
		}
		arrived <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := p.Teardown(ctxT(t), "tp")
		done <- err
	}()
	for i := range n {
		select {
		case <-arrived:
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of %d removes started: teardown is serialised", i, n)
		}
	}
	close(release)
	require.NoError(t, <-done)
	assert.Equal(t, n, w.fake.MaxInFlight(fakeruntime.VerbRemove))
	assert.Empty(t, w.fake.Containers())
}

// TestTeardownRoundTrips: a teardown asks the runtime for no more than
// the owner's list and, per sandbox, one look-up and one forced remove by
// the listed ID (container IDs are never reused: nothing to check). Every
// sandbox of the owner is torn down at once.
func TestTeardownRoundTrips(t *testing.T) {
	verbs := []string{fakeruntime.VerbList, fakeruntime.VerbInspect, fakeruntime.VerbKill, fakeruntime.VerbRemove, fakeruntime.VerbStop, fakeruntime.VerbSnapshot}
	w := newWorld(t)
	w.fake.AddImage("redis:8-alpine", "/data", "/extra")
	// A VOLUME no tmpfs covers: on a runtime without an image store the
	// image's config is not read, so /extra becomes an anonymous volume.
	w.noImageStore()
	p := w.provisioner(w.options())
	sb, err := p.Provision(ctxT(t), "rt", []string{"postgres", "redis", "mongo"})
	require.NoError(t, err)
	require.Len(t, w.fake.Volumes(), 1)
	before := map[string]int{}
	for _, v := range verbs {
		before[v] = w.fake.Calls(v)
	}
	// Every sandbox's first call waits until all three have arrived: a
	// serialised teardown never gets there.
	const n = 3
	var arrived atomic.Int32
	all := make(chan struct{})
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb != fakeruntime.VerbInspect || c.N-before[fakeruntime.VerbInspect] > n {
			return nil
		}
		if arrived.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})

	removed, err := p.Teardown(ctxT(t), "rt")
	require.NoError(t, err, "the three sandboxes are torn down at once")
	got := map[string]int{}
	for _, v := range verbs {
		if d := w.fake.Calls(v) - before[v]; d > 0 {
			got[v] = d
		}
	}
	assert.Equal(t, map[string]int{fakeruntime.VerbList: 1, fakeruntime.VerbInspect: n, fakeruntime.VerbRemove: n}, got, "calls per verb")
	assert.Len(t, removed, n)
	assert.Empty(t, w.owned(sb.Owner))
	assert.Empty(t, w.fake.Volumes(), "the anonymous volume goes with its container")
	assert.Len(t, w.events(provision.EventRemoved), n)
	assert.Equal(t, n, w.fake.MaxInFlight(fakeruntime.VerbInspect), "in parallel")
}

// TestTeardownOfASandboxRemovedMeanwhile: a sandbox that another caller
// removed between the teardown's list and its remove is not reported as
// removed by this teardown.
func TestTeardownOfASandboxRemovedMeanwhile(t *testing.T) {
	w := newWorld(t)
	p := w.provisioner(w.options())
	_, err := p.Provision(ctxT(t), "rm", []string{"postgres", "redis"})
	require.NoError(t, err)
	gone := w.named("roboco-sandbox-redis-rm")
	// The other caller removes it right when this teardown first
	// asks about it, after the list.
	var done atomic.Bool
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb != fakeruntime.VerbList && c.Object == gone.ID && done.CompareAndSwap(false, true) {
			require.NoError(t, w.fake.Remove(ctx, gone.ID))
		}
		return nil
	})

	removed, err := p.Teardown(ctxT(t), "rm")
	require.NoError(t, err)
	var names []string
	for _, c := range removed {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"roboco-sandbox-pg-rm"}, names)
	assert.Empty(t, w.fake.Containers())
}

func TestTeardownKeepsGoingPastAFailure(t *testing.T) {
	w := newWorld(t)
	p := w.provisioner(w.options())
	_, err := p.Provision(ctxT(t), "tf", []string{"postgres", "redis", "mongo"})
	require.NoError(t, err)
	stuck := "roboco-sandbox-redis-tf"
	var stuckID string
	for _, c := range w.fake.Containers() {
		if c.Name == stuck {
			stuckID = c.ID
		}
	}
	w.fake.Fail(fakeruntime.VerbRemove, stuckID, errors.New("device busy"))
	removed, err := p.Teardown(ctxT(t), "tf")
	require.Error(t, err)
	assert.ErrorContains(t, err, "device busy")
	assert.Len(t, removed, 2)
	assert.Len(t, w.fake.Containers(), 1)
}

// TestTeardownLookUpFailureStillRemoves: teardown is best-effort as the
// design says: a look-up (which only tells removed from gone) that fails
// for any reason but absence does not stop the forced remove.
func TestTeardownLookUpFailureStillRemoves(t *testing.T) {
	tests := []struct {
		name      string
		lookUpErr error
	}{
		{"LookUpFails", errors.New("ttrpc: closed")},
		{"LookUpUnavailable", runtime.ErrUnavailable},
		{"LookUpTimesOut", context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			p := w.provisioner(w.options())
			_, err := p.Provision(ctxT(t), "kf", []string{"postgres", "redis", "mongo"})
			require.NoError(t, err)
			before := w.fake.Calls(fakeruntime.VerbInspect)
			w.fake.Fail(fakeruntime.VerbInspect, "", tt.lookUpErr)

			removed, err := p.Teardown(ctxT(t), "kf")
			require.NoError(t, err)
			assert.Len(t, removed, 3)
			assert.Equal(t, 3, w.fake.Calls(fakeruntime.VerbInspect)-before, "each look-up was tried")
			assert.Empty(t, w.fake.Containers(), "and each container removed all the same")
			assert.Len(t, w.events(provision.EventRemoved), 3)
		})
	}
}

// TestTeardownWithCancelledContextStillRemovesEverything: teardown is
// clean-up, called when a signal arrived or a caller gave up; it runs to
// its end, every runtime call on its own deadline instead of the caller's
// cancellation.
func TestTeardownWithCancelledContextStillRemovesEverything(t *testing.T) {
	w := newWorld(t)
	p := w.provisioner(w.options())
	_, err := p.Provision(ctxT(t), "cc", []string{"postgres", "redis", "mongo"})
	require.NoError(t, err)
	var cancelled, unbounded record[string]
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if ctx.Err() != nil {
			cancelled.add(c.Verb + " " + c.Object)
		}
		if _, ok := ctx.Deadline(); !ok {
			unbounded.add(c.Verb + " " + c.Object)
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	removed, err := p.Teardown(ctx, "cc")
	require.NoError(t, err)
	assert.Len(t, removed, 3)
	assert.Empty(t, w.fake.Containers())
	assert.Empty(t, cancelled.get(), "no runtime call inherits the caller's cancellation")
	assert.Empty(t, unbounded.get(), "every runtime call has a deadline")
	assert.Len(t, w.events(provision.EventRemoved), 3)
}

// TestTeardownHungRuntime: a runtime that hangs (on one container's
// look-up and remove, or on the list) makes a teardown fail within its
// CallTimeout-bounded time, with an error naming what it could not do,
// having removed everything else.
func TestTeardownHungRuntime(t *testing.T) {
	const callTimeout = 100 * time.Millisecond
	all := []string{"roboco-sandbox-mongo-hg", "roboco-sandbox-pg-hg", "roboco-sandbox-redis-hg"}
	tests := []struct {
		name     string
		hang     func(w *world) *atomic.Int32
		wantErr  []string
		wantHeld int32
		wantLeft []string
	}{
		{
			name: "LookUpAndRemoveHangOnOneContainer",
			hang: func(w *world) *atomic.Int32 {
				return w.hang(w.named("roboco-sandbox-redis-hg").ID, fakeruntime.VerbInspect, fakeruntime.VerbRemove)
			},
			wantErr:  []string{"roboco-sandbox-redis-hg", "remove", "after the look-up"},
			wantHeld: 2,
			wantLeft: []string{"roboco-sandbox-redis-hg"},
		},
		{
			name:     "ListHangs",
			hang:     func(w *world) *atomic.Int32 { return w.hang("", fakeruntime.VerbList) },
			wantErr:  []string{"teardown roboco-agent-hg", "list"},
			wantHeld: 1,
			wantLeft: all,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			opts := w.options()
			opts.CallTimeout = callTimeout
			p := w.provisioner(opts)
			_, err := p.Provision(ctxT(t), "hg", []string{"postgres", "redis", "mongo"})
			require.NoError(t, err)
			held := tt.hang(w)

			start := time.Now()
			removed, err := p.Teardown(ctxT(t), "hg")
			assert.Less(t, time.Since(start), 5*time.Second, "bounded by CallTimeout, not by the hang or the caller")
			require.Error(t, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			for _, s := range tt.wantErr {
				assert.ErrorContains(t, err, s)
			}
			assert.Equal(t, tt.wantHeld, held.Load())
			var names, left []string
			for _, c := range removed {
				names = append(names, c.Name)
			}
			for _, c := range w.fake.Containers() {
				left = append(left, c.Name)
			}
			assert.Equal(t, tt.wantLeft, left)
			var wantRemoved []string
			for _, n := range all {
				if !slices.Contains(tt.wantLeft, n) {
					wantRemoved = append(wantRemoved, n)
				}
			}
			assert.ElementsMatch(t, wantRemoved, names, "everything else is removed")
		})
	}
}

// TestPreClearLeavesANewerSameNamedContainerAlone: between the call's
// initial list and the pre-clear's remove (a long pull, say), another
// provision replaces the stale sandbox with a newer one of the same name,
// which has a new ID (IDs are never reused, on every backend). The
// pre-clear, which removes by the listed ID, leaves the newer one alone,
// and the call fails with a conflict instead of taking it.
func TestPreClearLeavesANewerSameNamedContainerAlone(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	const name = "roboco-sandbox-pg-5"
	newID := func(old runtime.Container) runtime.Container {
		return runtime.Container{Name: old.Name, Image: old.Image, Labels: withLabel(old.Labels, keys.Call, "newcall"), Created: now}
	}
	duringPull := func(old runtime.Container, c fakeruntime.Call) bool {
		return c.Verb == fakeruntime.VerbImageExists && c.Object == "postgres:16-alpine"
	}
	atLookUp := func(old runtime.Container, c fakeruntime.Call) bool {
		return c.Verb == fakeruntime.VerbInspect && c.Object == old.ID
	}
	atRemove := func(old runtime.Container, c fakeruntime.Call) bool {
		return c.Verb == fakeruntime.VerbRemove && c.Object == old.ID
	}
	tests := []struct {
		name  string
		newer func(old runtime.Container) runtime.Container
		at    func(old runtime.Container, c fakeruntime.Call) bool
		// preCleared: the listed sandbox was still there when the
		// pre-clear looked, so its removal is reported (it is gone,
		// whoever removed it); the newer one is untouched all the same.
		preCleared bool
	}{
		{name: "DuringPull", newer: newID, at: duringPull},
		{name: "AtTheLookUp", newer: newID, at: atLookUp},
		{name: "AtTheRemove", newer: newID, at: atRemove, preCleared: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.fake.SetClock(func() time.Time { return now })
			old := w.fake.Seed(runtime.Container{Name: name, Image: "postgres:16-alpine", Created: now.Add(-10 * time.Minute),
				Labels: map[string]string{keys.Sandbox: "1", keys.Owner: "roboco-agent-5",
					keys.Engine: "postgres", keys.Call: "oldcall"}})
			var (
				replaced atomic.Bool
				newer    runtime.Container
				hits     record[string]
			)
			w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
				if c.Verb == fakeruntime.VerbKill || c.Verb == fakeruntime.VerbRemove {
					hits.add(c.Object)
				}
				if !tt.at(old, c) || !replaced.CompareAndSwap(false, true) {
					return nil
				}
				// Another provision's pre-clear + run, meanwhile.
				assert.NoError(t, w.fake.Remove(ctx, old.ID))
				newer = w.fake.Seed(tt.newer(old))
				return nil
			})
			opts := w.options()
			opts.Now = func() time.Time { return now }
			p := w.provisioner(opts)

			_, err := p.Provision(ctxT(t), "5", []string{"postgres", "redis"})
			require.True(t, replaced.Load(), "the replacement happened during the call")
			require.Error(t, err)
			assert.ErrorIs(t, err, provision.ErrConflict)
			assert.ErrorIs(t, err, runtime.ErrAlreadyExists)
			var pe *provision.Error
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "postgres", pe.Service)
			if tt.at(old, fakeruntime.Call{Verb: fakeruntime.VerbImageExists, Object: "postgres:16-alpine"}) {
				// The owner's list runs beside the image check: it saw
				// either the old sandbox (then the pre-clear finds it
				// replaced and lets it be, and the run finds the name
				// taken) or already the newer one (which is in grace,
				// and the pre-clear refuses it). Both leave it alone.
				assert.Contains(t, []string{"run", "pre-clear"}, pe.Stage)
			} else {
				assert.Equal(t, "run", pe.Stage, "the pre-clear let it be; the run found the name taken")
			}
			if !tt.preCleared {
				assert.Empty(t, w.events(provision.EventPreCleared), "nothing was pre-cleared")
			}
			assert.NotContains(t, hits.get(), newer.ID, "the newer container is never killed or removed")

			left := w.fake.Containers()
			require.Len(t, left, 1, "the newer container survives; this call's redis is rolled back")
			assert.Equal(t, newer.ID, left[0].ID)
			assert.True(t, newer.Created.Equal(left[0].Created))
			assert.Equal(t, newer.Labels, left[0].Labels)
			assert.True(t, left[0].Running())
		})
	}
}

func withLabel(labels map[string]string, k, v string) map[string]string {
	out := maps.Clone(labels)
	out[k] = v
	return out
}

// kvEngine is an engine no package of sandboxer's registers: a registry
// that holds it (as engines.Default would, were its package imported)
// runs it through the provisioner unchanged.
type kvEngine struct{}

func (kvEngine) Spec() engines.Spec {
	return engines.Spec{Name: "kv", Short: "kv", Order: 40, Image: "example/kv:1", Port: 7000, Tmpfs: []string{"/kv"}, ReadyTimeout: 5 * time.Second}
}

func (kvEngine) Container(cred engines.Credentials, _ engines.Limits, _ engines.Image) engines.Container {
	return engines.Container{Env: map[string]string{"KV_PASSWORD": cred.Password}, Command: []string{"kv-server"}}
}

func (kvEngine) Probe(ep engines.Endpoint, cred engines.Credentials) []engines.ProbeStep {
	return []engines.ProbeStep{{
		Cmd:   []string{"kv-cli", "-h", ep.Host, "-p", strconv.Itoa(ep.Port), "ping"},
		Env:   map[string]string{"KV_AUTH": cred.Password},
		Check: engines.StdoutIs("pong"),
	}}
}

func (kvEngine) Env(prefix string, ep engines.Endpoint, cred engines.Credentials) []engines.EnvVar {
	return []engines.EnvVar{
		{Name: prefix + "_KV_ADDR", Value: net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port))},
		{Name: prefix + "_KV_PASSWORD", Value: cred.Password, Secret: true},
	}
}

func TestExtraEngineThroughUnchangedProvisioner(t *testing.T) {
	reg := engines.MustRegistry(postgres.Engine{}, redis.Engine{}, mongo.Engine{}, kvEngine{})
	w := newWorld(t)
	w.fake.AddImage("example/kv:1", "/kv")
	w.fake.Script("kv-cli", fakeruntime.Result{Stdout: "starting"}, fakeruntime.Result{Stdout: "pong"})
	opts := w.options()
	opts.Registry = reg
	opts.EnvPrefix = "APP"
	p := w.provisioner(opts)

	sb, err := p.Provision(ctxT(t), "x1", []string{"kv", "redis"})
	require.NoError(t, err)
	require.Len(t, sb.Containers, 2)
	assert.Equal(t, "roboco-sandbox-kv-x1", sb.Containers[1].Name)
	assert.Equal(t, "kv", sb.Containers[1].Engine)
	assert.Equal(t, fmt.Sprintf("127.0.0.1:%d", sb.Containers[1].Endpoint.Port), sb.Map()["APP_KV_ADDR"])
	assert.Equal(t, []string{"APP_REDIS_HOST", "APP_REDIS_PORT", "APP_REDIS_PASSWORD", "APP_REDIS_URL", "APP_KV_ADDR", "APP_KV_PASSWORD"},
		envNames(sb))

	_, err = p.Provision(ctxT(t), "x2", []string{"kv", "mysql"})
	assert.ErrorContains(t, err, "valid services: postgres, redis, mongo, kv", "validation iterates the registry")

	removed, err := p.Teardown(ctxT(t), "x1")
	require.NoError(t, err)
	assert.Len(t, removed, 2)
}

func envNames(sb provision.Sandbox) []string {
	var out []string
	for _, v := range sb.Env {
		out = append(out, v.Name)
	}
	return out
}

func TestGate(t *testing.T) {
	tests := []struct {
		name      string
		env       string
		list      string // as stored
		wantErr   string
		wantN     int
		why       provision.NotParticipating
		unchecked string // Gate.Unchecked, while the switch is off
	}{
		{"SwitchUnsetIsOff", "", `["postgres"]`, "", 0, provision.SwitchOff, ""},
		{"SwitchOff", "false", `["postgres","redis"]`, "", 0, provision.SwitchOff, ""},
		{"OnWithNullList", "true", "null", "", 0, provision.NoServices, ""},
		{"OnWithoutAList", "on", "", "", 0, provision.NoServices, ""},
		{"OffWithEmptyList", "0", "[]", "", 0, provision.NoServices, ""},
		{"OnWithList", "1", `["redis","postgres"]`, "", 2, "", ""},
		{"OnWithUnknownService", "yes", `["postgres","cassandra"]`, `"cassandra"`, 0, "", ""},
		{"OnWithListNotJSON", "yes", "postgres,redis", "want a JSON list", 0, "", ""},
		{"BadSwitchValue", "maybe", `["postgres"]`, `"maybe"`, 0, "", ""},
		// The switch is read before the list is judged.
		{"BadSwitchValueAndListNotJSON", "maybe", "postgres", `"maybe"`, 0, "", ""},
		// A project without services is never refused for the switch.
		{"BadSwitchValueWithoutServices", "maybe", "null", "", 0, provision.NoServices, ""},
		{"BadSwitchValueWithEmptyList", "maybe", "[]", "", 0, provision.NoServices, ""},
		// While the switch is off the list is not refused: it is reported.
		{"OffWithUnknownService", "off", `["postgress"]`, "", 0, provision.SwitchOff, `"postgress": unknown service`},
		{"OffWithListNotJSON", "", "postgres,redis", "", 0, provision.SwitchOff, "want a JSON list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			p := w.provisioner(w.options())
			getenv := func(k string) string {
				if k == provision.EnvEnabled {
					return tt.env
				}
				return ""
			}
			g, err := provision.GateFromEnv(getenv, provision.EnvEnabled, engines.Default, tt.list)
			var sb provision.Sandbox
			if err == nil {
				assert.Equal(t, tt.why, g.Why())
				if tt.unchecked == "" {
					assert.NoError(t, g.Unchecked)
				} else {
					assert.ErrorIs(t, g.Unchecked, provision.ErrInvalid)
					assert.ErrorContains(t, g.Unchecked, tt.unchecked)
				}
				sb, err = p.Spawn(ctxT(t), "g1", g)
			}
			if tt.wantErr != "" {
				require.ErrorIs(t, err, provision.ErrInvalid)
				assert.ErrorContains(t, err, tt.wantErr)
				sb, _ = p.Spawn(ctxT(t), "g1", g)
				assert.True(t, sb.Empty(), "Spawn provisions nothing for the gate returned with an error")
				assert.Empty(t, w.fake.Containers())
				return
			}
			require.NoError(t, err)
			assert.Len(t, sb.Containers, tt.wantN)
			if tt.wantN == 0 {
				assert.True(t, sb.Empty())
				assert.Empty(t, sb.Env, "no env at all")
				assert.Zero(t, w.totalCalls(), "the spawn is untouched: the runtime is not even asked")
			}
		})
	}
}

func TestSwitchName(t *testing.T) {
	name, err := provision.SwitchName("")
	require.NoError(t, err)
	assert.Equal(t, provision.EnvEnabled, name)
	assert.Equal(t, "ROBOCO_SANDBOX_DB_ENABLED", name)
	name, err = provision.SwitchName("ACME")
	require.NoError(t, err)
	assert.Equal(t, "ACME_SANDBOX_DB_ENABLED", name)
	_, err = provision.SwitchName("acme")
	assert.ErrorIs(t, err, provision.ErrInvalid)

	// The gate reads the switch by the name it is given, and names it.
	getenv := map[string]string{name: "1", provision.EnvEnabled: "maybe"}
	g, err := provision.GateFromEnv(func(k string) string { return getenv[k] }, name, nil, `["redis"]`)
	require.NoError(t, err)
	assert.True(t, g.Active())
	getenv[name] = "maybe"
	_, err = provision.GateFromEnv(func(k string) string { return getenv[k] }, name, nil, `["redis"]`)
	assert.ErrorContains(t, err, `ACME_SANDBOX_DB_ENABLED "maybe"`)
}

func TestCheckServiceList(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    []string
		wantErr string
	}{
		{"Trio", `["postgres","redis","mongo"]`, []string{"postgres", "redis", "mongo"}, ""},
		{"Spaces", ` [ "redis" ] `, []string{"redis"}, ""},
		{"Null", `null`, nil, ""},
		{"EmptyList", `[]`, nil, ""},
		{"Blank", "  ", nil, ""},
		{"Typo", `["postgress"]`, nil, `invalid service "postgress": unknown service; ` + validServices},
		{"Twice", `["redis","redis"]`, nil, `"redis": listed twice`},
		{"NotAList", `"postgres"`, nil, "want a JSON list"},
		{"CommaSeparated", `postgres,redis`, nil, "want a JSON list"},
		{"NotStrings", `[1,2]`, nil, "want a JSON list"},
		{"Object", `{"services":["redis"]}`, nil, "want a JSON list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := provision.CheckServiceList(engines.Default, tt.data)
			if tt.wantErr != "" {
				assert.ErrorIs(t, err, provision.ErrInvalid)
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRender(t *testing.T) {
	sb := provision.Sandbox{
		OwnerID: "42",
		Owner:   "roboco-agent-42",
		Containers: []provision.Container{{Name: "roboco-sandbox-pg-42", ID: "abc", Engine: "postgres", Image: "postgres:16-alpine",
			Endpoint: engines.Endpoint{Host: "127.0.0.1", Port: 5432}}},
		Env: []engines.EnvVar{
			{Name: "P_HOST", Value: "127.0.0.1"},
			{Name: "P_PASSWORD", Value: "0123456789abcdef0123456789abcdef", Secret: true},
			{Name: "P_URL", Value: "postgres://sandbox:0123456789abcdef0123456789abcdef@127.0.0.1:5432/sandbox", Secret: true},
			{Name: "P_ODD", Value: "it's $HOME"},
		},
	}
	tests := []struct {
		format provision.Format
		want   string
	}{
		{provision.FormatDotenv, "P_HOST=127.0.0.1\nP_PASSWORD=0123456789abcdef0123456789abcdef\n" +
			"P_URL=postgres://sandbox:0123456789abcdef0123456789abcdef@127.0.0.1:5432/sandbox\nP_ODD=it's $HOME\n"},
		{provision.FormatShell, "export P_HOST='127.0.0.1'\nexport P_PASSWORD='0123456789abcdef0123456789abcdef'\n" +
			"export P_URL='postgres://sandbox:0123456789abcdef0123456789abcdef@127.0.0.1:5432/sandbox'\nexport P_ODD='it'\\''s $HOME'\n"},
	}
	for _, tt := range tests {
		t.Run(string(tt.format), func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, sb.Render(&b, tt.format))
			assert.Equal(t, tt.want, b.String())
		})
	}
	t.Run("json", func(t *testing.T) {
		var b bytes.Buffer
		require.NoError(t, sb.Render(&b, provision.FormatJSON))
		assert.JSONEq(t, `{"owner_id":"42","owner":"roboco-agent-42",
			"containers":[{"name":"roboco-sandbox-pg-42","id":"abc","engine":"postgres","image":"postgres:16-alpine","endpoint":{"host":"127.0.0.1","port":5432}}],
			"env":[{"name":"P_HOST","value":"127.0.0.1"},{"name":"P_PASSWORD","value":"0123456789abcdef0123456789abcdef"},
			{"name":"P_URL","value":"postgres://sandbox:0123456789abcdef0123456789abcdef@127.0.0.1:5432/sandbox"},{"name":"P_ODD","value":"it's $HOME"}]}`, b.String())
	})
	t.Run("UnknownFormat", func(t *testing.T) {
		assert.ErrorIs(t, sb.Render(&bytes.Buffer{}, "yaml"), provision.ErrInvalid)
	})
	t.Run("Masked", func(t *testing.T) {
		m := sb.Masked().Map()
		assert.Equal(t, "****", m["P_PASSWORD"])
		assert.Equal(t, "postgres://sandbox:****@127.0.0.1:5432/sandbox", m["P_URL"])
		assert.Equal(t, "127.0.0.1", m["P_HOST"])
		assert.Equal(t, "0123456789abcdef0123456789abcdef", sb.Map()["P_PASSWORD"], "the original is untouched")
		assert.NotContains(t, fmt.Sprint(sb), "0123456789abcdef")
		assert.NotContains(t, fmt.Sprintf("%v", sb), "0123456789abcdef")
	})
	t.Run("Environ", func(t *testing.T) {
		assert.Equal(t, "P_HOST=127.0.0.1", sb.Environ()[0])
	})
}

func TestParseServices(t *testing.T) {
	assert.Equal(t, []string{"postgres", "redis"}, provision.ParseServices(" postgres, redis ,"))
	assert.Empty(t, provision.ParseServices(""))
}

func TestLogsCarryNoPassword(t *testing.T) {
	w := newWorld(t)
	p := w.provisioner(w.options())
	sb, err := p.Provision(ctxT(t), "log", []string{"postgres", "redis", "mongo"})
	require.NoError(t, err)
	_, err = p.Teardown(ctxT(t), "log")
	require.NoError(t, err)
	logs := w.logs.String()
	assert.Contains(t, logs, "sandbox ready")
	assert.Contains(t, logs, "sandbox removed")
	for _, pw := range passwords(sb) {
		assert.NotContains(t, logs, pw)
	}
}

func TestOwnerListRunsBesideTheImageChecks(t *testing.T) {
	t.Run("concurrent", func(t *testing.T) {
		w := newWorld(t)
		// The List is held until an image check has arrived: a provision
		// that listed first and checked images after would never get there.
		imageChecked := make(chan struct{})
		var once sync.Once
		w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
			switch c.Verb {
			case fakeruntime.VerbImageExists:
				once.Do(func() { close(imageChecked) })
			case fakeruntime.VerbList:
				select {
				case <-imageChecked:
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(5 * time.Second):
					return errors.New("no image check arrived while the owner's List was in flight")
				}
			}
			return nil
		})
		p := w.provisioner(w.options())
		_, err := p.Provision(ctxT(t), "lst", []string{"redis"})
		require.NoError(t, err)
	})
	t.Run("a failed list fails the provision and leaves nothing", func(t *testing.T) {
		w := newWorld(t)
		boom := errors.New("list refused")
		w.fake.Fail(fakeruntime.VerbList, "", boom)
		p := w.provisioner(w.options())
		_, err := p.Provision(ctxT(t), "lsf", []string{"postgres", "redis"})
		require.Error(t, err)
		assert.ErrorIs(t, err, boom)
		assert.Contains(t, err.Error(), "list existing sandboxes")
		assert.Empty(t, w.fake.Containers(), "nothing was run")
	})

}

// TestNoRunAfterASiblingFailed: a service that reaches its Run after a
// sibling has failed starts nothing; the call is being rolled back.
func TestNoRunAfterASiblingFailed(t *testing.T) {
	w := newWorld(t)
	boom := errors.New("daemon refused the create")
	w.fake.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		switch {
		case c.Verb == fakeruntime.VerbRun && c.Run.Name == "roboco-sandbox-redis-sib":
			return boom // after the owner's list: redis waited for it
		case c.Verb == fakeruntime.VerbImageExists && c.Object == "postgres:16-alpine":
			<-ctx.Done() // the sibling's failure ends the call's context
		}
		return nil // and the image is there
	})
	_, err := w.provisioner(w.options()).Provision(ctxT(t), "sib", []string{"postgres", "redis"})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 1, w.fake.Calls(fakeruntime.VerbRun), "redis's Run only: postgres started nothing once redis had failed")
	assert.Empty(t, w.fake.Containers())
}

// TestProvisionHungRuntime: a runtime that answers the ping and then
// hangs on the owner's list, an image check or an image ID makes the
// provision fail within its CallTimeout, though the caller's context has
// no deadline, having left nothing behind.
func TestProvisionHungRuntime(t *testing.T) {
	const callTimeout = 100 * time.Millisecond
	tests := []struct {
		name string
		verb string
		warm bool
	}{
		{"ListHangs", fakeruntime.VerbList, false},
		{"ImageExistsHangs", fakeruntime.VerbImageExists, false},
		{"ImageIDHangs", fakeruntime.VerbImageID, true},
		{"ImageConfigHangs", fakeruntime.VerbImageConfig, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			held := w.hang("", tt.verb)
			opts := w.options()
			opts.CallTimeout = callTimeout
			if tt.warm {
				opts.Warm = provision.WarmAuto
			}
			p := w.provisioner(opts)
			done := make(chan error, 1)
			go func() {
				_, err := p.Provision(context.Background(), "hung", []string{"postgres"})
				done <- err
			}()
			select {
			case err := <-done:
				if tt.warm {
					// A template that cannot be had: the sandbox starts cold.
					require.NoError(t, err)
					assert.Len(t, w.events(provision.EventWarmFallback), 1)
				} else {
					require.ErrorIs(t, err, context.DeadlineExceeded)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Provision still waits on the hung %s", tt.verb)
			}
			assert.GreaterOrEqual(t, held.Load(), int32(1))
			if !tt.warm {
				assert.Empty(t, w.fake.Containers())
			}
		})
	}
}

// TestBudgetFollowsTheMemoryLimit: each sandbox's run spec carries its
// engine's budget for the memory limit it runs with (engines.Limits): the
// tmpfs sizes the engine gives for that limit, the default's and a larger
// one's alike.
func TestBudgetFollowsTheMemoryLimit(t *testing.T) {
	for _, limit := range []int64{0, 2 << 30} {
		t.Run(fmt.Sprint(limit>>20, "MiB"), func(t *testing.T) {
			w := newWorld(t)
			var runs record[runtime.RunSpec]
			w.fake.OnCall(func(_ context.Context, c fakeruntime.Call) error {
				if c.Verb == fakeruntime.VerbRun {
					runs.add(c.Run)
				}
				return nil
			})
			opts := w.options()
			opts.MemoryBytes = limit
			_, err := w.provisioner(opts).Provision(ctxT(t), "1", engines.Default.Names())
			require.NoError(t, err)
			specs := runs.get()
			require.Len(t, specs, len(engines.Default.Names()))
			for _, s := range specs {
				e, _ := engines.Default.Lookup(s.Labels[labels.For(labels.DefaultPrefix).Engine])
				// The engine's own default limit (mongo's 1 GiB) when none is set.
				want := cmp.Or(limit, e.Spec().MemoryBytes, provision.DefaultMemoryBytes)
				cc := e.Container(engines.Credentials{}, engines.Limits{MemoryBytes: want}, engines.Image{})
				assert.Equal(t, want, s.MemoryBytes)
				assert.Equal(t, cc.Tmpfs, s.Tmpfs, "%s: the engine's tmpfs bounds for %d MiB", e.Spec().Name, want>>20)
				for path, o := range s.Tmpfs {
					assert.Contains(t, o, "size=", "%s: %s is bounded", e.Spec().Name, path)
				}
			}
		})
	}
}
