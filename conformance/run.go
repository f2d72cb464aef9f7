package conformance

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/runtime"
)

// testRunHonoursNameEnvCommandLabels: the container gets the spec's name,
// env and entrypoint/command, and inspect and list report the name, image,
// state, creation time and labels exactly as given.
func testRunHonoursNameEnvCommandLabels(t *testing.T, s *suite) {
	env := map[string]string{
		"SBX_CONF_PLAIN":  "alpha",
		"SBX_CONF_TRICKY": `a b=c 'q' "dq" $HOME ü`,
		"SBX_CONF_EMPTY":  "",
	}
	cases := []struct {
		name        string
		entrypoint  []string
		command     []string
		wantCmdline []string
	}{
		{
			name:        "command replaces the image's",
			command:     []string{"sleep", "3601"},
			wantCmdline: []string{"sleep", "3601"},
		},
		{
			name:        "entrypoint and command",
			entrypoint:  []string{"sleep"},
			command:     []string{"3602"},
			wantCmdline: []string{"sleep", "3602"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			key := randomHex(4)
			labels := s.labels(t, map[string]string{
				"sbx.conf/key":     key,
				"sbx.conf/empty":   "",
				"sbx.conf/spaces":  " a b = c ",
				"sbx.conf/unicode": "ünï ✓",
				"sbx.conf/json":    `{"a":[1,2],"b":"c"}`,
			})
			spec := runtime.RunSpec{
				Name:       s.newName(),
				Image:      s.cfg.Fixtures.Busybox,
				Env:        env,
				Entrypoint: tc.entrypoint,
				Command:    tc.command,
				Labels:     labels,
			}
			before := time.Now()
			ran := s.run(t, ctx, spec)
			assert.Equal(t, spec.Name, ran.Name, "run result's name")
			assert.NotEmpty(t, ran.ID, "run result's id")

			got, err := s.rt.Inspect(ctx, spec.Name)
			require.NoError(t, err, "inspect by name")
			assert.Equal(t, ran.ID, got.ID, "inspect's id")
			assert.Equal(t, spec.Name, got.Name, "inspect's name")
			assert.Equal(t, spec.Image, got.Image, "inspect's image")
			assert.Equal(t, runtime.StateRunning, got.State, "inspect's state")
			assert.True(t, got.Running())
			assert.WithinRange(t, got.Created, before.Add(-time.Minute), time.Now().Add(time.Minute), "creation time")
			assertLabels(t, labels, got.Labels, "inspect")

			byID, err := s.rt.Inspect(ctx, ran.ID)
			require.NoError(t, err, "inspect by id")
			assert.Equal(t, spec.Name, byID.Name, "names and ids are interchangeable")

			cmdline := s.readFile(t, ctx, spec.Name, "/proc/1/cmdline")
			assert.Equal(t, tc.wantCmdline, strings.Split(strings.TrimSuffix(cmdline, "\x00"), "\x00"), "PID 1's argv")

			environ := map[string]string{}
			for _, kv := range strings.Split(s.readFile(t, ctx, spec.Name, "/proc/1/environ"), "\x00") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					environ[k] = v
				}
			}
			for k, v := range env {
				g, ok := environ[k]
				if assert.True(t, ok, "PID 1's env lacks %s", k) {
					assert.Equal(t, v, g, "PID 1's env %s", k)
				}
			}

			listed, err := s.rt.List(ctx, map[string]string{"sbx.conf/key": key})
			require.NoError(t, err, "list")
			if assert.Len(t, listed, 1, "list by the container's unique label") {
				assert.Equal(t, spec.Name, listed[0].Name, "list's name")
				assert.Equal(t, ran.ID, listed[0].ID, "list's id")
				assert.Equal(t, runtime.StateRunning, listed[0].State, "list's state")
				assertLabels(t, labels, listed[0].Labels, "list")
			}
		})
	}
}

// testRunHonoursUlimits: the spec's rlimits are those of the container's
// processes (read from /proc/1/limits inside).
func testRunHonoursUlimits(t *testing.T, s *suite) {
	ctx := testContext(t)
	cases := []struct {
		ulimit runtime.Ulimit
		row    string // the row of /proc/<pid>/limits
	}{
		{ulimit: runtime.Ulimit{Name: "nofile", Soft: 1000, Hard: 2000}, row: "Max open files"},
		// RLIMIT_NPROC counts every task of the user, not of the
		// container: under a rootless runtime that is the whole service
		// (its threads, conmons, every container's processes), hundreds
		// while other tests run, and an exec past the soft limit fails
		// with EAGAIN. The values are far above that.
		{ulimit: runtime.Ulimit{Name: "nproc", Soft: 4000, Hard: 8000}, row: "Max processes"},
	}
	spec := s.spec(t)
	for _, tc := range cases {
		spec.Ulimits = append(spec.Ulimits, tc.ulimit)
	}
	if s.forms.NoProcessLimits {
		// The Kubernetes form: no pod field holds them, so they are
		// refused, never dropped.
		s.assertRefused(t, ctx, spec, "run with ulimits")
		return
	}
	s.run(t, ctx, spec)
	limits := parseLimits(t, s.readFile(t, ctx, spec.Name, "/proc/1/limits"))

	for _, tc := range cases {
		t.Run(tc.ulimit.Name, func(t *testing.T) {
			got, ok := limits[tc.row]
			require.True(t, ok, "/proc/1/limits has no %q row", tc.row)
			assert.Equal(t, [2]int64{tc.ulimit.Soft, tc.ulimit.Hard}, got, "%s soft and hard", tc.ulimit.Name)
		})
	}
}

// parseLimits reads /proc/<pid>/limits into row name -> {soft, hard}
// ("unlimited" is -1).
func parseLimits(t testing.TB, text string) map[string][2]int64 {
	t.Helper()
	out := map[string][2]int64{}
	lines := strings.Split(text, "\n")
	require.NotEmpty(t, lines)
	header := lines[0]
	softAt := strings.Index(header, "Soft Limit")
	require.Positive(t, softAt, "unexpected /proc/1/limits header %q", header)
	for _, line := range lines[1:] {
		if len(line) <= softAt {
			continue
		}
		fields := strings.Fields(line[softAt:])
		if len(fields) < 2 {
			continue
		}
		var v [2]int64
		for i := range v {
			if fields[i] == "unlimited" {
				v[i] = -1
				continue
			}
			n, err := strconv.ParseInt(fields[i], 10, 64)
			require.NoError(t, err, "/proc/1/limits row %q", line)
			v[i] = n
		}
		out[strings.TrimSpace(line[:softAt])] = v
	}
	return out
}

// testInvalidSpecIsRejectedAlike: every rule of the port's input
// (runtime.RunSpec.Normalize) gives ErrInvalid on Run and on Create, on
// every backend alike, and nothing is left behind; a spec that only needs
// the port's defaults (protocol in upper case, no host IP) runs.
func testInvalidSpecIsRejectedAlike(t *testing.T, s *suite) {
	ctx := testContext(t)
	cases := []struct {
		name   string
		modify func(*runtime.RunSpec)
	}{
		{"NoImage", func(r *runtime.RunSpec) { r.Image = "" }},
		{"NegativeMemory", func(r *runtime.RunSpec) { r.MemoryBytes = -1 }},
		{"NegativeCPUs", func(r *runtime.RunSpec) { r.CPUs = -1 }},
		{"NegativePids", func(r *runtime.RunSpec) { r.PidsLimit = -1 }},
		{"RelativeTmpfs", func(r *runtime.RunSpec) { r.Tmpfs = map[string]string{"data": ""} }},
		{"UnnamedUlimit", func(r *runtime.RunSpec) { r.Ulimits = []runtime.Ulimit{{Soft: 1, Hard: 1}} }},
		{"UnknownUlimit", func(r *runtime.RunSpec) { r.Ulimits = []runtime.Ulimit{{Name: "files", Soft: 1, Hard: 1}} }},
		{"UlimitTwice", func(r *runtime.RunSpec) {
			r.Ulimits = []runtime.Ulimit{{Name: "nofile", Soft: 1, Hard: 1}, {Name: "RLIMIT_NOFILE", Soft: 1, Hard: 1}}
		}},
		{"UlimitSoftAboveHard", func(r *runtime.RunSpec) { r.Ulimits = []runtime.Ulimit{{Name: "nofile", Soft: 2, Hard: 1}} }},
		{"ContainerPortZero", func(r *runtime.RunSpec) { r.Ports = []runtime.PortSpec{{}} }},
		{"HostPortOutOfRange", func(r *runtime.RunSpec) { r.Ports = []runtime.PortSpec{{ContainerPort: 80, HostPort: 65536}} }},
		{"Protocol", func(r *runtime.RunSpec) { r.Ports = []runtime.PortSpec{{ContainerPort: 80, Protocol: "sctp"}} }},
		{"IPv6HostIP", func(r *runtime.RunSpec) { r.Ports = []runtime.PortSpec{{ContainerPort: 80, HostIP: "::1"}} }},
		// containerd keeps the name there: a label would rename it.
		{"ReservedNameLabel", func(r *runtime.RunSpec) { r.Labels = map[string]string{"nerdctl/name": r.Name + "-other"} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := s.spec(t)
			tc.modify(&spec)
			s.track(t, spec.Name)
			_, err := s.rt.Run(ctx, spec)
			require.ErrorIs(t, err, runtime.ErrInvalid, "run")
			assert.Contains(t, err.Error(), s.rt.Name(), "the error names the runtime")
			_, err = s.rt.Create(ctx, spec)
			require.ErrorIs(t, err, runtime.ErrInvalid, "create")
			_, err = s.rt.Inspect(ctx, spec.Name)
			assert.ErrorIs(t, err, runtime.ErrNotFound, "nothing was made")
		})
	}
	t.Run("DefaultsOnly", func(t *testing.T) {
		spec := s.spec(t)
		spec.Ports = []runtime.PortSpec{{ContainerPort: 8080, Protocol: "TCP"}}
		if s.forms.NoHostPorts {
			// A valid port is the backend's to refuse: ErrUnsupported.
			s.assertRefused(t, ctx, spec, "run with a published port")
			return
		}
		c := s.run(t, ctx, spec)
		got, err := s.rt.Inspect(ctx, c.ID)
		require.NoError(t, err)
		require.Len(t, got.Ports, 1)
		assert.Equal(t, runtime.PortBinding{ContainerPort: 8080, Protocol: "tcp", HostIP: runtime.DefaultHostIP, HostPort: got.Ports[0].HostPort}, got.Ports[0])
		assert.NotZero(t, got.Ports[0].HostPort, "an ephemeral host port")
	})
}
