package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	withruntime "withruntime.dev/runtime/sdk/go"
)

func TestCodeSchemaMeetsProviderRules(t *testing.T) {
	defs := CodeDefinitions()
	if len(defs) != 1 || defs[0].Name != RunCodeName {
		t.Fatalf("%+v", defs)
	}
	var schema map[string]any
	if err := json.Unmarshal(defs[0].InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	for provider, rules := range providerRules {
		for _, r := range rules {
			for _, problem := range r.check(defs[0], schema) {
				t.Errorf("%s for %s: rule %q: %s", RunCodeName, provider, r.rule, problem)
			}
		}
	}
	// The golden definition, shared with the Python and TypeScript SDKs.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(defs[0])
	path := filepath.Join("testdata", RunCodeName+".golden")
	if *update {
		os.WriteFile(path, buf.Bytes(), 0o644)
		return
	}
	if want, err := os.ReadFile(path); err != nil || !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs (run go test -update): %v\n%s", path, err, buf.Bytes())
	}
}

func testPNG(t *testing.T, w, h int) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// codeSandbox is a sandbox on a fake server whose /code answers answer.
func codeSandbox(t *testing.T, answer string) *withruntime.Sandbox {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/sandboxes/sb1":
			io.WriteString(w, `{"id":"sb1","state":"running"}`)
		case "/v1/sandboxes/sb1/code":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, answer)
		default:
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"code":"not_found","message":"no"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := withruntime.NewClient(withruntime.WithBaseURL(srv.URL), withruntime.WithAPIKey("wr_x"))
	if err != nil {
		t.Fatal(err)
	}
	sbx, err := c.Connect(context.Background(), "sb1")
	if err != nil {
		t.Fatal(err)
	}
	return sbx
}

// What a hostile sandbox sends as images is checked before it goes to a
// provider: only images that decode as their type, within the caps.
func TestRunCodeImages(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(testPNG(t, 64, 48))
	notPNG := base64.StdEncoding.EncodeToString([]byte("<svg>not a png</svg>"))
	big := base64.StdEncoding.EncodeToString(make([]byte, MaxImageBytes+1))
	answer := fmt.Sprintf(`{"contextId":"default","executionCount":3,"durationMs":5,
		"logs":{"stdout":["hi\n"],"stderr":[]},
		"results":[
			{"data":{"image/png":%q,"text/plain":"<Figure size 640x480 with 1 Axes>"},"isMainResult":false},
			{"data":{"image/png":%q},"isMainResult":false},
			{"data":{"image/png":%q},"isMainResult":false},
			{"data":{"text/plain":"42"},"isMainResult":true}],
		"error":{"name":"ValueError","value":"bad","traceback":"Traceback...\nValueError: bad"}}`, good, notPNG, big)
	ts := CodeInterpreterTools(codeSandbox(t, answer))
	res, err := Dispatch(context.Background(), ts, RunCodeName, json.RawMessage(`{"code":"x","language":""}`))
	if err != nil || res.IsError {
		t.Fatalf("%+v %v", res, err)
	}
	if len(res.Images) != 1 || res.Images[0].Width != 64 || res.Images[0].Height != 48 || res.Images[0].MIMEType != "image/png" {
		t.Fatalf("images %+v", res.Images)
	}
	for _, want := range []string{"execution_count: 3", "stdout:\nhi", "display: image 1 (image/png, 64x48) attached",
		"does not decode as image/png", "over 5242880 bytes", "result:\n42", "error: ValueError: bad", "traceback:\nTraceback"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, res.Text)
		}
	}
	if strings.Contains(res.Text, "Figure size") {
		t.Errorf("an attached figure's text/plain is noise:\n%s", res.Text)
	}
	// Each provider's shape carries the image.
	a, _ := json.Marshal(res.AnthropicResultBlocks("tu1"))
	o, _ := json.Marshal(res.OpenAIResponsesResultParts("c1"))
	g, _ := json.Marshal(res.GeminiParts(RunCodeName, "id1"))
	for name, s := range map[string]string{
		"anthropic": `"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + good + `"}`,
		"openai":    `"type":"input_image","image_url":"data:image/png;base64,` + good + `"`,
		"gemini":    `{"inlineData":{"mimeType":"image/png","data":"` + good + `"}}`,
	} {
		got := map[string][]byte{"anthropic": a, "openai": o, "gemini": g}[name]
		if !bytes.Contains(got, []byte(s)) {
			t.Errorf("%s shape lacks the image: %s", name, got)
		}
	}
	// Arguments are checked before any sandbox is used.
	for _, args := range []string{`{"code":"","language":""}`, `{"code":"1","language":"ruby"}`, `{"language":""}`} {
		res, err := Dispatch(context.Background(), BindCodeInterpreter(nil), RunCodeName, json.RawMessage(args))
		if err != nil || !res.IsError {
			t.Errorf("%s: %+v %v", args, res, err)
		}
	}
}

// TestRunCodeSummaryGolden fixes the text the model reads for an
// Execution; the Python and TypeScript SDKs compare theirs with the same
// files.
func TestRunCodeSummaryGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "run_code_execution.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ex withruntime.Execution
	if err := json.Unmarshal(in, &ex); err != nil {
		t.Fatal(err)
	}
	text, images := summarize(&ex)
	var imgs []string
	for _, img := range images {
		imgs = append(imgs, fmt.Sprintf("%s %dx%d %d bytes", img.MIMEType, img.Width, img.Height, len(img.Data)))
	}
	got := []byte(text + "\n--- images ---\n" + strings.Join(imgs, "\n") + "\n")
	path := filepath.Join("testdata", "run_code_summary.golden")
	if *update {
		os.WriteFile(path, got, 0o644)
		return
	}
	if want, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test -update): %v\n%s", path, err, got)
	}
}
