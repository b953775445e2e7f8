package metrics

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	for _, mt := range fams[name].GetMetric() {
		ok := true
		for _, lp := range mt.GetLabel() {
			if want, set := labels[lp.GetName()]; set && want != lp.GetValue() {
				ok = false
			}
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

func TestRequestIDs(t *testing.T) {
	var logs bytes.Buffer
	m := New(Sources{}, slog.New(slog.NewTextHandler(&logs, nil)))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		if RequestID(r.Context()) == "" {
			t.Error("no request id in the handler's context")
		}
		w.WriteHeader(http.StatusCreated)
	})
	h := m.Middleware(mux)
	for _, tc := range []struct{ sent, want string }{
		{"abc-123_x.y:z", "abc-123_x.y:z"},        // a caller's id is echoed
		{"", ""},                                  // none: one is made
		{"bad id\r\nX-Evil: 1", ""},               // not a token: replaced
		{strings.Repeat("a", maxRequestID+1), ""}, // too long: replaced
	} {
		req := httptest.NewRequest("POST", "/v1/sandboxes", nil)
		if tc.sent != "" {
			req.Header.Set(RequestIDHeader, tc.sent)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		got := rec.Header().Get(RequestIDHeader)
		if tc.want != "" && got != tc.want {
			t.Errorf("sent %q: answered id %q, want it echoed", tc.sent, got)
		}
		if tc.want == "" && (!strings.HasPrefix(got, "req_") || len(got) != 28) {
			t.Errorf("sent %q: answered id %q, want a new req_ id", tc.sent, got)
		}
		if !strings.Contains(logs.String(), "id="+got) {
			t.Errorf("no log line with id %s in:\n%s", got, logs.String())
		}
	}
	fams := scrape(t, m)
	if v := value(fams, "withruntime_sandbox_creates_total", map[string]string{"code": "201"}); v != 4 {
		t.Errorf("creates_total{code=201} = %v, want 4", v)
	}
	if v := value(fams, "withruntime_sandbox_create_duration_seconds", nil); v != 4 {
		t.Errorf("create_duration_seconds count = %v, want 4", v)
	}
	if v := value(fams, "withruntime_http_requests_total", map[string]string{"route": "/v1/sandboxes", "method": "POST"}); v != 4 {
		t.Errorf("http_requests_total{route=/v1/sandboxes} = %v, want 4", v)
	}
}

func TestObservers(t *testing.T) {
	m := New(Sources{}, nil)
	m.Egress(false, 0, 0)
	m.Egress(true, 10, 20)
	m.MeterSample("written")
	m.CreateRefused("trial_used")
	fams := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"withruntime_egress_connections_total", map[string]string{"decision": "denied"}, 1},
		{"withruntime_egress_connections_total", map[string]string{"decision": "allowed"}, 1},
		{"withruntime_egress_bytes_total", map[string]string{"direction": "out"}, 10},
		{"withruntime_egress_bytes_total", map[string]string{"direction": "in"}, 20},
		{"withruntime_metering_samples_total", map[string]string{"result": "written"}, 1},
		{"withruntime_spending_refusals_total", map[string]string{"reason": "trial_used"}, 1},
		{"withruntime_spending_refusals_total", map[string]string{"reason": "daily_limit"}, 0},
	} {
		if v := value(fams, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	var nilM *Metrics // observers on a nil *Metrics do nothing
	nilM.Egress(true, 1, 1)
	nilM.MeterSample("error")
}

// TestLabelsAndFieldsBounded: a method outside the standard set is the
// label "other"; a request's field in a log line is cut on a UTF-8
// boundary, saying how much was left out.
func TestLabelsAndFieldsBounded(t *testing.T) {
	for m, want := range map[string]string{"GET": "GET", "PATCH": "PATCH", "get": "other", "PROPFIND": "other", strings.Repeat("X", 1<<20): "other"} {
		if got := MethodLabel(m); got != want {
			t.Errorf("MethodLabel(%.20q) = %q, want %q", m, got, want)
		}
	}
	if s := LogField("short"); s != "short" {
		t.Errorf("LogField(short) = %q", s)
	}
	long := strings.Repeat("é", MaxLogField) // 2 bytes each: the cut falls inside one at odd offsets
	got := LogField("x" + long)
	if got != "x"+long[:MaxLogField-2]+"...(258 more bytes)" || !utf8.ValidString(got) {
		t.Errorf("LogField cut to %q", got)
	}
}
