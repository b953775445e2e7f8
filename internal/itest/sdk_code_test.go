package itest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image/png"
	"strings"
	"testing"

	withruntime "withruntime.dev/runtime/sdk/go"
	"withruntime.dev/runtime/sdk/go/tools"
)

// The Go SDK's code interpreter against a real server and kernels.
func TestSDKRunCode(t *testing.T) {
	needCodeInterpreter(t)
	e := newEnv(t)
	c := e.sdkClient()
	ctx := context.Background()
	sbx, err := c.Create(ctx, withruntime.Options{Template: withruntime.CodeInterpreterTemplate})
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Close()

	ex, err := sbx.RunCode(ctx, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndf['a'].sum()", nil)
	if err != nil || ex.Text() != "3" || ex.Error != nil {
		t.Fatalf("RunCode: %+v %v", ex, err)
	}
	// Callbacks: the answer is streamed, and the Execution is the same.
	var out []string
	var results []withruntime.Result
	ex, err = sbx.RunCode(ctx, "import matplotlib.pyplot as plt\nprint('plotting')\nplt.plot(df['a'])\nlen(df)", &withruntime.RunCodeOptions{
		OnStdout: func(s string) { out = append(out, s) },
		OnResult: func(r withruntime.Result) { results = append(results, r) },
	})
	if err != nil || ex.Text() != "2" || strings.Join(out, "") != "plotting\n" || ex.Stdout() != "plotting\n" || len(results) != 2 || len(ex.Results) != 2 {
		t.Fatalf("streamed: %+v %v out=%q results=%d", ex, err, out, len(results))
	}
	var chart []byte
	for _, r := range ex.Results {
		if b := r.PNG(); b != nil {
			chart = b
		}
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(chart)); err != nil || cfg.Width < 100 {
		t.Fatalf("chart: %v %+v", err, cfg)
	}
	// An exception is in the Execution, not an error.
	ex, err = sbx.RunCode(ctx, "1/0", &withruntime.RunCodeOptions{OnError: func(e withruntime.ExecutionError) { out = append(out, e.Name) }})
	if err != nil || ex.Error == nil || ex.Error.Name != "ZeroDivisionError" || out[len(out)-1] != "ZeroDivisionError" {
		t.Fatalf("1/0: %+v %v", ex, err)
	}
	// Contexts.
	cc, err := sbx.CreateContext(ctx, withruntime.CreateContextRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ex, err := sbx.RunCode(ctx, "'df' in globals()", &withruntime.RunCodeOptions{ContextID: cc.ID}); err != nil || ex.Text() != "False" {
		t.Fatalf("isolated context: %+v %v", ex, err)
	}
	list, err := sbx.ListContexts(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := sbx.RestartContext(ctx, cc.ID); err != nil {
		t.Fatal(err)
	}
	if err := sbx.DeleteContext(ctx, cc.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := sbx.RunCode(ctx, "1", &withruntime.RunCodeOptions{ContextID: cc.ID}); !errors.Is(err, withruntime.ErrNotFound) {
		t.Fatalf("deleted context: %v", err)
	}
	base, err := c.Create(ctx, withruntime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	if _, err := base.RunCode(ctx, "1", nil); !errors.Is(err, withruntime.ErrNotImplemented) {
		t.Fatalf("base template: %v", err)
	}
}

// runtime_run_code against a real kernel: a chart comes back as a checked
// image in each provider's shape; variables persist between calls.
func TestSDKRunCodeTool(t *testing.T) {
	needCodeInterpreter(t)
	e := newEnv(t)
	ctx := context.Background()
	sbx, err := e.sdkClient().Create(ctx, withruntime.Options{Template: withruntime.CodeInterpreterTemplate})
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Close()
	ts := tools.CodeInterpreterTools(sbx)
	res, err := tools.Dispatch(ctx, ts, tools.RunCodeName, json.RawMessage(`{"code": "import pandas as pd\ndf = pd.DataFrame({'y': [1, 4, 9]})\nprint(len(df))", "language": ""}`))
	if err != nil || res.IsError || !strings.Contains(res.Text, "stdout:\n3") {
		t.Fatalf("%+v %v", res, err)
	}
	res, err = tools.Dispatch(ctx, ts, tools.RunCodeName, json.RawMessage(`{"code": "import matplotlib.pyplot as plt\nplt.plot(df['y']); plt.show()", "language": "python"}`))
	if err != nil || res.IsError || len(res.Images) != 1 || !strings.Contains(res.Text, "image 1 (image/png") {
		t.Fatalf("%+v %v", res.Text, err)
	}
	img := res.Images[0]
	if cfg, err := png.DecodeConfig(bytes.NewReader(img.Data)); err != nil || cfg.Width != img.Width || img.Width < 100 {
		t.Fatalf("image: %v %+v", err, img)
	}
	b64 := base64.StdEncoding.EncodeToString(img.Data)
	a, _ := json.Marshal(res.AnthropicResultBlocks("toolu_1"))
	o, _ := json.Marshal(res.OpenAIResponsesResultParts("call_1"))
	g, _ := json.Marshal(res.GeminiParts(tools.RunCodeName, "fc_1"))
	if !bytes.Contains(a, []byte(`"media_type":"image/png","data":"`+b64)) ||
		!bytes.Contains(o, []byte(`"image_url":"data:image/png;base64,`+b64)) ||
		!bytes.Contains(g, []byte(`"inlineData":{"mimeType":"image/png","data":"`+b64)) {
		t.Fatalf("provider shapes lack the image:\n%.300s\n%.300s\n%.300s", a, o, g)
	}
	res, _ = tools.Dispatch(ctx, ts, tools.RunCodeName, json.RawMessage(`{"code": "1/0", "language": ""}`))
	if res.IsError || !strings.Contains(res.Text, "error: ZeroDivisionError") {
		t.Fatalf("1/0: %+v", res)
	}
	base, err := e.sdkClient().Create(ctx, withruntime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	res, err = tools.Dispatch(ctx, tools.CodeInterpreterTools(base), tools.RunCodeName, json.RawMessage(`{"code": "1", "language": ""}`))
	if err != nil || !res.IsError || !strings.Contains(res.Text, "runtime_exec") {
		t.Fatalf("base template: %+v %v", res, err)
	}
}
