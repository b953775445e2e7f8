package itest

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// TestConcurrentSandboxes: 20 sandboxes created at once, each runs a
// command and is deleted, all at once too. Every call succeeds and nothing
// is left on the host: no runsc container, directory, cgroup or mount.
func TestConcurrentSandboxes(t *testing.T) {
	const n = 20
	e := newEnv(t)
	start := time.Now()
	var wg sync.WaitGroup
	ids := make([]string, n)
	errs := make([]string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := e.try("POST", "/v1/sandboxes", api.CreateSandboxRequest{TimeoutSeconds: 120})
			var sb api.Sandbox
			if o.err != nil || o.status != http.StatusCreated || json.Unmarshal(o.body, &sb) != nil {
				errs[i] = "create: " + o.String()
				return
			}
			ids[i] = sb.ID
			o = e.try("POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Command: "echo ok"})
			var res agentapi.ExecResult
			if o.err != nil || o.status != http.StatusOK || json.Unmarshal(o.body, &res) != nil || res.Stdout != "ok\n" {
				errs[i] = "exec: " + o.String()
				return
			}
			if o = e.try("DELETE", "/v1/sandboxes/"+sb.ID, nil); o.err != nil || o.status != http.StatusNoContent {
				errs[i] = "delete: " + o.String()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d sandboxes created, used and deleted concurrently in %s", n, time.Since(start).Round(time.Millisecond))
	for i, msg := range errs {
		if msg != "" {
			t.Errorf("sandbox %d (%s): %s", i, ids[i], msg)
		}
	}
	for _, id := range ids {
		if id != "" {
			e.assertGone(id)
		}
	}
	var list api.SandboxList
	e.must(http.StatusOK, "GET", "/v1/sandboxes?state=running", nil, &list)
	if len(list.Sandboxes) != 0 {
		t.Errorf("still running: %+v", list.Sandboxes)
	}
}
