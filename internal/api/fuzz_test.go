package api

// Fuzzing of every request decoder and of the HTTP API end to end. The
// seeds (the attacks of TestStrictBodies, TestNumbersPastMaxima and
// TestNamesWithoutControls, and valid requests) run with every `go test`;
// scripts/test.sh fuzzes each target for a bounded time:
//
//	go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime 20s ./internal/api

import (
	stdjson "encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/sandbox"
)

// badBodies are the seeds shared by the decoder and API targets.
var badBodies = []string{
	``, `null`, ` null `, `[]`, `"x"`, `1`, `true`, `{}`, `{} {}`, `{"a":`, "{\"command\": \"\xff\"}",
	`{"Command": "ls"}`, `{"command": "ls", "command": "rm -rf /"}`, `{"COMMAND": "ls", "argv": ["ls"]}`,
	`{"command": "ls", "timeoutSeconds": 1e30}`, `{"command": "ls", "timeoutSeconds": 1e400}`,
	`{"command": "ls", "timeoutSeconds": -1e-300}`, `{"command": "ls", "maxOutputBytes": 9223372036854775807}`,
	`{"command": "ls\u0000", "env": {"A\u0000": "\u0000"}, "user": "root\n", "cwd": "\u0000"}`,
	`{"argv": ["ls", "\ud800"]}`, `{"argv": []}`, `{"argv": [""]}`, `{"argv": null, "command": null}`,
	`{"timeoutSeconds": 1e30}`, `{"timeoutSeconds": 9223372036854775807}`, `{"timeoutSeconds": -9223372036854775808}`,
	`{"TIMEOUTSECONDS": 5}`, `{"timeoutSeconds": 1.5}`, `{"timeoutSeconds": "60"}`, `{"timeoutSeconds": null}`,
	`{"cpu": 1e400}`, `{"cpu": -0.0}`, `{"memoryMiB": 1e19}`, `{"diskMiB": -1}`, `{"maxCostMicros": 9223372036854775807}`,
	`{"template": "../../etc"}`, `{"template": "base\u0000"}`, `{"metadata": {"a\u0001": "b", "a": "\u0000"}}`,
	`{"env": {"A": "1", "A": "2"}}`, `{"env": {"=": ""}}`, `{"env": {"": "x"}}`, `{"secrets": ["A\r"]}`,
	`{"network": {"internet": true, "Internet": false}}`, `{"network": {"allow": ["*.example.com", "10.0.0.0/8\u0000"]}}`,
	`{"network": null}`, `{"network": {"allow": [1]}}`, `{"name": "a\u0000b"}`, `{"name": "ci", "dailyLimitMicros": 1e30}`,
	`{"name": "ci", "dailyLimitMicros": 9223372036854775807}`, `{"Name": "ci"}`, `{"name": "x", "value": "v", "hosts": ["h"]}`,
	`{"signal": "TERM\u0000"}`, `{"Signal": "KILL"}`, `{"path": "a\u0000"}`, `{"from": "a", "to": "b\u0000"}`,
	`{"internet": false, "internet": true}`, `{"allow": ["a\nb"]}`,
}

// requestKinds are the decoders: each returns a new request and its bounds.
var requestKinds = []func() (any, []bound){
	func() (any, []bound) { r := &createSandboxRequest{}; return r, r.bounds(sandbox.DefaultLimits()) },
	func() (any, []bound) { r := &setTimeoutRequest{}; return r, r.bounds(sandbox.DefaultLimits()) },
	func() (any, []bound) { r := &createKeyRequest{}; return r, r.bounds() },
	func() (any, []bound) { return &networkPolicy{}, nil },
	func() (any, []bound) { return &CreateSecretRequest{}, nil },
	func() (any, []bound) { r := &execRequest{}; return r, r.bounds() },
	func() (any, []bound) { return &killRequest{}, nil },
	func() (any, []bound) { return &mkdirRequest{}, nil },
	func() (any, []bound) { return &renameRequest{}, nil },
}

// FuzzDecode: a decoder never panics and refuses with a 400 category; what
// it accepts has no member outside its type, and a body it accepts for
// the agent decodes to the same request with the agent's own (lenient,
// encoding/json) decoder, so the agent runs what the server checked.
func FuzzDecode(f *testing.F) {
	for _, b := range badBodies {
		for k := range requestKinds {
			f.Add(uint8(k), []byte(b))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		v, bounds := requestKinds[int(kind)%len(requestKinds)]()
		err := decodeJSON(data, v, bounds...)
		if err != nil {
			if !errors.Is(err, errs.Invalid) {
				t.Fatalf("%T %q: an error of another category than bad_request: %v", v, data, err)
			}
			if err.Error() == "" {
				t.Fatalf("%T %q: an empty message", v, data)
			}
			return
		}
		agent := agentTwin(v)
		if agent == nil || len(strings.TrimSpace(string(data))) == 0 {
			return
		}
		dec := stdjson.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields() // as internal/agent's decodeJSON
		if err := dec.Decode(agent); err != nil {
			t.Fatalf("%T %q: the server accepts it, the agent's decoder does not: %v", v, data, err)
		}
		if got, want := reflect.ValueOf(agent).Elem().Interface(), reflect.ValueOf(v).Elem().Convert(reflect.TypeOf(agent).Elem()).Interface(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: the agent decodes %#v, the server checked %#v", data, got, want)
		}
	})
}

// agentTwin returns a new agentapi request of the type v stands for (nil
// when v is not forwarded to the agent).
func agentTwin(v any) any {
	switch v.(type) {
	case *execRequest:
		return &agentapi.ExecRequest{}
	case *killRequest:
		return &agentapi.KillRequest{}
	case *mkdirRequest:
		return &agentapi.MkdirRequest{}
	case *renameRequest:
		return &agentapi.RenameRequest{}
	}
	return nil
}

// apiRoutes are every route of the API, with placeholders for ids.
var apiRoutes = []struct{ method, path string }{
	{"POST", "/v1/sandboxes"}, {"GET", "/v1/sandboxes"}, {"GET", "/v1/sandboxes/sbx_nope"},
	{"DELETE", "/v1/sandboxes/sbx_nope"}, {"POST", "/v1/sandboxes/sbx_nope/timeout"},
	{"GET", "/v1/sandboxes/sbx_nope/network"}, {"PUT", "/v1/sandboxes/sbx_nope/network"},
	{"POST", "/v1/sandboxes/sbx_nope/exec"}, {"POST", "/v1/sandboxes/sbx_nope/processes"},
	{"GET", "/v1/sandboxes/sbx_nope/processes"}, {"GET", "/v1/sandboxes/sbx_nope/processes/PID"},
	{"POST", "/v1/sandboxes/sbx_nope/processes/PID/wait"}, {"POST", "/v1/sandboxes/sbx_nope/processes/PID/kill"},
	{"GET", "/v1/sandboxes/sbx_nope/files"}, {"PUT", "/v1/sandboxes/sbx_nope/files"},
	{"DELETE", "/v1/sandboxes/sbx_nope/files"}, {"GET", "/v1/sandboxes/sbx_nope/files/list"},
	{"GET", "/v1/sandboxes/sbx_nope/files/stat"}, {"POST", "/v1/sandboxes/sbx_nope/files/mkdir"},
	{"POST", "/v1/sandboxes/sbx_nope/files/rename"}, {"POST", "/v1/keys"}, {"GET", "/v1/keys"},
	{"DELETE", "/v1/keys/key_nope"}, {"GET", "/v1/templates"}, {"GET", "/v1/usage"},
	{"POST", "/v1/secrets"}, {"GET", "/v1/secrets"}, {"DELETE", "/v1/secrets/NOPE"}, {"GET", "/v1/health"},
}

var badQueries = []string{
	"", "path=a%00b", "path=a&path=b", "path=a;b", "path=%zz", "mode=x", "depth=0", "depth=11",
	"depth=99999999999999999999", "recursive=maybe", "timeoutSeconds=1e30", "timeoutSeconds=NaN",
	"timeoutSeconds=-Inf", "timeoutSeconds=0x1p-2", "timeoutSeconds=", "state=running&state=stopped",
	"metadata.a=b%00", "metadata.%0A=b", "from=0001-01-01", "to=9999-12-31", "from=2026-01-02&to=2026-01-01",
	"groupBy=week", "groupBy=day%00", "from=2026-01-02T15:04:05+25:00", "limit=0", "limit=10001", "cursor=%2F%2F",
	"cursor=L3dvcmtzcGFjZS9h&limit=2",
}

// FuzzAPI sends a fuzzed query and body to every route of the real API
// (real store, real manager; no sandbox exists): never a 5xx, and every
// error is a JSON error body.
func FuzzAPI(f *testing.F) {
	// Each seed once, on a route it was written for (coverage-instrumented
	// requests are slow; the fuzzer moves seeds between routes itself).
	var bodyRoutes, queryRoutes []uint8
	for i, r := range apiRoutes {
		if r.method == "POST" || r.method == "PUT" {
			bodyRoutes = append(bodyRoutes, uint8(i))
		}
		if r.method != "POST" || strings.HasSuffix(r.path, "/wait") {
			queryRoutes = append(queryRoutes, uint8(i))
		}
	}
	for i, b := range badBodies {
		f.Add(bodyRoutes[i%len(bodyRoutes)], "", "1", []byte(b))
	}
	for i, q := range badQueries {
		f.Add(queryRoutes[i%len(queryRoutes)], q, "1", []byte(nil))
	}
	for _, pid := range []string{"0", "-3", "abc", "99999999999999999999", "%00", "1e3", "+1"} {
		f.Add(uint8(10), "", pid, []byte(nil))
	}
	a := newTestAPI(f)
	f.Fuzz(func(t *testing.T, route uint8, query, pid string, body []byte) {
		r := apiRoutes[int(route)%len(apiRoutes)]
		path := strings.Replace(r.path, "PID", pid, 1)
		if query != "" {
			path += "?" + query
		}
		req, err := http.NewRequest(r.method, a.srv.URL+path, strings.NewReader(string(body)))
		if err != nil || req.URL.Host != strings.TrimPrefix(a.srv.URL, "http://") ||
			strings.ContainsFunc(req.URL.RequestURI(), func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return // not a request line a client can send (net/http answers those itself)
		}
		status, data := a.doRequest(t, req)
		checkAnswer(t, fmt.Sprintf("%s %s %q", r.method, path, body), status, data)
	})
}

var bearerForm = regexp.MustCompile(`^(?i:bearer) +(\S+)$`)

// FuzzAuthorization: only `Bearer <key>` (the scheme in any case) is let
// in; every other Authorization value is a 401 that does not repeat the key.
// "KEY" in an input stands for a valid key.
func FuzzAuthorization(f *testing.F) {
	for _, s := range []string{"Bearer KEY", "bearer KEY", "BEARER  KEY", "KEY", "Basic KEY", "Bearer KEY KEY",
		"Bearer", "Bearer ", "", "Bearer\tKEY", "Bearer KEYx", "Bearer wr_", "Bearer KEY\x00", "Token KEY", " Bearer KEY "} {
		f.Add(s)
	}
	a := newTestAPI(f)
	f.Fuzz(func(t *testing.T, value string) {
		value = strings.ReplaceAll(value, "KEY", a.key)
		req, err := http.NewRequest("GET", a.srv.URL+"/v1/templates", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", value)
		status, data, ok := a.tryRequest(req)
		if !ok {
			return // a header value the client refuses to send
		}
		checkAnswer(t, fmt.Sprintf("Authorization %q", value), status, data)
		switch status {
		case 200:
			// What the server received: net/http trims the value's ends.
			m := bearerForm.FindStringSubmatch(strings.Trim(value, " \t"))
			if m == nil || m[1] != a.key {
				t.Fatalf("Authorization %q was let in", value)
			}
		case 401:
			if strings.Contains(string(data), a.key) {
				t.Fatalf("Authorization %q: the answer repeats the key: %s", value, data)
			}
		default:
			t.Fatalf("Authorization %q: %d %s", value, status, data)
		}
	})
}
