package e2b

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"withruntime.dev/runtime/internal/api"
)

// e2bMetric is one entry of GET /sandboxes/{id}/metrics as the SDKs read it.
type e2bMetric struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// metrics is GET /sandboxes/{id}/metrics?start=&end= (Unix seconds): the
// API's samples of the sandbox (GET /v1/sandboxes/{id}/metrics) in E2B's
// shape. The SDKs send whole seconds, so end covers the whole second it
// names. Runtime does not split memory into page cache (memCache is 0).
func (s *Server) metrics(w http.ResponseWriter, r *http.Request, as who) {
	id := r.PathValue("id")
	q := url.Values{}
	for _, p := range []struct {
		name, to string
		add      time.Duration
	}{{"start", "from", 0}, {"end", "to", time.Second - time.Nanosecond}} {
		v := r.URL.Query().Get(p.name)
		if v == "" {
			continue
		}
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil || sec < 0 || sec > 253402300799 {
			writeError(w, http.StatusBadRequest, "%s must be a Unix time in seconds; got %q", p.name, v)
			return
		}
		q.Set(p.to, time.Unix(sec, 0).Add(p.add).UTC().Format(time.RFC3339Nano))
	}
	if _, err := s.sandbox(r.Context(), as, id); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	path := "/v1/sandboxes/" + url.PathEscape(id) + "/metrics"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var ms api.SandboxMetrics
	if err := s.api.json(r.Context(), as, "GET", path, nil, &ms); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	out := make([]e2bMetric, 0, len(ms.Metrics))
	for _, m := range ms.Metrics {
		out = append(out, e2bMetric{Timestamp: m.At, TimestampUnix: m.At.Unix(), CPUCount: m.CPUCount,
			CPUUsedPct: m.CPUUsedPercent, MemUsed: m.MemoryUsedBytes, MemTotal: m.MemoryTotalBytes,
			DiskUsed: m.DiskUsedBytes, DiskTotal: m.DiskTotalBytes})
	}
	writeJSON(w, http.StatusOK, out)
}
