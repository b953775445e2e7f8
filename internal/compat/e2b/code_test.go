package e2b

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/sdk/go/wire"
)

// TestCodePortTokens: the code interpreter's routes (port 49999) take the
// same token checks as envd's, by X-Access-Token or by
// E2B-Traffic-Access-Token (which e2b-code-interpreter sends on
// /contexts); nothing reaches the API without the sandbox's own token.
func TestCodePortTokens(t *testing.T) {
	f := newTokenFixture(t)
	port := []string{"E2b-Sandbox-Port", portCode}
	for _, c := range []struct {
		name, path, token, traffic, id string
	}{
		{"execute without a token", "/execute", "", "", f.idA},
		{"contexts without a token", "/contexts", "", "", f.idA},
		{"execute with another tenant's token", "/execute", f.tokB, "", f.idA},
		{"contexts with another tenant's traffic token", "/contexts", "", f.tokB, f.idA},
		{"contexts with a made-up traffic token", "/contexts", "", "wre2b_made_up", f.idA},
	} {
		hdr := port
		if c.traffic != "" {
			hdr = append(hdr, "E2b-Traffic-Access-Token", c.traffic)
		}
		if rec := f.envd(t, c.path, c.token, c.id, hdr...); rec.Code != 401 {
			t.Errorf("%s: status %d, want 401: %s", c.name, rec.Code, rec.Body)
		}
	}
	if f.apiCalls != 0 {
		t.Fatalf("refused requests reached the API %d times", f.apiCalls)
	}
	// The sandbox's own token, in either header, reaches the API.
	f.envd(t, "/contexts", "", f.idA, append(port, "E2b-Traffic-Access-Token", f.tokA)...)
	f.envd(t, "/execute", f.tokA, f.idA, port...)
	if f.apiCalls != 2 {
		t.Fatalf("valid tokens reached the API %d times, want 2", f.apiCalls)
	}
	// An unknown route of the code port is a 404 after the token check.
	if rec := f.envd(t, "/nope", f.tokA, f.idA, port...); rec.Code != 404 {
		t.Errorf("unknown code route: %d %s", rec.Code, rec.Body)
	}
}

// TestTranslateEvent: Runtime's code events become the lines
// e2b-code-interpreter parses; a bundle's values of the wrong JSON type
// (the sandbox chose them) are left out rather than passed on.
func TestTranslateEvent(t *testing.T) {
	now := time.Unix(100, 5)
	line := func(ev agentapi.CodeEvent) string {
		t.Helper()
		out := translateEvent(ev, now)
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []struct {
		ev   agentapi.CodeEvent
		want string
	}{
		{agentapi.CodeEvent{Type: "start", ContextID: "default"}, `null`},
		{agentapi.CodeEvent{Type: "stdout", Text: "hi\n"}, `[{"text":"hi\n","timestamp":100000000005,"type":"stdout"}]`},
		{agentapi.CodeEvent{Type: "stderr", Text: "w"}, `[{"text":"w","timestamp":100000000005,"type":"stderr"}]`},
		{agentapi.CodeEvent{Type: "error", Error: &agentapi.ExecutionError{Name: "ZeroDivisionError", Value: "division by zero", Traceback: "tb"}},
			`[{"name":"ZeroDivisionError","traceback":"tb","type":"error","value":"division by zero"}]`},
		{agentapi.CodeEvent{Type: "end", Execution: &agentapi.Execution{ExecutionCount: 7}}, `[{"execution_count":7,"type":"number_of_executions"}]`},
		{agentapi.CodeEvent{Type: "result", Result: &agentapi.Result{IsMainResult: true, Data: map[string]json.RawMessage{
			"text/plain": json.RawMessage(`"2"`), "image/png": json.RawMessage(`"iVBO"`),
			"application/json": json.RawMessage(`{"a":1}`), "application/x-custom": json.RawMessage(`[1]`),
		}}}, `[{"extra":{"application/x-custom":[1]},"is_main_result":true,"json":{"a":1},"png":"iVBO","text":"2","type":"result"}]`},
		// Hostile: a text that is not a string, JSON that is not an object.
		{agentapi.CodeEvent{Type: "result", Result: &agentapi.Result{Data: map[string]json.RawMessage{
			"text/plain": json.RawMessage(`{"type":"stdout"}`), "application/json": json.RawMessage(`"x"`),
		}}}, `[{"is_main_result":false,"type":"result"}]`},
		{agentapi.CodeEvent{Type: "result"}, `null`},
		{agentapi.CodeEvent{Type: "mystery"}, `null`},
	} {
		if got := line(c.ev); got != c.want {
			t.Errorf("%s: got %s\nwant %s", c.ev.Type, got, c.want)
		}
	}
	if !strings.Contains(string(mustJSON(t, streamError("broken: %d", 1))), `"name":"RuntimeError"`) {
		t.Error("a broken stream is not an error line")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChartLine: a result's chart reaches e2b-code-interpreter in its own
// shape (snake_case, every key of the chart's kind present, a superchart's
// charts as its elements) and a DataFrame's columns as "data".
func TestChartLine(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	res := agentapi.Result{Data: map[string]json.RawMessage{
		"text/plain":       json.RawMessage(`"fig"`),
		wire.DataFrameMIME: json.RawMessage(`{"a":[1,null]}`),
	}, Chart: &wire.Chart{Type: "superchart", Title: "Both", Elements: []wire.ChartElement{}, Charts: []wire.Chart{
		{Type: "line", XLabel: "t (s)", XUnit: "s", XScale: "linear", XTicks: []json.RawMessage{json.RawMessage(`0.0`)},
			XTickLabels: []string{"0"}, Elements: []wire.ChartElement{{Label: "v",
				Points: [][]json.RawMessage{{json.RawMessage(`0.0`), json.RawMessage(`1.5`)}, {json.RawMessage(`"bad"`)}}}}},
		{Type: "box_and_whisker", Elements: []wire.ChartElement{{Label: "b", Min: f(1), FirstQuartile: f(2), Median: f(3), ThirdQuartile: f(4), Max: f(5)}}},
		{Type: "pie", Elements: []wire.ChartElement{{Label: "p", Angle: f(90), Radius: f(1)}}},
	}}}
	got := string(mustJSON(t, resultLine(res)))
	want := `{"chart":{"elements":[` +
		`{"elements":[{"label":"v","points":[[0.0,1.5]]}],"title":null,"type":"line","x_label":"t (s)","x_scale":"linear","x_tick_labels":["0"],"x_ticks":[0.0],"x_unit":"s","y_label":null,"y_scale":null,"y_tick_labels":[],"y_ticks":[],"y_unit":null},` +
		`{"elements":[{"first_quartile":2,"label":"b","max":5,"median":3,"min":1,"outliers":[],"third_quartile":4}],"title":null,"type":"box_and_whisker","x_label":null,"x_unit":null,"y_label":null,"y_unit":null},` +
		`{"elements":[{"angle":90,"label":"p","radius":1}],"title":null,"type":"pie"}` +
		`],"title":"Both","type":"superchart"},"data":{"a":[1,null]},"is_main_result":false,"text":"fig","type":"result"}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestResultTextUnquoted: a string result's text is the string, without
// its repr's quotes, as E2B's interpreter gives it.
func TestResultTextUnquoted(t *testing.T) {
	for in, want := range map[string]string{`'abc'`: "abc", `"a'b"`: "a'b", `'`: "'", `''`: "", `42`: "42", `'a' 'b`: "'a' 'b"} {
		raw, _ := json.Marshal(in)
		got := resultLine(agentapi.Result{Data: map[string]json.RawMessage{"text/plain": raw}})["text"]
		if got != want {
			t.Errorf("%q: text %q, want %q", in, got, want)
		}
	}
}
