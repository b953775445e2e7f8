package itest

// GET /v1/sandboxes/{id}/metrics: the metering's samples of a sandbox, as
// the host measured them, kept while it runs.

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

func TestSandboxMetrics(t *testing.T) {
	e := newEnv(t, withMeterInterval(time.Second))
	start := time.Now().UTC()
	sb := e.create(api.CreateSandboxRequest{MemoryMiB: 512, DiskMiB: 1024})
	path := "/v1/sandboxes/" + sb.ID + "/metrics"

	// Busy for about 3 s, and 64 MiB written to the disk.
	var res agentapi.ExecResult
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{
		Command: "head -c 67108864 /dev/urandom > /workspace/blob && timeout 3 sh -c 'while :; do :; done'; true"}, &res)
	time.Sleep(1500 * time.Millisecond)

	var ms api.SandboxMetrics
	e.must(http.StatusOK, "GET", path, nil, &ms)
	if len(ms.Metrics) < 3 {
		t.Fatalf("%d samples after 4 s at a 1 s interval: %+v", len(ms.Metrics), ms.Metrics)
	}
	busiest := 0.0
	for i, m := range ms.Metrics {
		if m.CPUCount != 1 || m.MemoryTotalBytes != 512<<20 || m.DiskTotalBytes != 1024<<20 || m.MemoryUsedBytes <= 0 {
			t.Fatalf("sample %d: %+v", i, m)
		}
		if m.CPUUsedPercent < 0 || m.CPUUsedPercent > 100 || m.At.Before(start.Add(-time.Second)) {
			t.Fatalf("sample %d: %+v", i, m)
		}
		if i > 0 && !m.At.After(ms.Metrics[i-1].At) {
			t.Fatalf("samples out of order: %v then %v", ms.Metrics[i-1].At, m.At)
		}
		busiest = max(busiest, m.CPUUsedPercent)
	}
	if busiest < 50 {
		t.Errorf("the busiest sample used %.1f%% CPU during a 3 s busy loop", busiest)
	}
	last := ms.Metrics[len(ms.Metrics)-1]
	if last.DiskUsedBytes < 60<<20 {
		t.Errorf("disk used %d bytes after writing 64 MiB", last.DiskUsedBytes)
	}

	// A window: the samples in it only; one before the sandbox: none.
	mid := ms.Metrics[len(ms.Metrics)/2].At
	var after api.SandboxMetrics
	e.must(http.StatusOK, "GET", path+"?from="+url.QueryEscape(mid.Format(time.RFC3339Nano)), nil, &after)
	if len(after.Metrics) == 0 || after.Metrics[0].At.Before(mid) {
		t.Fatalf("from %v: %+v", mid, after.Metrics)
	}
	var before api.SandboxMetrics
	e.must(http.StatusOK, "GET", path+"?to="+url.QueryEscape(start.Add(-time.Hour).Format(time.RFC3339)), nil, &before)
	if len(before.Metrics) != 0 {
		t.Fatalf("an hour before the sandbox: %+v", before.Metrics)
	}
	if st, body := e.do("GET", path+"?from=yesterday", nil); st != http.StatusBadRequest {
		t.Fatalf("a bad from: %d %s", st, body)
	}

	// Stopped: no samples.
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
	var gone api.SandboxMetrics
	e.must(http.StatusOK, "GET", path, nil, &gone)
	if len(gone.Metrics) != 0 {
		t.Fatalf("a stopped sandbox has %d samples", len(gone.Metrics))
	}
}
