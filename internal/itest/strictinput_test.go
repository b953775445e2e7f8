package itest

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// TestStrictInputForwarded: the server checks what it forwards to a
// sandbox's agent, and strictly. encoding/json (the agent's decoder)
// matches member names without regard to case and keeps the last of two,
// so before, {"Command": ...} ran and {"command": "true", "COMMAND": ...}
// ran the second command; a wait of 1e30 seconds wrapped into a negative
// duration and answered "still running" at once.
func TestStrictInputForwarded(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	sbx := "/v1/sandboxes/" + sb.ID

	for _, body := range []string{
		`{"Command": "touch /tmp/pwned"}`,
		`{"command": "true", "COMMAND": "touch /tmp/pwned"}`,
		`{"command": "true", "command": "touch /tmp/pwned"}`,
		`{"argv": ["true"], "ARGV": ["touch", "/tmp/pwned"]}`,
	} {
		e.expectError(400, "bad_request", "POST", sbx+"/exec", body)
		e.expectError(400, "bad_request", "POST", sbx+"/processes", body)
	}
	if res := e.sh(sb.ID, "test -e /tmp/pwned && echo ran || echo refused"); res.Stdout != "refused\n" {
		t.Fatalf("a refused request ran in the sandbox: %+v", res)
	}

	var bg agentapi.Process
	e.must(201, "POST", sbx+"/processes", agentapi.ExecRequest{Command: "sleep 300"}, &bg)
	wait := fmt.Sprintf("%s/processes/%d/wait", sbx, bg.Pid)
	for _, q := range []string{"1e30", "9223372036854775807", "NaN", "-1"} {
		start := time.Now()
		status, data := e.do("POST", wait+"?timeoutSeconds="+q, nil)
		e.checkErrorBody("wait "+q, status, data, 400, "bad_request")
		if !strings.Contains(string(data), "1000000000") {
			t.Errorf("wait %s: the message does not name the maximum: %s", q, data)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("wait %s took %s", q, time.Since(start))
		}
	}
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"command": "true", "timeoutSeconds": 1e30}`)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"command": "true", "maxOutputBytes": 9223372036854775807}`)
	e.expectError(400, "bad_request", "POST", fmt.Sprintf("%s/processes/%d/kill", sbx, bg.Pid), `{"Signal": "SIGTERM"}`)
	e.expectError(400, "bad_request", "GET", sbx+"/files?path=a&path=b", nil)
	e.expectError(400, "bad_request", "GET", sbx+"/processes/1e3", nil)

	// The largest values are accepted, and the process still runs.
	if res := e.exec(sb.ID, agentapi.ExecRequest{Command: "echo ok", TimeoutSeconds: 1e9, MaxOutputBytes: agentapi.MaxMaxOutputBytes}); res.Stdout != "ok\n" {
		t.Fatalf("exec with the largest timeout: %+v", res)
	}
	e.expectError(408, "timeout", "POST", wait+"?timeoutSeconds=0.1", nil)

	// A checked body sent in chunks (no Content-Length) reaches the agent whole.
	var res agentapi.ExecResult
	e.must(200, "POST", sbx+"/exec", io.MultiReader(strings.NewReader(`{"command": "cat", `), strings.NewReader(`"stdin": "chunked"}`)), &res)
	if res.Stdout != "chunked" {
		t.Fatalf("a chunked exec body: %+v", res)
	}

	// A bare key is not a bearer token.
	e.expectError(401, "unauthorized", "POST", sbx+"/exec", `{"command": "true"}`, "Authorization", e.key)
	e.must(200, "POST", sbx+"/exec", `{"command": "true"}`, nil)
}
