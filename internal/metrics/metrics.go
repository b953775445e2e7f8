// Package metrics is the server's Prometheus metrics (client_golang, text
// format at /metrics) and the HTTP middleware that gives every request an id,
// logs it and measures it (middleware.go).
//
// Every metric is named withruntime_*. Durations are seconds, sizes bytes.
// One Metrics belongs to one server: it has its own registry, so servers in
// one process (tests, the CLI's embedded server) never mix their figures.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"withruntime.dev/runtime/internal/sandbox"
)

// Sources are what the scrape-time gauges read.
type Sources struct {
	// SandboxStates counts sandbox records by state (starting, running,
	// stopped). Optional.
	SandboxStates func(context.Context) (map[string]int, error)
	// Pool reports the warm pool per template (size kept, ready now).
	// Optional.
	Pool func() map[string]sandbox.PoolStatus
	// Leader reports this server's identity in the leader election and
	// whether it leads now. Optional: without it (no leader election) there
	// is no withruntime_leader gauge.
	Leader func() (identity string, leading bool)
}

// Metrics holds one server's metrics. Its methods are safe for concurrent
// use; a nil *Metrics ignores every observation.
type Metrics struct {
	reg *prometheus.Registry
	log *slog.Logger

	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	creates       *prometheus.CounterVec
	createSeconds prometheus.Histogram
	execSeconds   *prometheus.HistogramVec
	egressConns   *prometheus.CounterVec
	egressBytes   *prometheus.CounterVec
	samples       *prometheus.CounterVec
	refusals      *prometheus.CounterVec
}

// latencyBuckets span a warm-pool claim (a few ms) to a cold boot with a
// template build (minutes).
var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// New returns the metrics of one server, reading gauges from src. log
// receives one line per request (Info) from Middleware; nil discards them.
func New(src Sources, log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{reg: prometheus.NewRegistry(), log: log}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "withruntime_http_requests_total",
		Help: "HTTP requests served, by method, route pattern and status code.",
	}, []string{"method", "route", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "withruntime_http_request_duration_seconds", Buckets: latencyBuckets,
		Help: "Time to serve an HTTP request (to the end of its body, streams included), by method and route pattern.",
	}, []string{"method", "route"})
	m.creates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "withruntime_sandbox_creates_total",
		Help: "Sandbox creates (POST /v1/sandboxes) by status code: 201 created, 429 spending limit or trial used up, 503 no capacity, ...",
	}, []string{"code"})
	m.createSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "withruntime_sandbox_create_duration_seconds", Buckets: latencyBuckets,
		Help: "Time to answer a successful sandbox create (a warm-pool claim or a cold boot).",
	})
	m.execSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "withruntime_forwarded_request_duration_seconds", Buckets: latencyBuckets,
		Help: "Time to serve a request forwarded to a sandbox's agent (exec, processes, files), by route pattern; exec is the command's run time plus the round trip.",
	}, []string{"route"})
	m.egressConns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "withruntime_egress_connections_total",
		Help: "Connections from sandboxes through the egress proxy, by decision (allowed, denied).",
	}, []string{"decision"})
	m.egressBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "withruntime_egress_bytes_total",
		Help: "Bytes through allowed egress connections that were spliced (not intercepted), by direction (out: from the sandbox, in: to it).",
	}, []string{"direction"})
	m.samples = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "withruntime_metering_samples_total",
		Help: "Metering samples of running sandboxes, by result (written: an interval went to the ledger; skipped: nothing to bill; error).",
	}, []string{"result"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "withruntime_spending_refusals_total",
		Help: "Creates refused for money, by reason (daily_limit, trial_used, cost_cap).",
	}, []string{"reason"})
	m.reg.MustRegister(m.requests, m.duration, m.creates, m.createSeconds, m.execSeconds,
		m.egressConns, m.egressBytes, m.samples, m.refusals,
		&gauges{src: src},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, d := range []string{"allowed", "denied"} {
		m.egressConns.WithLabelValues(d)
	}
	for _, d := range []string{"out", "in"} {
		m.egressBytes.WithLabelValues(d)
	}
	for _, r := range []string{"written", "skipped", "error"} {
		m.samples.WithLabelValues(r)
	}
	for _, r := range []string{"daily_limit", "trial_used", "cost_cap"} {
		m.refusals.WithLabelValues(r)
	}
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)})
}

// Registry is the registry the metrics are in (for tests and extra
// collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Egress records one connection through the egress proxy: allowed or not,
// and the bytes spliced each way (0 when not counted).
func (m *Metrics) Egress(allowed bool, out, in int64) {
	if m == nil {
		return
	}
	if !allowed {
		m.egressConns.WithLabelValues("denied").Inc()
		return
	}
	m.egressConns.WithLabelValues("allowed").Inc()
	m.egressBytes.WithLabelValues("out").Add(float64(out))
	m.egressBytes.WithLabelValues("in").Add(float64(in))
}

var _ sandbox.Observer = (*Metrics)(nil)

// MeterSample implements sandbox.Observer.
func (m *Metrics) MeterSample(result string) {
	if m == nil {
		return
	}
	m.samples.WithLabelValues(result).Inc()
}

// CreateRefused implements sandbox.Observer.
func (m *Metrics) CreateRefused(reason string) {
	if m == nil {
		return
	}
	m.refusals.WithLabelValues(reason).Inc()
}

// observeRequest records one served request.
func (m *Metrics) observeRequest(method, route string, code int, d time.Duration) {
	m.requests.WithLabelValues(method, route, codeLabel(code)).Inc()
	m.duration.WithLabelValues(method, route).Observe(d.Seconds())
	switch {
	case method == http.MethodPost && route == "/v1/sandboxes":
		m.creates.WithLabelValues(codeLabel(code)).Inc()
		if code == http.StatusCreated {
			m.createSeconds.Observe(d.Seconds())
		}
	case forwardedRoute(route):
		m.execSeconds.WithLabelValues(route).Observe(d.Seconds())
	}
}

// gauges reads the scrape-time figures: sandboxes by state, the warm pool,
// leadership.
type gauges struct{ src Sources }

var (
	sandboxesDesc = prometheus.NewDesc("withruntime_sandboxes", "Sandbox records by state (starting, running, stopped).", []string{"state"}, nil)
	poolSizeDesc  = prometheus.NewDesc("withruntime_pool_size", "Sandboxes the warm pool keeps ready, by template.", []string{"template"}, nil)
	poolReadyDesc = prometheus.NewDesc("withruntime_pool_ready", "Warm-pool sandboxes booted and waiting now, by template.", []string{"template"}, nil)
	leaderDesc    = prometheus.NewDesc("withruntime_leader", "1 while this server leads the servers sharing its store (it runs lease ends, the warm pool and the metering sampler), 0 otherwise; only with leader election. identity is this server's.", []string{"identity"}, nil)
)

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- sandboxesDesc
	ch <- poolSizeDesc
	ch <- poolReadyDesc
	ch <- leaderDesc
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	if g.src.SandboxStates != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		counts, err := g.src.SandboxStates(ctx)
		cancel()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(sandboxesDesc, err)
		} else {
			for _, st := range []string{"starting", "running", "stopped"} {
				ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(counts[st]), st)
			}
		}
	}
	if g.src.Pool != nil {
		for t, st := range g.src.Pool() {
			ch <- prometheus.MustNewConstMetric(poolSizeDesc, prometheus.GaugeValue, float64(st.Size), t)
			ch <- prometheus.MustNewConstMetric(poolReadyDesc, prometheus.GaugeValue, float64(st.Ready), t)
		}
	}
	if g.src.Leader != nil {
		id, leading := g.src.Leader()
		v := 0.0
		if leading {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, v, id)
	}
}
