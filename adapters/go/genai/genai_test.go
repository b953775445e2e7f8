package genai_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"

	runtimegenai "withruntime.dev/runtime/adapters/go/genai"
	"withruntime.dev/runtime/adapters/go/testserver"
	withruntime "withruntime.dev/runtime/sdk/go"
	"withruntime.dev/runtime/sdk/go/tools"
)

func newSandbox(t *testing.T) (context.Context, []tools.Tool) {
	t.Helper()
	testserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	sbx, err := withruntime.Create(ctx, withruntime.Options{TimeoutSeconds: 300})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sbx.Close(); err != nil {
			t.Errorf("destroying the sandbox: %v", err)
		}
	})
	return ctx, tools.ForSandbox(sbx)
}

// response is a generateContent response body, as the API documents it,
// whose candidate makes the given function calls ({id, name, args}).
func response(t *testing.T, calls ...[3]string) *genai.GenerateContentResponse {
	t.Helper()
	var parts []string
	for _, c := range calls {
		parts = append(parts, `{"functionCall": {"id": "`+c[0]+`", "name": "`+c[1]+`", "args": `+c[2]+`}}`)
	}
	body := `{"candidates": [{"content": {"role": "model", "parts": [` + strings.Join(parts, ",") + `]},
		"finishReason": "STOP", "index": 0}],
		"usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 40, "totalTokenCount": 160},
		"modelVersion": "gemini-2.5-flash", "responseId": "abc123"}`
	var resp genai.GenerateContentResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	return &resp
}

func dispatch(t *testing.T, ctx context.Context, ts []tools.Tool, resp *genai.GenerateContentResponse) []*genai.FunctionResponse {
	t.Helper()
	var out []*genai.FunctionResponse
	var parts []*genai.Part
	for _, call := range resp.FunctionCalls() {
		fr, err := runtimegenai.Dispatch(ctx, ts, call)
		if err != nil {
			t.Fatalf("Dispatch(%s): %v", call.Name, err)
		}
		out = append(out, fr)
		parts = append(parts, &genai.Part{FunctionResponse: fr})
	}
	// The responses go back as the next user Content.
	if _, err := json.Marshal(genai.NewContentFromParts(parts, genai.RoleUser)); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFunctionCallsRunPythonInSandbox(t *testing.T) {
	ctx, ts := newSandbox(t)
	frs := dispatch(t, ctx, ts, response(t,
		[3]string{"fc_write", tools.WriteFileName, `{"path": "hello.py", "content": "print(6 * 7)\n"}`},
		[3]string{"fc_exec", tools.ExecName, `{"command": "python3 hello.py", "cwd": "", "timeoutSeconds": 0}`}))
	if len(frs) != 2 {
		t.Fatalf("%d function responses, want 2", len(frs))
	}
	if fr := frs[0]; fr.ID != "fc_write" || fr.Name != tools.WriteFileName || !strings.Contains(str(fr.Response["output"]), "/workspace/hello.py") {
		t.Fatalf("write response: %+v", fr)
	}
	fr := frs[1]
	out := str(fr.Response["output"])
	if fr.ID != "fc_exec" || fr.Name != tools.ExecName || fr.Response["error"] != nil || !strings.Contains(out, "42") || !strings.Contains(out, "exit_code: 0") {
		t.Fatalf("exec response: %+v", fr)
	}
	t.Logf("functionResponse output:\n%s", out)
}

func TestFailuresAreResults(t *testing.T) {
	ctx, ts := newSandbox(t)
	frs := dispatch(t, ctx, ts, response(t,
		[3]string{"fc_fail", tools.ExecName, `{"command": "echo oops >&2; exit 3", "cwd": "", "timeoutSeconds": 0}`},
		[3]string{"fc_read", tools.ReadFileName, `{"path": "no-such-file.txt"}`},
		[3]string{"fc_bad", tools.ExecName, `{"command": 7}`}))
	// A command that exits non-zero ran: its exit code is in "output".
	if out := str(frs[0].Response["output"]); !strings.Contains(out, "exit_code: 3") || !strings.Contains(out, "oops") {
		t.Fatalf("failing command: %+v", frs[0])
	}
	// A call that could not be carried out answers with an "error" key.
	for _, fr := range frs[1:] {
		if _, ok := fr.Response["output"]; ok || !strings.HasPrefix(str(fr.Response["error"]), "error: ") {
			t.Fatalf("%s: %+v, want an \"error\" key", fr.ID, fr.Response)
		}
	}
}

func str(v any) string { s, _ := v.(string); return s }

// The declarations carry the SDK's names, descriptions and whole schemas.
func TestToolMatchesDefinitions(t *testing.T) {
	b, err := json.Marshal(runtimegenai.Tool())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		FunctionDeclarations []tools.GeminiFunctionDeclaration `json:"functionDeclarations"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	defs := tools.Definitions()
	if len(got.FunctionDeclarations) != len(defs) {
		t.Fatalf("%s", b)
	}
	for i, d := range defs {
		g := got.FunctionDeclarations[i]
		var x, y any
		json.Unmarshal(g.ParametersJSONSchema, &x)
		json.Unmarshal(d.InputSchema, &y)
		xb, _ := json.Marshal(x)
		yb, _ := json.Marshal(y)
		if g.Name != d.Name || g.Description != d.Description || string(xb) != string(yb) {
			t.Errorf("declaration %d:\n got %s\nwant %s", i, xb, yb)
		}
	}
}
