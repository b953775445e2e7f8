package api

// The agent's answer to a first command is untrusted: root inside the
// sandbox may have replaced the agent before the server asked. These tests
// feed the server's relay what such an agent could send and check that the
// client gets only events the server wrote: its own sandbox event first,
// then well-formed exec events, and an error event in place of anything
// else.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
)

// relay runs relayFirstStream over an agent answer of content type ct and
// body, and returns the lines the client got.
func relay(t *testing.T, ct, body string) []map[string]any {
	t.Helper()
	s := &Server{cfg: Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: io.NopCloser(strings.NewReader(body))}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/v1/sandboxes", nil)
	emit, ok := startCreateStream(rec, Sandbox{ID: "sbx_mine", State: "running"})
	if !ok {
		t.Fatal("the sandbox event was not written")
	}
	s.relayFirstStream(r, "sbx_mine", emit, resp, nil)
	if rec.Code != http.StatusCreated || rec.Header().Get("Content-Type") != agentapi.ContentTypeNDJSON {
		t.Fatalf("answer %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	var lines []map[string]any
	sc := bufio.NewScanner(rec.Body)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("the client got a line that is not JSON: %q", sc.Text())
		}
		lines = append(lines, m)
	}
	if len(lines) == 0 || lines[0]["type"] != "sandbox" || lines[0]["sandbox"].(map[string]any)["id"] != "sbx_mine" {
		t.Fatalf("the first line is not the server's sandbox event: %v", lines)
	}
	return lines[1:]
}

func TestFirstStreamRelaysExecEvents(t *testing.T) {
	body := `{"type":"start","pid":7}
{"type":"heartbeat"}
{"type":"stdout","data":"4"}
{"type":"stderr","data":"\ufffd","lossy":true,"dataBase64":"/w=="}
{"type":"exit","result":{"exitCode":3,"stdout":"","stderr":"","stdoutTruncated":false,"stderrTruncated":false,"stdoutBytes":1,"stderrBytes":1,"timedOut":false,"durationMs":5}}
`
	got := relay(t, agentapi.ContentTypeNDJSON, body)
	var types []string
	for _, ev := range got {
		types = append(types, ev["type"].(string))
	}
	if strings.Join(types, ",") != "start,heartbeat,stdout,stderr,exit" || len(got[1]) != 1 || got[3]["dataBase64"] != "/w==" ||
		got[4]["result"].(map[string]any)["exitCode"] != float64(3) {
		t.Fatalf("relayed: %v", got)
	}
}

func TestFirstStreamRefusesForgedEvents(t *testing.T) {
	exit := `{"type":"exit","result":{"exitCode":0,"stdout":"","stderr":"","stdoutTruncated":false,"stderrTruncated":false,"stdoutBytes":0,"stderrBytes":0,"timedOut":false,"durationMs":1}}`
	for name, tc := range map[string]struct{ ct, body string }{
		"a second sandbox event":     {agentapi.ContentTypeNDJSON, `{"type":"start","pid":7}` + "\n" + `{"type":"sandbox","sandbox":{"id":"sbx_other"}}` + "\n" + exit + "\n"},
		"a member exec has not":      {agentapi.ContentTypeNDJSON, `{"type":"stdout","data":"x","sandbox":{"id":"sbx_other"}}` + "\n" + exit + "\n"},
		"two values on a line":       {agentapi.ContentTypeNDJSON, `{"type":"stdout","data":"x"}{"type":"sandbox","sandbox":{"id":"sbx_other"}}` + "\n" + exit + "\n"},
		"an exit without its result": {agentapi.ContentTypeNDJSON, `{"type":"exit"}` + "\n"},
		"an error code that is not":  {agentapi.ContentTypeNDJSON, `{"type":"error","error":{"code":"<script>","message":"x"}}` + "\n"},
		"output with a pid":          {agentapi.ContentTypeNDJSON, `{"type":"stdout","pid":9,"data":"x"}` + "\n" + exit + "\n"},
		"a heartbeat with data":      {agentapi.ContentTypeNDJSON, `{"type":"heartbeat","data":"<script>"}` + "\n" + exit + "\n"},
		"a line that is not JSON":    {agentapi.ContentTypeNDJSON, "HTTP/1.1 302 Found\n" + exit + "\n"},
		"an endless line":            {agentapi.ContentTypeNDJSON, `{"type":"stdout","data":"` + strings.Repeat("A", 3<<20) + `"}` + "\n"},
		"a page for a browser":       {"text/html", "<script>alert(1)</script>\n" + exit + "\n"},
	} {
		t.Run(name, func(t *testing.T) {
			got := relay(t, tc.ct, tc.body)
			last := got[len(got)-1]
			if last["type"] != "error" {
				t.Fatalf("the relay did not end with an error event: %v", got)
			}
			raw, _ := json.Marshal(got)
			if bytes.Contains(raw, []byte("sbx_other")) || bytes.Contains(raw, []byte("<script>")) || len(raw) > 1<<20 {
				t.Fatalf("forged content reached the client: %.300s", raw)
			}
			for _, ev := range got[:len(got)-1] {
				if ev["type"] == "exit" {
					t.Fatalf("an event after a refused one: %v", got)
				}
			}
		})
	}
}

// TestFirstStreamCutShort: a stream that ends without an exit event (the
// sandbox stopped) ends the client's stream the same way, as a streamed
// exec's does: no event is made up.
func TestFirstStreamCutShort(t *testing.T) {
	got := relay(t, agentapi.ContentTypeNDJSON, `{"type":"start","pid":7}`+"\n"+`{"type":"stdout","data":"par`)
	if len(got) != 1 || got[0]["type"] != "start" {
		t.Fatalf("relayed: %v", got)
	}
}

func TestFirstResultFromAgent(t *testing.T) {
	answer := func(ct, body string) *http.Response {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: io.NopCloser(strings.NewReader(body))}
	}
	res, err := readFirstResult(answer("application/json", `{"exitCode":2,"stdout":"hi\n","stderr":"","stdoutTruncated":false,"stderrTruncated":false,"stdoutBytes":3,"stderrBytes":0,"timedOut":false,"durationMs":4}`), 0)
	if err != nil || res.ExitCode != 2 || res.Stdout != "hi\n" {
		t.Fatalf("result: %+v %v", res, err)
	}
	if _, err := readFirstResult(answer("text/html", `{"exitCode":0}`), 0); err == nil {
		t.Fatal("an answer that is not JSON was taken")
	}
	// An answer larger than the cap allows is cut, not held whole.
	if _, err := readFirstResult(answer("application/json", `{"exitCode":0,"stdout":"`+strings.Repeat("A", 17*1024+maxJSONBytes)+`"}`), 1024); err == nil {
		t.Fatal("an answer over its bound was taken")
	}
	for _, body := range []string{`<html>`, `{"error":{"code":"Bad Code","message":"x"}}`, `{"error":{"code":"","message":"x"}}`} {
		err := agentAnswerError(&http.Response{StatusCode: 400, Body: io.NopCloser(strings.NewReader(body))})
		if _, ok := err.(*agentError); ok {
			t.Errorf("%s was taken as the agent's error: %v", body, err)
		}
	}
	err = agentAnswerError(&http.Response{StatusCode: 400, Body: io.NopCloser(strings.NewReader(`{"error":{"code":"bad_request","message":"cwd /x does not exist"}}`))})
	if ae, ok := err.(*agentError); !ok || ae.e.Message != "cwd /x does not exist" {
		t.Errorf("the agent's own refusal: %v", err)
	}
}

// TestCreateSizeOnce: a create body over the JSON cap is refused for its
// size when it carries no exec (whatever else is wrong in it), and goes on
// to the template lookup when its size is a first command's stdin. (The
// answers of the old two decodes, kept now that the body is decoded once;
// the CPU that saves is not what this checks.)
func TestCreateSizeOnce(t *testing.T) {
	a := newTestAPI(t)
	big := strings.Repeat("x", maxJSONBytes)
	for _, c := range []struct {
		name, body string
		status     int
		says       string
	}{
		{"no exec", `{"template":"base","metadata":{"k":"` + big + `"}}`, http.StatusRequestEntityTooLarge, "a create without exec is small"},
		{"no exec, and an unknown field", `{"nope":1,"pad":"` + big + `"}`, http.StatusRequestEntityTooLarge, "a create without exec is small"},
		{"exec with a large stdin", `{"template":"base","exec":{"command":"wc -c","stdin":"` + big + `"}}`, http.StatusBadRequest, "template not found"},
	} {
		status, data := a.do(t, "POST", "/v1/sandboxes", []byte(c.body))
		if status != c.status || !strings.Contains(string(data), c.says) {
			t.Errorf("%s: %d %.300s, want %d saying %q", c.name, status, data, c.status, c.says)
		}
	}
}
