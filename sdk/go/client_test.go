package withruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNewClientConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("HOME", home)
	t.Setenv(EnvURL, "")
	t.Setenv(EnvAPIKey, "")

	_, err := NewClient()
	if !errors.Is(err, ErrNotConfigured) || !strings.Contains(err.Error(), "WITHRUNTIME_URL") || !strings.Contains(err.Error(), "withruntime serve") {
		t.Fatalf("unconfigured: %v", err)
	}

	path := filepath.Join(home, ConfigFile)
	os.MkdirAll(filepath.Dir(path), 0o700)
	os.WriteFile(path, []byte(`{"url": "http://file:1/", "apiKey": "wr_file"}`), 0o600)
	c, err := NewClient()
	if err != nil || c.baseURL != "http://file:1" || c.apiKey != "wr_file" {
		t.Fatalf("config file: %+v %v", c, err)
	}

	t.Setenv(EnvURL, "http://env:2")
	t.Setenv(EnvAPIKey, "wr_env")
	c, err = NewClient()
	if err != nil || c.baseURL != "http://env:2" || c.apiKey != "wr_env" {
		t.Fatalf("environment: %+v %v", c, err)
	}

	c, err = NewClient(WithBaseURL("https://opt:3"), WithAPIKey("wr_opt"))
	if err != nil || c.baseURL != "https://opt:3" || c.apiKey != "wr_opt" {
		t.Fatalf("options: %+v %v", c, err)
	}

	if _, err := NewClient(WithBaseURL("localhost:7780")); err == nil {
		t.Fatal("a URL without a scheme was accepted")
	}
	t.Setenv(EnvURL, "")
	os.WriteFile(path, []byte(`{"url": `), 0o600)
	if _, err := NewClient(); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("bad config file: %v", err)
	}
}

// fake serves canned answers by "METHOD PATH".
func fake(t *testing.T, routes map[string]func(w http.ResponseWriter, r *http.Request)) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer wr_test" {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"code":"unauthorized","message":"bad key"}}`)
			return
		}
		h, ok := routes[r.Method+" "+r.URL.Path]
		if !ok {
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"error":{"code":"not_found","message":"no route %s"}}`, r.URL.Path)
			return
		}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(WithBaseURL(srv.URL), WithAPIKey("wr_test"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func answer(status int, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	deletes := 0
	c := fake(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /v1/sandboxes/gone":      answer(200, `{"id":"gone","state":"stopped","endReason":"lease_ended"}`),
		"GET /v1/sandboxes/sb1":       answer(200, `{"id":"sb1","state":"running"}`),
		"POST /v1/sandboxes/sb1/exec": answer(410, `{"error":{"code":"lease_ended","message":"lease ended"}}`),
		"DELETE /v1/sandboxes/sb1": func(w http.ResponseWriter, r *http.Request) {
			deletes++
			w.WriteHeader(204)
		},
		"POST /v1/sandboxes/sb1/timeout": answer(418, `teapot`),
	})
	ctx := context.Background()
	_, err := c.Connect(ctx, "nope")
	var ae *APIError
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &ae) || ae.Status != 404 || ae.Code != "not_found" {
		t.Fatalf("connect to a missing sandbox: %v", err)
	}
	if _, err := c.Connect(ctx, "gone"); !errors.Is(err, ErrLeaseEnded) || errors.Is(err, ErrNotFound) {
		t.Fatalf("connect to a stopped sandbox: %v", err)
	}
	sbx, err := c.Connect(ctx, "sb1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sbx.Run(ctx, "true"); !errors.Is(err, ErrLeaseEnded) {
		t.Fatalf("exec after lease end: %v", err)
	}
	if err := sbx.SetTimeout(ctx, 60); !errors.As(err, &ae) || ae.Status != 418 || ae.Message != "teapot" {
		t.Fatalf("non-JSON error: %v", err)
	}
	if err := sbx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sbx.Close(); err != nil || deletes != 1 {
		t.Fatalf("second close: %v, %d deletes", err, deletes)
	}
	bad, _ := NewClient(WithBaseURL(c.baseURL), WithAPIKey("wr_wrong"))
	if _, err := bad.List(ctx, ListFilter{}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("wrong key: %v", err)
	}
}

func TestExecStreamEvents(t *testing.T) {
	c := fake(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /v1/sandboxes/ok/exec": answer(200, `{"type":"start","pid":7}
{"type":"stdout","data":"4"}
{"type":"stdout","data":"\ufffd","lossy":true,"dataBase64":"/w=="}
{"type":"stderr","data":"warn\n"}
{"type":"exit","result":{"exitCode":3,"stdout":"","stderr":""}}
`),
		"POST /v1/sandboxes/broken/exec": answer(200, `{"type":"start","pid":7}
{"type":"stdout","data":"4"}
`),
		"POST /v1/sandboxes/fails/exec": answer(200, `{"type":"error","error":{"code":"bad_request","message":"no such cwd"}}
`),
	})
	ctx := context.Background()
	var out, errb strings.Builder
	res, err := (&Sandbox{c: c, id: "ok"}).ExecTo(ctx, ExecRequest{Command: "x"}, &out, &errb)
	if err != nil || res.ExitCode != 3 || out.String() != "4\xff" || errb.String() != "warn\n" {
		t.Fatalf("ExecTo: %+v %v %q %q", res, err, out.String(), errb.String())
	}
	var types []string
	for ev, err := range (&Sandbox{c: c, id: "broken"}).ExecStream(ctx, ExecRequest{Command: "x"}) {
		if err != nil {
			types = append(types, "err")
			break
		}
		types = append(types, ev.Type)
	}
	if strings.Join(types, ",") != "start,stdout,err" {
		t.Fatalf("broken stream: %v", types)
	}
	_, err = (&Sandbox{c: c, id: "fails"}).ExecTo(ctx, ExecRequest{Command: "x"}, nil, nil)
	if !errors.Is(err, ErrBadRequest) {
		t.Fatalf("error event: %v", err)
	}
	// Breaking out of the loop early is fine.
	for range (&Sandbox{c: c, id: "ok"}).ExecStream(ctx, ExecRequest{Command: "x"}) {
		break
	}
}

// Usage and the key methods send what the API expects; the real server is
// exercised in internal/itest/sdk_usage_test.go.
func TestUsageAndKeysRequests(t *testing.T) {
	var queries []string
	var created CreateKeyRequest
	revoked := ""
	c := fake(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /v1/usage": func(w http.ResponseWriter, r *http.Request) {
			queries = append(queries, r.URL.RawQuery)
			io.WriteString(w, `{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z","groupBy":"sandbox",
				"prices":{"cpuMicrosPerVcpuHour":25000,"memoryMicrosPerGibHour":7500,"cpuFloorVcpu":0.05},
				"rows":[{"group":"sbx_1","cpuSeconds":1.5,"overheadCpuSeconds":0.1,"billedCpuSeconds":1.5,"gibSeconds":0.25,"costMicros":12}],
				"total":{"group":"total","cpuSeconds":1.5,"overheadCpuSeconds":0.1,"billedCpuSeconds":1.5,"gibSeconds":0.25,"costMicros":12}}`)
		},
		"POST /v1/keys": func(w http.ResponseWriter, r *http.Request) {
			json.NewDecoder(r.Body).Decode(&created)
			w.WriteHeader(201)
			io.WriteString(w, `{"id":"key_1","name":"ci","prefix":"wr_abcdef","createdAt":"2026-01-01T00:00:00Z","secret":"wr_abcdefsecret","dailyLimitMicros":5000}`)
		},
		"DELETE /v1/keys/key_1": func(w http.ResponseWriter, r *http.Request) {
			revoked = r.URL.EscapedPath()
			w.WriteHeader(204)
		},
	})
	ctx := context.Background()
	rows, err := c.Usage(ctx, UsageQuery{})
	if err != nil || len(rows) != 1 || rows[0].Group != "sbx_1" || rows[0].CostMicros != 12 || rows[0].CPUSeconds != 1.5 || rows[0].OverheadCPUSeconds != 0.1 {
		t.Fatalf("usage: %+v %v", rows, err)
	}
	from := time.Date(2026, 1, 1, 1, 0, 0, 0, time.FixedZone("CET", 3600))
	rep, err := c.UsageReport(ctx, UsageQuery{From: from, To: from.Add(36 * time.Hour), GroupBy: GroupBySandbox})
	if err != nil || rep.Total.Group != "total" || rep.Prices.CPUFloorVCPU != 0.05 {
		t.Fatalf("usage report: %+v %v", rep, err)
	}
	want := []string{"", "from=2026-01-01T00%3A00%3A00Z&groupBy=sandbox&to=2026-01-02T12%3A00%3A00Z"}
	if strings.Join(queries, "|") != strings.Join(want, "|") {
		t.Fatalf("usage queries: %q, want %q", queries, want)
	}
	k, err := c.CreateKey(ctx, "ci", 5000)
	if err != nil || k.Secret != "wr_abcdefsecret" || k.DailyLimitMicros != 5000 || created != (CreateKeyRequest{Name: "ci", DailyLimitMicros: 5000}) {
		t.Fatalf("create key: %+v %v (sent %+v)", k, err, created)
	}
	if err := c.RevokeKey(ctx, "key_1"); err != nil || revoked != "/v1/keys/key_1" {
		t.Fatalf("revoke: %v %q", err, revoked)
	}
	if err := c.RevokeKey(ctx, "key/2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke an unknown key: %v", err)
	}
}

// endless answers 200 with a JSON string that never ends, as a forged agent
// inside a sandbox may, and counts what it wrote.
func endless(prefix string, wrote *int64) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		n, _ := io.WriteString(w, prefix)
		*wrote = int64(n)
		chunk := []byte(strings.Repeat("A", 64<<10))
		for {
			n, err := w.Write(chunk)
			*wrote += int64(n)
			if err != nil {
				return
			}
		}
	}
}

// TestAgentAnswersAreBounded: answers that come from inside a sandbox (file
// lists and descriptions, exec results) are read only up to a bound, so
// that a replaced agent cannot take a shared client's memory (the MCP
// server holds many sessions' sandboxes).
func TestAgentAnswersAreBounded(t *testing.T) {
	defer func(a, i, l int64) { maxAgentAnswerBytes, maxInfoBytes, maxListPageBytes = a, i, l }(maxAgentAnswerBytes, maxInfoBytes, maxListPageBytes)
	maxAgentAnswerBytes, maxInfoBytes, maxListPageBytes = 4<<20, 64<<10, 1<<20
	var list, stat, exec int64
	c := fake(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /v1/sandboxes/sb1":            answer(200, `{"id":"sb1","state":"running"}`),
		"GET /v1/sandboxes/sb1/files/list": endless(`{"path":"/workspace","entries":[{"name":"`, &list),
		"GET /v1/sandboxes/sb1/files/stat": endless(`{"path":"`, &stat),
		"POST /v1/sandboxes/sb1/exec":      endless(`{"exitCode":0,"stdout":"`, &exec),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sbx, err := c.Connect(ctx, "sb1")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error, wrote *int64, max int64) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "more than Runtime's agent ever sends") {
			t.Errorf("%s of an endless answer: %v", what, err)
		}
		// The server may have written what the connection buffers.
		if *wrote > max+(8<<20) {
			t.Errorf("%s read %d bytes of an endless answer, bound %d", what, *wrote, max)
		}
	}
	_, err = sbx.Files().List(ctx, "/workspace", 1)
	check("List", err, &list, maxListPageBytes)
	_, err = sbx.Files().Stat(ctx, "/workspace/x")
	check("Stat", err, &stat, maxInfoBytes)
	_, err = sbx.Exec(ctx, ExecRequest{Command: "true"})
	check("Exec", err, &exec, maxAgentAnswerBytes)
}

// TestCreateAndExec: the one-shot sends the first command in the create
// (one request, a JSON answer), returns its result, and destroys the
// sandbox; a command that could not run is an error with the sandbox.
func TestCreateAndExec(t *testing.T) {
	var got CreateSandboxRequest
	deleted := []string{}
	c := fake(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /v1/sandboxes": func(w http.ResponseWriter, r *http.Request) {
			got = CreateSandboxRequest{}
			if err := json.NewDecoder(r.Body).Decode(&got); err != nil || r.Header.Get("Accept") != "application/json" {
				t.Errorf("create: %v, Accept %q", err, r.Header.Get("Accept"))
			}
			w.WriteHeader(201)
			if got.Exec != nil && got.Exec.Cwd == "/nowhere" {
				io.WriteString(w, `{"sandbox":{"id":"sb2","state":"running"},"error":{"code":"bad_request","message":"cwd /nowhere does not exist"}}`)
				return
			}
			io.WriteString(w, `{"sandbox":{"id":"sb1","state":"running","template":"base"},"result":{"exitCode":3,"stdout":"42\n","stderr":"","stdoutTruncated":false,"stderrTruncated":false,"stdoutBytes":3,"stderrBytes":0,"timedOut":false,"durationMs":5}}`)
		},
		"DELETE /v1/sandboxes/sb1": func(w http.ResponseWriter, r *http.Request) { deleted = append(deleted, "sb1"); w.WriteHeader(204) },
		"DELETE /v1/sandboxes/sb2": func(w http.ResponseWriter, r *http.Request) { deleted = append(deleted, "sb2"); w.WriteHeader(204) },
	})
	ctx := context.Background()
	res, err := c.RunOnce(ctx, Options{Template: "base", Env: map[string]string{"A": "1"}}, ExecRequest{Argv: []string{"python3", "-c", "print(42)"}})
	if err != nil || res.ExitCode != 3 || res.Stdout != "42\n" {
		t.Fatalf("RunOnce: %+v %v", res, err)
	}
	if got.Exec == nil || got.Exec.Argv[0] != "python3" || got.Template != "base" || got.Env["A"] != "1" {
		t.Errorf("the create sent: %+v", got)
	}
	if len(deleted) != 1 || deleted[0] != "sb1" {
		t.Errorf("RunOnce did not destroy its sandbox: %v", deleted)
	}

	sbx, _, err := c.CreateAndExec(ctx, Options{}, ExecRequest{Command: "true", Cwd: "/nowhere"})
	if sbx == nil || sbx.ID() != "sb2" || !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "/nowhere") {
		t.Fatalf("a command that could not run: %v %v", sbx, err)
	}
	if len(deleted) != 1 {
		t.Errorf("CreateAndExec destroyed the sandbox: %v", deleted)
	}
	if _, err := c.RunOnce(ctx, Options{}, ExecRequest{Command: "true", Cwd: "/nowhere"}); !errors.Is(err, ErrBadRequest) || len(deleted) != 2 {
		t.Errorf("RunOnce of a command that could not run: %v, deleted %v", err, deleted)
	}
}

// TestCreateAndExecRefused: a create refused (bad input) returns no sandbox.
func TestCreateAndExecRefused(t *testing.T) {
	c := fake(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /v1/sandboxes": answer(400, `{"error":{"code":"bad_request","message":"exec: set exactly one of \"command\" or \"argv\""}}`),
	})
	sbx, _, err := c.CreateAndExec(context.Background(), Options{}, ExecRequest{})
	if sbx != nil || !errors.Is(err, ErrBadRequest) {
		t.Fatalf("refused create: %v %v", sbx, err)
	}
}
