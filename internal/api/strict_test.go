package api

import (
	"strings"
	"testing"
)

// TestAuthorizationForm: the key travels only as `Authorization: Bearer
// <key>` (the scheme in any case); a bare key, another scheme, extra
// values or two headers are refused with the expected form named.
func TestAuthorizationForm(t *testing.T) {
	a := newTestAPI(t)
	for _, c := range []struct {
		name   string
		hdr    []string
		status int
	}{
		{"bearer", []string{"Authorization", "Bearer " + a.key}, 200},
		{"scheme in lower case", []string{"Authorization", "bearer " + a.key}, 200},
		{"scheme in upper case", []string{"Authorization", "BEARER " + a.key}, 200},
		{"two spaces", []string{"Authorization", "Bearer  " + a.key}, 200},
		{"bare key", []string{"Authorization", a.key}, 401},
		{"basic", []string{"Authorization", "Basic " + a.key}, 401},
		{"token scheme", []string{"Authorization", "Token " + a.key}, 401},
		{"two values", []string{"Authorization", "Bearer " + a.key + " " + a.key}, 401},
		{"two headers", []string{"Authorization", "Bearer " + a.key, "Authorization", "Bearer " + a.key}, 401},
		{"scheme only", []string{"Authorization", "Bearer"}, 401},
		{"empty", []string{"Authorization", ""}, 401},
	} {
		status, data := a.do(t, "GET", "/v1/templates", nil, c.hdr...)
		checkAnswer(t, c.name, status, data)
		if status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, status, data, c.status)
		}
		if status == 401 && strings.Contains(string(data), a.key) {
			t.Errorf("%s: the answer repeats the key: %s", c.name, data)
		}
		if status == 401 && !strings.Contains(string(data), "Bearer") {
			t.Errorf("%s: the answer does not name the expected form: %s", c.name, data)
		}
	}
}

// TestStrictBodies: a null body, member names in another case, names given
// twice, and bodies that are not objects are refused, on the server's own
// routes and on the routes forwarded to a sandbox's agent.
func TestStrictBodies(t *testing.T) {
	a := newTestAPI(t)
	exec := "/v1/sandboxes/sbx_nope/exec"
	for _, c := range []struct {
		method, path, body string
		want               []string
	}{
		{"POST", "/v1/sandboxes", `null`, []string{"null"}},
		{"POST", "/v1/sandboxes", ` null `, []string{"null"}},
		{"POST", "/v1/keys", `null`, []string{"null"}},
		{"PUT", "/v1/sandboxes/sbx_nope/network", `null`, []string{"null"}},
		{"POST", exec, `null`, []string{"null"}},
		{"POST", "/v1/sandboxes", `[]`, []string{"JSON object", "an array"}},
		{"POST", "/v1/sandboxes", `"x"`, []string{"JSON object"}},
		{"POST", "/v1/keys", `{"Name": "ci"}`, []string{`unknown field "Name"`, `use "name"`}},
		{"POST", "/v1/keys", `{"NAME": "ci"}`, []string{`use "name"`}},
		{"POST", "/v1/keys", `{"name": "a", "name": "b"}`, []string{`"name" appears twice`}},
		{"POST", "/v1/keys", `{"name": "a", "Name": "b"}`, []string{`unknown field "Name"`}},
		{"POST", "/v1/sandboxes", `{"Template": "base"}`, []string{`use "template"`}},
		{"POST", "/v1/sandboxes", `{"TIMEOUTSECONDS": 5}`, []string{`use "timeoutSeconds"`}},
		{"POST", "/v1/sandboxes", `{"cpu": 1, "CPU": 8}`, []string{`use "cpu"`}},
		{"POST", "/v1/sandboxes", `{"network": {"Internet": true}}`, []string{`unknown field "Internet" in "/network"`, `use "internet"`}},
		{"POST", "/v1/sandboxes", `{"env": {"A": "1", "A": "2"}}`, []string{`"A" appears twice in "/env"`}},
		{"POST", "/v1/sandboxes", `{"timeout": 60}`, []string{`unknown field "timeout"`, `"timeoutSeconds"`}},
		{"POST", "/v1/sandboxes", "{\"template\": \"\xff\"}", []string{"invalid UTF-8"}},
		{"POST", "/v1/sandboxes", `{"memoryMiB": "512"}`, []string{`"memoryMiB" must be a whole number`}},
		{"POST", "/v1/sandboxes/sbx_nope/timeout", `{"TimeoutSeconds": 60}`, []string{`use "timeoutSeconds"`}},
		{"PUT", "/v1/sandboxes/sbx_nope/network", `{"internet": false, "internet": true}`, []string{"appears twice"}},
		{"POST", exec, `{"Command": "touch /tmp/x"}`, []string{`use "command"`}},
		{"POST", exec, `{"command": "ls", "command": "touch /tmp/x"}`, []string{"appears twice"}},
		{"POST", exec, `{"command": "ls", "Env": {"A": "1"}}`, []string{`use "env"`}},
		{"POST", exec, `{"command": "ls", "USER": "root"}`, []string{`use "user"`}},
		{"POST", exec, `{}`, []string{`exactly one of "command"`}},
		{"POST", exec, `{"command": "ls"} {}`, []string{"malformed JSON"}},
		{"POST", "/v1/sandboxes/sbx_nope/processes", `{"Argv": ["ls"]}`, []string{`use "argv"`}},
		{"POST", "/v1/sandboxes/sbx_nope/processes/1/kill", `{"Signal": "SIGTERM"}`, []string{`use "signal"`}},
		{"POST", "/v1/sandboxes/sbx_nope/files/mkdir", `{"Path": "x"}`, []string{`use "path"`}},
		{"POST", "/v1/sandboxes/sbx_nope/files/rename", `{"from": "a", "To": "b"}`, []string{`use "to"`}},
	} {
		a.expect(t, 400, c.method, c.path, c.body, c.want...)
	}
	// Valid bodies still pass the checks (and then find no sandbox).
	a.expect(t, 404, "POST", exec, `{"command": "ls"}`)
	a.expect(t, 404, "POST", "/v1/sandboxes/sbx_nope/processes/1/kill", ``)
	a.expect(t, 404, "POST", "/v1/sandboxes/sbx_nope/timeout", `{"timeoutSeconds": 60}`)
	if status, data := a.do(t, "POST", "/v1/keys", []byte(`{"name": "ci"}`)); status != 201 {
		t.Errorf("a valid key: %d %s", status, data)
	}
}

// TestNumbersPastMaxima: a number past its field's documented range is a
// 400 naming the range, however large (no wrap into a negative duration or
// an instant timeout).
func TestNumbersPastMaxima(t *testing.T) {
	a := newTestAPI(t)
	sbx := "/v1/sandboxes/sbx_nope"
	for _, c := range []struct {
		method, path, body string
		want               []string
	}{
		{"POST", "/v1/sandboxes", `{"timeoutSeconds": 1e30}`, []string{"timeoutSeconds must be a whole number from 1 to 86400", "got 1e30"}},
		{"POST", "/v1/sandboxes", `{"timeoutSeconds": 9223372036854775807}`, []string{"from 1 to 86400", "got 9223372036854775807"}},
		{"POST", "/v1/sandboxes", `{"timeoutSeconds": 9223372036854775808}`, []string{"from 1 to 86400"}},
		{"POST", "/v1/sandboxes", `{"timeoutSeconds": -9223372036854775808}`, []string{"from 1 to 86400"}},
		{"POST", "/v1/sandboxes", `{"timeoutSeconds": 1.5}`, []string{"whole number"}},
		{"POST", "/v1/sandboxes", `{"cpu": 1e400}`, []string{"cpu must be from 0.05 to 8"}},
		{"POST", "/v1/sandboxes", `{"cpu": 1e300}`, []string{"cpu must be from 0.05 to 8"}},
		{"POST", "/v1/sandboxes", `{"cpu": -1}`, []string{"cpu must be from 0.05 to 8"}},
		{"POST", "/v1/sandboxes", `{"memoryMiB": 9223372036854775807}`, []string{"memoryMiB must be a whole number from 64 to 16384"}},
		{"POST", "/v1/sandboxes", `{"diskMiB": 1e19}`, []string{"diskMiB must be a whole number from 16 to 65536"}},
		{"POST", "/v1/sandboxes", `{"maxCostMicros": 9223372036854775807}`, []string{"maxCostMicros must be a whole number from 1 to 1000000000000000"}},
		{"POST", "/v1/sandboxes", `{"maxCostMicros": -1}`, []string{"from 1 to 1000000000000000"}},
		{"POST", sbx + "/timeout", `{"timeoutSeconds": 1e30}`, []string{"from 1 to 86400"}},
		{"POST", sbx + "/timeout", `{"timeoutSeconds": 9223372036854775807}`, []string{"from 1 to 86400"}},
		{"POST", sbx + "/timeout", `{}`, []string{"from 1 to 86400", "got 0"}},
		{"POST", "/v1/keys", `{"name": "ci", "dailyLimitMicros": 9223372036854775807}`, []string{"dailyLimitMicros must be a whole number from 1 to 1000000000000000"}},
		{"POST", "/v1/keys", `{"name": "ci", "dailyLimitMicros": 1e30}`, []string{"from 1 to 1000000000000000"}},
		{"POST", "/v1/keys", `{"name": "ci", "dailyLimitMicros": -5}`, []string{"from 1 to 1000000000000000"}},
		{"POST", sbx + "/exec", `{"command": "ls", "timeoutSeconds": 1e30}`, []string{"timeoutSeconds must be from 0 to 1000000000"}},
		{"POST", sbx + "/exec", `{"command": "ls", "timeoutSeconds": 1e400}`, []string{"from 0 to 1000000000"}},
		{"POST", sbx + "/exec", `{"command": "ls", "timeoutSeconds": -1}`, []string{"from 0 to 1000000000"}},
		{"POST", sbx + "/exec", `{"command": "ls", "maxOutputBytes": 9223372036854775807}`, []string{"maxOutputBytes must be a whole number from 1 to 16777216"}},
		{"POST", sbx + "/processes", `{"command": "ls", "timeoutSeconds": 9223372036854775807}`, []string{"from 0 to 1000000000"}},
		{"POST", sbx + "/processes/1/wait?timeoutSeconds=1e30", ``, []string{"timeoutSeconds must be from 0 to 1000000000"}},
		{"POST", sbx + "/processes/1/wait?timeoutSeconds=9223372036854775807", ``, []string{"from 0 to 1000000000"}},
		{"POST", sbx + "/processes/1/wait?timeoutSeconds=NaN", ``, []string{"from 0 to 1000000000"}},
		{"POST", sbx + "/processes/1/wait?timeoutSeconds=-1", ``, []string{"from 0 to 1000000000"}},
		{"GET", sbx + "/files/list?path=.&depth=99999999999999999999", ``, []string{"depth must be a whole number from 1 to 10"}},
		{"GET", sbx + "/files/list?limit=0", ``, []string{"limit must be a whole number from 1 to 10000 entries per page"}},
		{"GET", sbx + "/files/list?limit=10001", ``, []string{"from 1 to 10000"}},
		{"GET", sbx + "/files/list?cursor=%2F%2F", ``, []string{"cursor: the cursor is not one a listing gave", "no cursor for the first page"}},
		{"GET", sbx + "/files/list?cursor=cmVsYXRpdmU", ``, []string{"names no absolute path"}},
		{"GET", sbx + "/processes/99999999999999999999", ``, []string{"pid must be a whole number from 1 to 2147483647"}},
		{"GET", sbx + "/processes/-3", ``, []string{"pid must be"}},
		{"GET", "/v1/usage?to=9999-12-31", ``, []string{"out of range"}},
		{"GET", "/v1/usage?from=0001-01-01", ``, []string{"out of range"}},
	} {
		a.expect(t, 400, c.method, c.path, c.body, c.want...)
	}
	// The largest values are accepted.
	a.expect(t, 404, "POST", sbx+"/timeout", `{"timeoutSeconds": 86400}`)
	a.expect(t, 404, "POST", sbx+"/exec", `{"command": "ls", "timeoutSeconds": 1e9, "maxOutputBytes": 16777216}`)
	a.expect(t, 404, "POST", sbx+"/processes/1/wait?timeoutSeconds=1000000000", ``)
	if status, data := a.do(t, "POST", "/v1/keys", []byte(`{"name": "rich", "dailyLimitMicros": 1000000000000000}`)); status != 201 {
		t.Errorf("the largest daily limit: %d %s", status, data)
	}
}

// TestNamesWithoutControls: NUL and control characters are refused in
// names (key names, metadata, env names, secret names, template names,
// network entries, filters) and NUL wherever exec or a path cannot carry it.
func TestNamesWithoutControls(t *testing.T) {
	a := newTestAPI(t)
	sbx := "/v1/sandboxes/sbx_nope"
	for _, c := range []struct {
		method, path, body string
		want               []string
	}{
		{"POST", "/v1/keys", `{"name": "a\u0000b"}`, []string{"key name", "control character"}},
		{"POST", "/v1/keys", `{"name": "a\nb"}`, []string{"key name"}},
		{"POST", "/v1/keys", `{"name": "a\u007fb"}`, []string{"key name"}},
		{"POST", "/v1/keys", `{"name": "a\u0085b"}`, []string{"key name"}},
		{"POST", "/v1/sandboxes", `{"metadata": {"a\u0001": "b"}}`, []string{"metadata key"}},
		{"POST", "/v1/sandboxes", `{"metadata": {"a": "b\u0000"}}`, []string{"metadata value"}},
		{"POST", "/v1/sandboxes", `{"env": {"A\nB": "1"}}`, []string{"env name"}},
		{"POST", "/v1/sandboxes", `{"env": {"A=B": "1"}}`, []string{"not a valid variable name"}},
		{"POST", "/v1/sandboxes", `{"env": {"A": "1\u0000"}}`, []string{"NUL"}},
		{"POST", "/v1/sandboxes", `{"template": "base\u0000"}`, []string{"template"}},
		{"POST", "/v1/sandboxes", `{"secrets": ["TOKEN\r"]}`, []string{"secret name"}},
		{"POST", "/v1/sandboxes", `{"network": {"allow": ["example.com\u0000"]}}`, []string{"network entry"}},
		{"PUT", sbx + "/network", `{"deny": ["a\nb"]}`, []string{"network entry"}},
		{"POST", sbx + "/exec", `{"command": "ls\u0000"}`, []string{"command holds a NUL"}},
		{"POST", sbx + "/exec", `{"argv": ["ls", "\u0000"]}`, []string{"argv[1] holds a NUL"}},
		{"POST", sbx + "/exec", `{"command": "ls", "cwd": "a\u0000"}`, []string{"cwd holds a NUL"}},
		{"POST", sbx + "/exec", `{"command": "ls", "env": {"A\u0000": "1"}}`, []string{"env name"}},
		{"POST", sbx + "/exec", `{"command": "ls", "env": {"A": "\u0000"}}`, []string{"NUL"}},
		{"POST", sbx + "/exec", `{"command": "ls", "user": "root\n"}`, []string{"user"}},
		{"POST", sbx + "/exec", `{"command": "ls", "user": "nobody"}`, []string{`use "user"`}},
		{"POST", sbx + "/processes", `{"command": "ls", "user": "Root"}`, []string{`use "user"`}},
		{"POST", sbx + "/processes/1/kill", `{"signal": "TERM\u0000"}`, []string{"signal"}},
		{"POST", sbx + "/files/mkdir", `{"path": "a\u0000b"}`, []string{"path holds a NUL"}},
		{"POST", sbx + "/files/rename", `{"from": "a", "to": "b\u0000"}`, []string{"to holds a NUL"}},
		{"GET", sbx + "/files?path=a%00b", ``, []string{"path holds a NUL"}},
		{"PUT", sbx + "/files?path=a%00b", `data`, []string{"path holds a NUL"}},
		{"GET", sbx + "/files?path=a&path=b", ``, []string{"given 2 times"}},
		{"GET", sbx + "/files?path=a&mode=x", ``, []string{`unknown query parameter "mode"`}},
		{"GET", sbx + "/files?path=a;b", ``, []string{"malformed query"}},
		{"GET", sbx + "/processes?all=1", ``, []string{"takes none"}},
		{"DELETE", sbx + "/files?path=a&recursive=maybe", ``, []string{"not a boolean"}},
		{"GET", "/v1/sandboxes?metadata.a=b%00", ``, []string{"control character"}},
		{"GET", "/v1/sandboxes?metadata.a%0A=b", ``, []string{"control character"}},
		{"GET", "/v1/sandboxes?state=running&state=stopped", ``, []string{"given 2 times"}},
		{"GET", "/v1/usage?groupBy=day&groupBy=key", ``, []string{"given 2 times"}},
		{"GET", "/v1/usage?groupBy=day%00", ``, []string{"groupBy"}},
	} {
		a.expect(t, 400, c.method, c.path, c.body, c.want...)
	}
	// Values may hold what names may not: line breaks in an env value,
	// control characters other than NUL in a command.
	a.expect(t, 404, "POST", sbx+"/exec", `{"command": "printf 'a\tb\n'", "env": {"PEM": "line1\nline2"}, "stdin": "\u0000 is fine in stdin"}`)
}
