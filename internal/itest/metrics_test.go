package itest

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"withruntime.dev/runtime/internal/api"
)

// scrapeMetrics reads GET /metrics with the local key and parses it with
// the Prometheus text parser.
func (e *env) scrapeMetrics() map[string]*dto.MetricFamily {
	e.t.Helper()
	status, body := e.do("GET", "/metrics", nil)
	if status != http.StatusOK {
		e.t.Fatalf("GET /metrics: %d %s", status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		e.t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return fams
}

// metricValue is the value (a histogram's count) of the first series of
// name whose labels include labels; -1 when there is none.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	for _, mt := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, lp := range mt.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			ok = ok && have[labels[i]] == labels[i+1]
		}
		if !ok {
			continue
		}
		switch {
		case mt.Counter != nil:
			return mt.GetCounter().GetValue()
		case mt.Gauge != nil:
			return mt.GetGauge().GetValue()
		case mt.Histogram != nil:
			return float64(mt.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// TestMetrics: /metrics parses with the Prometheus text parser, needs a key
// without a limit, and its figures move as sandboxes are created, exec'd,
// metered, refused and reach for the network; every answer carries a
// request id (the caller's, echoed).
func TestMetrics(t *testing.T) {
	e := newEnv(t, withMeterInterval(200*time.Millisecond), withPool(1))
	e.waitPoolReady(1)
	before := e.scrapeMetrics()
	if v := metricValue(before, "withruntime_pool_size", "template", "base"); v != 1 {
		t.Errorf("withruntime_pool_size{template=base} = %v, want 1", v)
	}
	if v := metricValue(before, "withruntime_pool_ready", "template", "base"); v != 1 {
		t.Errorf("withruntime_pool_ready{template=base} = %v, want 1", v)
	}

	sb := e.create(api.CreateSandboxRequest{})
	for range 3 {
		if r := e.sh(sb.ID, "echo hi"); r.ExitCode != 0 {
			t.Fatalf("exec: %+v", r)
		}
	}
	// A connection out of a sandbox without a network: the egress proxy
	// refuses it.
	e.sh(sb.ID, "curl -s -m 5 http://198.51.100.7/ || true")
	// A create refused for money.
	status, body := e.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{MaxCostMicros: 1})
	if status != http.StatusBadRequest || errorCode(t, body) != "cost_cap" {
		t.Fatalf("create over maxCostMicros: %d %s", status, body)
	}
	time.Sleep(600 * time.Millisecond) // a few metering ticks

	after := e.scrapeMetrics()
	moved := func(name string, want float64, labels ...string) {
		t.Helper()
		b, a := max(metricValue(before, name, labels...), 0), metricValue(after, name, labels...)
		if a-b < want {
			t.Errorf("%s%v went from %v to %v; want it up by at least %v", name, labels, b, a, want)
		}
	}
	moved("withruntime_sandbox_creates_total", 1, "code", "201")
	moved("withruntime_sandbox_creates_total", 1, "code", "400")
	moved("withruntime_sandbox_create_duration_seconds", 1)
	moved("withruntime_forwarded_request_duration_seconds", 4, "route", "/v1/sandboxes/{id}/exec")
	moved("withruntime_http_requests_total", 4, "method", "POST", "route", "/v1/sandboxes/{id}/exec", "code", "200")
	moved("withruntime_metering_samples_total", 1, "result", "written")
	moved("withruntime_spending_refusals_total", 1, "reason", "cost_cap")
	moved("withruntime_egress_connections_total", 1, "decision", "denied")
	if v := metricValue(after, "withruntime_sandboxes", "state", "running"); v != 1 {
		t.Errorf("withruntime_sandboxes{state=running} = %v, want 1", v)
	}

	// Guarded like the API: no key is 401, a tenant key 403.
	var tenant api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "tenant", DailyLimitMicros: 1_000_000}, &tenant)
	if o := e.try("GET", "/metrics", nil, "Authorization", ""); o.status != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a key: %v, want 401", o)
	}
	if o := e.try("GET", "/metrics", nil, "Authorization", "Bearer "+tenant.Secret); o.status != http.StatusForbidden {
		t.Errorf("GET /metrics with a tenant key: %v, want 403", o)
	}

	// Request ids: echoed when given, made when not.
	req, _ := http.NewRequest("GET", e.http.URL+"/v1/health", nil)
	req.Header.Set("X-Request-Id", "trace-42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Request-Id"); got != "trace-42" {
		t.Errorf("X-Request-Id %q, want the caller's trace-42 echoed", got)
	}
	resp, err = http.Get(e.http.URL + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(got, "req_") {
		t.Errorf("X-Request-Id %q, want one the server made (req_...)", got)
	}
}
