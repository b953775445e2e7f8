package itest

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"strings"
	"testing"

	withruntime "withruntime.dev/runtime/sdk/go"
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
