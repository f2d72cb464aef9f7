package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/janitor/metrics"
)

// scrape reads url with an HTTP client and parses it with the Prometheus
// client's own text parser.
func scrape(t *testing.T, ctx context.Context, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// value is the value of the sample of family name whose labels include
// want; ok false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsOfARealSweep: a janitor loop (Run) on a real runtime, with
// one sandbox whose owner container runs and one whose owner never
// existed, serves what its first sweep did; scraped over HTTP and parsed
// with the Prometheus client's parser, and the removal checked with the
// runtime's own CLI.
func TestMetricsOfARealSweep(t *testing.T) {
	r := testruntimes.Connect(t, "docker")
	w := testruntimes.NewWorld(t, r)
	ctx := testkit.Context(t, 5*time.Minute)
	p := w.Provisioner(nil)
	w.Agent(ctx, p.OwnerName("kept"))
	kept, err := p.Provision(ctx, "kept", []string{"redis"})
	require.NoError(t, err)
	gone, err := p.Provision(ctx, "gone", []string{"redis"})
	require.NoError(t, err)

	m := metrics.New(r.Name)
	addr, served, err := m.Serve(ctx, "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + addr + "/metrics"
	before := scrape(t, ctx, url)
	v, ok := value(before, "sandboxer_janitor_last_success_timestamp_seconds", nil)
	require.True(t, ok)
	assert.Zero(t, v, "no sweep yet")

	// A sweep without grace still skips a sandbox whose creation time may
	// have been truncated to the current second (janitor.Options.NoGrace):
	// the one sweep this test watches must find both past that.
	testkit.Poll(t, time.Minute, 100*time.Millisecond, func() error {
		for _, c := range append(slices.Clone(kept.Containers), gone.Containers...) {
			ctr, err := r.RT.Inspect(ctx, c.ID)
			if err != nil {
				return err
			}
			if age := time.Since(ctr.Created); age < 2*time.Second {
				return fmt.Errorf("%s is %s old", c.Name, age)
			}
		}
		return nil
	})
	start := time.Now()
	j, err := janitor.New(r.RT, janitor.Options{Prefix: w.Prefix, NoGrace: true, OnSweep: m.Observe, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- j.Run(runCtx, time.Hour) }() // one sweep, at start
	var fams map[string]*dto.MetricFamily
	testkit.Poll(t, 2*time.Minute, 100*time.Millisecond, func() error {
		fams = scrape(t, ctx, url)
		if n, _ := value(fams, "sandboxer_janitor_sweeps_total", map[string]string{"result": "ok"}); n != 1 {
			return errors.New("the first sweep is not served yet")
		}
		return nil
	})
	stop()
	require.NoError(t, <-ran)

	rt := map[string]string{"runtime": r.Name}
	with := func(k, v string) map[string]string { return map[string]string{"runtime": r.Name, k: v} }
	for outcome, want := range map[string]float64{"removed": 1, "kept": 1, "skipped": 0, "vanished": 0, "errors": 0} {
		got, ok := value(fams, "sandboxer_janitor_last_sweep_sandboxes", with("outcome", outcome))
		assert.True(t, ok, outcome)
		assert.Equal(t, want, got, "last sweep %s", outcome)
		got, _ = value(fams, "sandboxer_janitor_sandboxes_total", with("outcome", outcome))
		assert.Equal(t, want, got, "total %s", outcome)
	}
	got, _ := value(fams, "sandboxer_janitor_sandboxes", map[string]string{"runtime": r.Name, "state": "running", "engine": "redis"})
	assert.Equal(t, 2.0, got, "both sandboxes were listed running")
	got, _ = value(fams, "sandboxer_janitor_sweeps_total", with("result", "error"))
	assert.Zero(t, got)
	got, _ = value(fams, "sandboxer_janitor_sweep_duration_seconds", rt)
	assert.Equal(t, 1.0, got, "one sweep observed")
	last, _ := value(fams, "sandboxer_janitor_last_success_timestamp_seconds", rt)
	assert.InDelta(t, float64(time.Now().Unix()), last, time.Since(start).Seconds()+1, "the last success is this sweep")
	assert.Contains(t, fams, "go_goroutines", "the Go collector")

	// From the other side: the runtime's own CLI lists the kept sandbox,
	// and not the one removed.
	owner := p.Labels().Owner
	assert.Equal(t, []string{kept.Containers[0].Name}, r.LabelledNames(t, owner, p.OwnerName("kept")))
	assert.Empty(t, r.LabelledNames(t, owner, p.OwnerName("gone")), "removed: %s", gone.Containers[0].Name)

	select {
	case err := <-served:
		t.Fatalf("metrics server ended early: %v", err)
	default:
	}
}

// TestAFailedSweepKeepsTheLastListing: a sweep that could not list the
// runtime counts as an error and leaves the gauges of the last listing;
// the last success does not move.
func TestAFailedSweepKeepsTheLastListing(t *testing.T) {
	m := metrics.New("docker")
	ctx := testkit.Context(t, time.Minute)
	addr, _, err := m.Serve(ctx, "127.0.0.1:0")
	require.NoError(t, err)
	m.Observe(janitor.Report{Kept: []janitor.Sandbox{{Engine: "redis", State: "running"}}}, nil, time.Second)
	first := scrape(t, ctx, "http://"+addr+"/metrics")
	m.Observe(janitor.Report{}, errors.New("janitor: list sandboxes: unavailable"), 2*time.Second)
	fams := scrape(t, ctx, "http://"+addr+"/metrics")
	n, _ := value(fams, "sandboxer_janitor_sweeps_total", map[string]string{"result": "error"})
	assert.Equal(t, 1.0, n)
	n, _ = value(fams, "sandboxer_janitor_last_sweep_sandboxes", map[string]string{"outcome": "kept"})
	assert.Equal(t, 1.0, n)
	n, _ = value(fams, "sandboxer_janitor_sandboxes", map[string]string{"state": "running", "engine": "redis"})
	assert.Equal(t, 1.0, n)
	a, _ := value(first, "sandboxer_janitor_last_success_timestamp_seconds", nil)
	b, _ := value(fams, "sandboxer_janitor_last_success_timestamp_seconds", nil)
	assert.NotZero(t, a)
	assert.Equal(t, a, b)
}

func TestListenAddrIsLoopbackUnlessAllowed(t *testing.T) {
	tests := []struct {
		name, addr string
		public     bool
		want       string
		err        error
	}{
		{"BarePort", "9464", false, "127.0.0.1:9464", nil},
		{"ColonPort", ":9464", false, "127.0.0.1:9464", nil},
		{"Loopback", "127.0.0.2:9464", false, "127.0.0.2:9464", nil},
		{"IPv6Loopback", "[::1]:9464", false, "[::1]:9464", nil},
		{"Localhost", "localhost:9464", false, "localhost:9464", nil},
		{"AllInterfacesRefused", "0.0.0.0:9464", false, "", metrics.ErrNotLoopback},
		{"LANRefused", "192.168.1.5:9464", false, "", metrics.ErrNotLoopback},
		{"NameRefused", "nas.lan:9464", false, "", metrics.ErrNotLoopback},
		{"AllInterfacesAllowed", "0.0.0.0:9464", true, "0.0.0.0:9464", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metrics.ListenAddr(tt.addr, tt.public)
			if tt.err != nil {
				assert.ErrorIs(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	for _, bad := range []string{"", "127.0.0.1:", "127.0.0.1:http-alt-nope", "127.0.0.1:99999"} {
		_, err := metrics.ListenAddr(bad, false)
		assert.Error(t, err, bad)
	}
}
