package itest

// Bad input: each must get a clear 4xx whose body is a JSON error with a
// code and a message, and the server must keep serving afterwards.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// expectError sends a request that must fail with status and code; the body
// must be a JSON error with a message.
func (e *env) expectError(status int, code, method, path string, body any, hdr ...string) {
	e.t.Helper()
	got, data := e.do(method, path, body, hdr...)
	e.checkErrorBody(method+" "+path, got, data, status, code)
}

func (e *env) checkErrorBody(name string, got int, data []byte, status int, code string) {
	e.t.Helper()
	var eb agentapi.ErrorBody
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
		e.t.Errorf("%s: status %d, not a JSON error body: %q", name, got, data)
		return
	}
	if got != status || eb.Error.Code != code {
		e.t.Errorf("%s: %d %s (%s), want %d %s", name, got, eb.Error.Code, eb.Error.Message, status, code)
	}
}

// assertHealthy checks that the server still answers and runs commands.
func (e *env) assertHealthy(id string) {
	e.t.Helper()
	e.must(http.StatusOK, "GET", "/v1/health", nil, nil)
	if res := e.sh(id, "echo ok"); res.ExitCode != 0 || res.Stdout != "ok\n" {
		e.t.Fatalf("exec after bad input: %+v", res)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	short := e.create(api.CreateSandboxRequest{TimeoutSeconds: 1}) // its lease ends during the test
	sb := e.create(api.CreateSandboxRequest{})
	sbx := "/v1/sandboxes/" + sb.ID

	// Creating sandboxes.
	e.expectError(400, "bad_request", "POST", "/v1/sandboxes", `{"template": "no-such-template"}`)
	e.expectError(400, "bad_request", "POST", "/v1/sandboxes", `{"template": "../../etc"}`)
	e.expectError(400, "bad_request", "POST", "/v1/sandboxes", `{"timeoutSeconds": -1}`)
	e.expectError(400, "bad_request", "POST", "/v1/sandboxes", `{"timeoutSeconds": 86401}`)
	e.expectError(400, "bad_request", "POST", "/v1/sandboxes", `{"timeoutSeconds": 9223372036854775807}`)
	e.expectError(400, "bad_request", "POST", "/v1/sandboxes", `{"timeoutSeconds": 1e30}`)
	e.expectError(400, "bad_request", "POST", "/v1/sandboxes", `{"timeoutSeconds": "60"}`)
	e.expectError(400, "bad_request", "POST", "/v1/sandboxes", `{"timeoutSeconds": 60`)
	e.expectError(400, "bad_request", "POST", "/v1/sandboxes", `not json`)
	e.expectError(400, "bad_request", "POST", "/v1/sandboxes", `{} {}`)
	e.expectError(400, "bad_request", "POST", "/v1/sandboxes", `{"timeout": 60}`)
	e.expectError(400, "bad_request", "POST", "/v1/sandboxes", `{"memoryMiB": 1}`)
	e.expectError(400, "bad_request", "POST", "/v1/sandboxes", `{"cpu": 1000}`)
	e.expectError(413, "too_large", "POST", "/v1/sandboxes", `{"metadata": {"a": "`+strings.Repeat("x", 2<<20)+`"}}`)
	e.expectError(400, "bad_request", "POST", sbx+"/timeout", `{"timeoutSeconds": -1}`)
	e.expectError(400, "bad_request", "POST", sbx+"/timeout", `{"timeoutSeconds": 100000000}`)
	e.expectError(400, "bad_request", "POST", sbx+"/timeout", `{"timeoutSecs": 10}`)

	// Exec: the agent refuses unknown fields and bad values too.
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"cmd": "ls"}`)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"command": "ls", "extra": 1}`)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"command": "ls"`)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", ``)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"command": "ls", "timeoutSeconds": -5}`)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"command": "ls", "timeoutSeconds": 1e300}`)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"command": "ls", "argv": ["ls"]}`)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"command": "ls", "maxOutputBytes": 1000000000}`)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"command": "ls", "user": "nobody-here"}`)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"command": "ls", "cwd": "/no/such/dir"}`)
	e.expectError(400, "bad_request", "POST", sbx+"/processes", `{"command": "ls", "bogus": true}`)
	var bg agentapi.Process
	e.must(201, "POST", sbx+"/processes", agentapi.ExecRequest{Command: "sleep 300"}, &bg)
	e.expectError(400, "bad_request", "POST", fmt.Sprintf("%s/processes/%d/kill", sbx, bg.Pid), `{"sig": "TERM"}`)
	e.expectError(400, "bad_request", "POST", fmt.Sprintf("%s/processes/%d/kill", sbx, bg.Pid), `{"signal": "SIGNOPE"}`)
	e.expectError(400, "bad_request", "POST", fmt.Sprintf("%s/processes/%d/wait?timeoutSeconds=soon", sbx, bg.Pid), nil)
	e.expectError(408, "timeout", "POST", fmt.Sprintf("%s/processes/%d/wait?timeoutSeconds=0.1", sbx, bg.Pid), nil)
	e.expectError(400, "bad_request", "GET", sbx+"/processes/-3", nil)

	// NUL bytes in paths, in the query and in JSON bodies.
	e.expectError(400, "bad_request", "GET", sbx+"/files?path=a%00b", nil)
	e.expectError(400, "bad_request", "PUT", sbx+"/files?path=a%00b", "data")
	e.expectError(400, "bad_request", "DELETE", sbx+"/files?path=a%00b", nil)
	e.expectError(400, "bad_request", "GET", sbx+"/files/stat?path=%00", nil)
	e.expectError(400, "bad_request", "GET", sbx+"/files/list?path=a%00", nil)
	e.expectError(400, "bad_request", "POST", sbx+"/files/mkdir", `{"path": "a\u0000b"}`)
	e.expectError(400, "bad_request", "POST", sbx+"/files/rename", `{"from": "a", "to": "b\u0000"}`)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"command": "ls", "cwd": "a\u0000"}`)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"command": "echo \u0000"}`)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"argv": ["echo", "\u0000"]}`)
	e.expectError(400, "bad_request", "POST", sbx+"/exec", `{"command": "ls", "env": {"A": "\u0000"}}`)

	// Unknown sandboxes, processes and keys.
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/sandboxes/sbx_nope", ""},
		{"DELETE", "/v1/sandboxes/sbx_nope", ""},
		{"POST", "/v1/sandboxes/sbx_nope/timeout", `{"timeoutSeconds": 60}`},
		{"POST", "/v1/sandboxes/sbx_nope/exec", `{"command": "true"}`},
		{"GET", "/v1/sandboxes/sbx_nope/files?path=x", ""},
		{"GET", "/v1/sandboxes/sbx_nope/processes", ""},
		{"GET", sbx + "/processes/4242", ""},
		{"DELETE", "/v1/keys/key_nope", ""},
	} {
		e.expectError(404, "not_found", r.method, r.path, r.body)
	}

	// Keys.
	e.expectError(401, "unauthorized", "GET", "/v1/sandboxes", nil, "Authorization", "")
	e.expectError(401, "unauthorized", "GET", "/v1/sandboxes", nil, "Authorization", "Bearer ")
	e.expectError(401, "unauthorized", "GET", "/v1/sandboxes", nil, "Authorization", "Bearer wr_notarealkeyatall")
	e.expectError(401, "unauthorized", "GET", "/v1/sandboxes", nil, "Authorization", "Basic dXNlcjpwYXNz")
	e.expectError(401, "unauthorized", "POST", sbx+"/exec", `{"command": "true"}`, "Authorization", "Bearer wr_x")
	e.expectError(401, "unauthorized", "PUT", sbx+"/files?path=x", "data", "Authorization", "")
	var k api.Key
	e.must(201, "POST", "/v1/keys", api.CreateKeyRequest{Name: "short-lived"}, &k)
	e.must(204, "DELETE", "/v1/keys/"+k.ID, nil, nil)
	e.expectError(401, "unauthorized", "GET", "/v1/sandboxes", nil, "Authorization", "Bearer "+k.Secret)
	e.expectError(400, "bad_request", "POST", "/v1/keys", `{"name": ""}`)
	e.expectError(400, "bad_request", "POST", "/v1/keys", `{"name": "`+strings.Repeat("n", 101)+`"}`)

	// Routes that do not exist, and known routes with the wrong method.
	e.expectError(404, "not_found", "GET", "/v1/nope", nil)
	e.expectError(404, "not_found", "GET", "/", nil)
	e.expectError(404, "not_found", "POST", sbx+"/nope", nil)
	e.expectError(404, "not_found", "GET", sbx+"/files/nope", nil)
	for _, r := range []struct{ method, path, allow string }{
		{"POST", "/v1/health", "GET, HEAD"},
		{"PUT", "/v1/sandboxes", "POST, GET, HEAD"},
		{"POST", sbx, "GET, DELETE, HEAD"},
		{"GET", sbx + "/timeout", "POST"},
		{"GET", sbx + "/exec", "POST"},
		{"DELETE", sbx + "/processes", "POST, GET, HEAD"},
		{"PUT", sbx + "/processes/1/wait", "POST"},
		{"POST", sbx + "/files", "GET, PUT, DELETE, HEAD"},
		{"PUT", sbx + "/files/list", "GET, HEAD"},
		{"GET", sbx + "/files/mkdir", "POST"},
		{"PATCH", "/v1/keys/key_x", "DELETE"},
		{"PUT", "/v1/templates", "GET, POST, HEAD"},
	} {
		req, _ := http.NewRequest(r.method, e.http.URL+r.path, nil)
		req.Header.Set("Authorization", "Bearer "+e.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e.checkErrorBody(r.method+" "+r.path, resp.StatusCode, data, 405, api.CodeMethodNotAllowed)
		if got := resp.Header.Get("Allow"); got != r.allow {
			t.Errorf("%s %s: Allow %q, want %q", r.method, r.path, got, r.allow)
		}
	}

	e.assertHealthy(sb.ID)

	// A destroyed sandbox, and one whose lease ended.
	e.must(204, "DELETE", sbx, nil, nil)
	e.expectError(410, "sandbox_stopped", "POST", sbx+"/exec", `{"command": "true"}`)
	e.expectError(410, "sandbox_stopped", "GET", sbx+"/files?path=x", nil)
	e.expectError(410, "sandbox_stopped", "POST", sbx+"/timeout", `{"timeoutSeconds": 60}`)
	waitFor(t, 10*time.Second, "the 1-second lease to end", func() bool {
		var got api.Sandbox
		e.must(200, "GET", "/v1/sandboxes/"+short.ID, nil, &got)
		return got.State == "stopped"
	})
	e.expectError(410, "lease_ended", "POST", "/v1/sandboxes/"+short.ID+"/exec", `{"command": "true"}`)

	after := e.create(api.CreateSandboxRequest{})
	e.assertHealthy(after.ID)
}

// TestUploadOverCap sends uploads over a small cap, with a Content-Length
// and chunked: both are refused with 413 and leave nothing in the sandbox.
func TestUploadOverCap(t *testing.T) {
	e := newEnv(t, withMaxUpload(1<<20))
	sb := e.create(api.CreateSandboxRequest{})
	sbx := "/v1/sandboxes/" + sb.ID
	e.must(200, "POST", sbx+"/files/mkdir", agentapi.MkdirRequest{Path: "up"}, nil)

	// At the cap exactly: fine.
	e.must(200, "PUT", sbx+"/files?path=up/exact", make([]byte, 1<<20), nil)
	e.must(204, "DELETE", sbx+"/files?path=up/exact", nil, nil)

	// Declared by Content-Length.
	e.expectError(413, "too_large", "PUT", sbx+"/files?path=up/declared.bin", make([]byte, 2<<20))

	// Chunked: the cap is found while streaming.
	for _, path := range []string{"up/chunked.bin", "up/new/dir/chunked.bin"} {
		req, _ := http.NewRequest("PUT", e.http.URL+sbx+"/files?path="+path, io.LimitReader(zeroReader{}, 2<<20))
		req.Header.Set("Authorization", "Bearer "+e.key)
		if req.ContentLength != 0 {
			t.Fatalf("request is not chunked")
		}
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("chunked upload: %v", err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e.checkErrorBody("chunked PUT "+path, resp.StatusCode, data, 413, "too_large")
		if d := time.Since(start); d > 1500*time.Millisecond {
			t.Errorf("chunked PUT %s: the refusal took %s", path, d)
		}
	}

	// Nothing was left: no file, no temporary file, no created parents.
	waitFor(t, 10*time.Second, "the aborted uploads to be cleaned up", func() bool {
		return e.sh(sb.ID, "ls -A up").Stdout == ""
	})
	e.expectError(404, "not_found", "GET", sbx+"/files/stat?path=up/declared.bin", nil)
	e.expectError(404, "not_found", "GET", sbx+"/files/stat?path=up/chunked.bin", nil)
	e.assertHealthy(sb.ID)
}

// TestUploadDeclaredTooLarge declares a 2 GiB upload against the default
// cap (1.5 GiB): it is refused with 413 before the body is sent, both when
// the client waits for 100 Continue and when it does not.
func TestUploadDeclaredTooLarge(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	const size = 2 << 30
	for _, expect := range []bool{true, false} {
		src := &countingZeroReader{left: size}
		req, _ := http.NewRequest("PUT", e.http.URL+"/v1/sandboxes/"+sb.ID+"/files?path=huge.bin", src)
		req.ContentLength = size
		req.Header.Set("Authorization", "Bearer "+e.key)
		tr := &http.Transport{}
		if expect {
			req.Header.Set("Expect", "100-continue")
			tr.ExpectContinueTimeout = 10 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		resp, err := (&http.Client{Transport: tr}).Do(req.WithContext(ctx))
		if err != nil {
			cancel()
			t.Fatalf("expect=%v: %v (read %d bytes)", expect, err, src.read.Load())
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		tr.CloseIdleConnections()
		e.checkErrorBody(fmt.Sprintf("2 GiB PUT (expect=%v)", expect), resp.StatusCode, data, 413, "too_large")
		read := src.read.Load()
		if expect && read != 0 {
			t.Errorf("with Expect: 100-continue the client sent %d bytes of the body", read)
		}
		if read > 64<<20 {
			t.Errorf("expect=%v: %d bytes were read before the refusal", expect, read)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("expect=%v: the refusal took %s", expect, d)
		}
		t.Logf("expect=%v: %d bytes of the body were read", expect, read)
	}
	e.expectError(404, "not_found", "GET", "/v1/sandboxes/"+sb.ID+"/files/stat?path=huge.bin", nil)
	e.assertHealthy(sb.ID)
}

// zeroReader reads as an endless run of zero bytes.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// countingZeroReader produces left zero bytes lazily and counts what was read.
type countingZeroReader struct {
	left int64
	read atomic.Int64
}

func (c *countingZeroReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), c.left))
	clear(p[:n])
	c.left -= int64(n)
	c.read.Add(int64(n))
	return n, nil
}
