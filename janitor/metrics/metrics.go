// Package metrics exposes what the janitor does as Prometheus metrics, for
// the tools operators already use: the sandboxes the last sweep listed, by
// state and engine; what each sweep decided (removed, kept, skipped,
// vanished, errors), per sweep and in total; how long sweeps take; and
// when the last one succeeded. It is fed by janitor.Options.OnSweep and
// served by Serve on a loopback address (ListenAddr).
//
// It is a package of its own so that only a program that serves metrics
// (the CLI's `janitor --metrics-addr`) links the Prometheus client.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/roboco/sandboxer/janitor"
)

// Namespace prefixes every metric's name.
const Namespace = "sandboxer_janitor"

// Outcomes are the values of the "outcome" label: the lists of a
// janitor.Report.
var Outcomes = []string{"removed", "kept", "skipped", "vanished", "errors"}

// Janitor holds the metrics of one janitor. Its zero value is not usable:
// call New.
type Janitor struct {
	reg         *prometheus.Registry
	sandboxes   *prometheus.GaugeVec
	lastSweep   *prometheus.GaugeVec
	total       *prometheus.CounterVec
	sweeps      *prometheus.CounterVec
	duration    prometheus.Histogram
	lastSuccess prometheus.Gauge
}

// New makes the metrics of a janitor sweeping the runtime called rt, in a
// registry of their own (with the Go and process collectors).
func New(rt string) *Janitor {
	constLabels := prometheus.Labels{"runtime": rt}
	m := &Janitor{
		reg: prometheus.NewRegistry(),
		sandboxes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "sandboxes", ConstLabels: constLabels,
			Help: "Sandboxes the last successful sweep listed, by container state and engine (removed ones included: they existed when listed).",
		}, []string{"state", "engine"}),
		lastSweep: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "last_sweep_sandboxes", ConstLabels: constLabels,
			Help: "What the last sweep decided, by outcome: removed, kept (owner alive), skipped (in grace), vanished, errors (kept: owner not judged, or removal failed).",
		}, []string{"outcome"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "sandboxes_total", ConstLabels: constLabels,
			Help: "Sandboxes decided on by every sweep so far, by outcome.",
		}, []string{"outcome"}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "sweeps_total", ConstLabels: constLabels,
			Help: "Sweeps so far, by result: ok, or error (the sweep failed or some sandbox could not be decided on or removed).",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "sweep_duration_seconds", ConstLabels: constLabels,
			Help:    "How long each sweep took.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "last_success_timestamp_seconds", ConstLabels: constLabels,
			Help: "When the last sweep without an error ended, in seconds since the epoch (0: none yet).",
		}),
	}
	m.reg.MustRegister(m.sandboxes, m.lastSweep, m.total, m.sweeps, m.duration, m.lastSuccess,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, o := range Outcomes {
		m.total.WithLabelValues(o)
	}
	for _, r := range []string{"ok", "error"} {
		m.sweeps.WithLabelValues(r)
	}
	return m
}

// Observe records one sweep: what janitor.Options.OnSweep is given.
func (m *Janitor) Observe(rep janitor.Report, err error, took time.Duration) {
	m.duration.Observe(took.Seconds())
	if err != nil && rep.Total() == 0 {
		// The sweep listed nothing (the snapshot failed): the gauges keep
		// the last sweep that saw the runtime.
		m.sweeps.WithLabelValues("error").Inc()
		return
	}
	counts := map[string]int{
		"removed": len(rep.Removed), "kept": len(rep.Kept), "skipped": len(rep.Skipped),
		"vanished": len(rep.Vanished), "errors": len(rep.Errors),
	}
	for _, o := range Outcomes {
		m.lastSweep.WithLabelValues(o).Set(float64(counts[o]))
		m.total.WithLabelValues(o).Add(float64(counts[o]))
	}
	m.sandboxes.Reset()
	count := func(sb janitor.Sandbox) {
		m.sandboxes.WithLabelValues(string(sb.State), sb.Engine).Inc()
	}
	for _, list := range [][]janitor.Sandbox{rep.Removed, rep.Kept, rep.Skipped, rep.Vanished} {
		for _, sb := range list {
			count(sb)
		}
	}
	for _, f := range rep.Errors {
		count(f.Sandbox)
	}
	if err != nil || len(rep.Errors) > 0 {
		m.sweeps.WithLabelValues("error").Inc()
		return
	}
	m.sweeps.WithLabelValues("ok").Inc()
	m.lastSuccess.Set(float64(time.Now().UnixNano()) / 1e9)
}

// Handler serves the metrics in the Prometheus exposition format.
func (m *Janitor) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// ErrNotLoopback: a metrics address whose host is not a loopback address,
// without the explicit opt-in.
var ErrNotLoopback = errors.New("not a loopback address")

// ListenAddr resolves a --metrics-addr value: "PORT" or ":PORT" listen on
// 127.0.0.1; "HOST:PORT" must name a loopback address (127.0.0.0/8, ::1,
// localhost) unless public is set, since the metrics name owners and
// sandboxes and are served without authentication. The error matches
// ErrNotLoopback, or says what is malformed.
func ListenAddr(addr string, public bool) (string, error) {
	if addr == "" {
		return "", fmt.Errorf("metrics address: empty")
	}
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics address %q: %w", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "" {
		return "", fmt.Errorf("metrics address %q: bad port %q", addr, port)
	}
	switch {
	case host == "":
		host = "127.0.0.1"
	case host == "localhost", public:
	default:
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return "", fmt.Errorf("metrics address %q: %w (the metrics are served without authentication; allow it explicitly to listen there)", addr, ErrNotLoopback)
		}
	}
	return net.JoinHostPort(host, port), nil
}

// Serve listens on addr (as ListenAddr returned it) and serves the metrics
// at /metrics until ctx ends; it returns once listening, with the address
// it listens on (":0" picks a port) and a channel that yields the server's
// end (nil after ctx ended).
func (m *Janitor) Serve(ctx context.Context, addr string) (string, <-chan error, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	return ln.Addr().String(), done, nil
}
