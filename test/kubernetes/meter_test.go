package kubernetes_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestMeteringFromPods: through `serve --driver kubernetes`, a sandbox's
// busy loop is billed: the ledger's CPU comes from the pod's agent (the
// fake node runs it as host processes; a real node under gVisor).
func TestMeteringFromPods(t *testing.T) {
	s := startServer(t, "--meter-interval", "1s")
	api := "http://" + s.addr
	id, _ := create(t, s, `{"template": "base"}`)
	status, b := call(t, "POST", api+"/v1/sandboxes/"+id+"/exec", s.key, `{"command": "timeout 3 sh -c 'while :; do :; done'; true"}`)
	if status != http.StatusOK {
		t.Fatalf("exec: %d %s", status, b)
	}
	if status, b := call(t, "DELETE", api+"/v1/sandboxes/"+id, s.key, ""); status != http.StatusOK && status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, b)
	}
	var report struct {
		Rows []struct {
			Group      string  `json:"group"`
			CPUSeconds float64 `json:"cpuSeconds"`
			GiBSeconds float64 `json:"gibSeconds"`
		} `json:"rows"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, b = call(t, "GET", api+"/v1/usage?groupBy=sandbox", s.key, "")
		if status != http.StatusOK {
			t.Fatalf("usage: %d %s", status, b)
		}
		if err := json.Unmarshal(b, &report); err != nil {
			t.Fatal(err)
		}
		if len(report.Rows) == 1 && report.Rows[0].CPUSeconds > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("usage: %s", b)
	if len(report.Rows) != 1 || report.Rows[0].Group != id {
		t.Fatalf("usage rows %+v, want one for %s", report.Rows, id)
	}
	// Two shared cores: at least half of the loop's 3 s; at most what one
	// vCPU allows over the sandbox's life.
	if r := report.Rows[0]; r.CPUSeconds < 1.5 || r.CPUSeconds > 8 || r.GiBSeconds <= 0 {
		t.Errorf("billed %.2f CPU seconds and %.3f GiB-seconds for a 3 s busy loop, want about 3 and some memory", r.CPUSeconds, r.GiBSeconds)
	}
	s.stop()
	assertNothingLeft(t, s)
}
