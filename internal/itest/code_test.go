package itest

// The code interpreter (POST /v1/sandboxes/{id}/code, /contexts) against
// real ipykernel kernels in sandboxes of the code-interpreter template,
// which is built on first use (a few minutes, then cached in the
// templates directory like base).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/template"
)

var (
	ciOnce sync.Once
	ciErr  error
)

// needCodeInterpreter builds the code-interpreter template if it is
// missing or stale, once per test binary.
func needCodeInterpreter(t *testing.T) {
	t.Helper()
	ciOnce.Do(func() {
		start := time.Now()
		ts := &template.Store{Dir: templatesDir}
		_, ciErr = ts.Ensure(context.Background(), template.CodeInterpreter, func(p template.Progress) {
			if p.Done {
				fmt.Fprintf(os.Stderr, "itest: template %s: %s (%.0fs)\n", template.CodeInterpreter, p.Step, p.Elapsed.Seconds())
			}
		})
		if d := time.Since(start); d > 5*time.Second {
			fmt.Fprintf(os.Stderr, "itest: template %s built in %.0fs\n", template.CodeInterpreter, d.Seconds())
		}
	})
	if ciErr != nil {
		t.Fatalf("template %s: %v", template.CodeInterpreter, ciErr)
	}
}

// ciSandbox creates a sandbox of the code-interpreter template.
func (e *env) ciSandbox(req api.CreateSandboxRequest) api.Sandbox {
	e.t.Helper()
	needCodeInterpreter(e.t)
	req.Template = template.CodeInterpreter
	return e.create(req)
}

// code runs a cell and decodes the Execution.
func (e *env) code(id string, req agentapi.RunCodeRequest) agentapi.Execution {
	e.t.Helper()
	var ex agentapi.Execution
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+id+"/code", req, &ex)
	return ex
}

// mainText is the text/plain of the execution's main result ("" if none).
func mainText(t *testing.T, ex agentapi.Execution) string {
	t.Helper()
	for _, r := range ex.Results {
		if r.IsMainResult {
			var s string
			if err := json.Unmarshal(r.Data["text/plain"], &s); err != nil {
				t.Fatalf("main result's text/plain: %v", err)
			}
			return s
		}
	}
	return ""
}

func pngs(t *testing.T, ex agentapi.Execution) [][]byte {
	t.Helper()
	var out [][]byte
	for _, r := range ex.Results {
		raw, ok := r.Data["image/png"]
		if !ok {
			continue
		}
		var b64 string
		if err := json.Unmarshal(raw, &b64); err != nil {
			t.Fatalf("image/png is not a string: %v", err)
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			t.Fatalf("image/png is not base64: %v", err)
		}
		out = append(out, b)
	}
	return out
}

// checkPNG decodes a PNG and checks its signature and dimensions.
func checkPNG(t *testing.T, b []byte) {
	t.Helper()
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("not a PNG signature: % x", b[:min(8, len(b))])
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if cfg.Width < 100 || cfg.Height < 100 || cfg.Width > 5000 || cfg.Height > 5000 {
		t.Fatalf("PNG of %dx%d, want a chart-sized image", cfg.Width, cfg.Height)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Fatalf("PNG pixels do not decode: %v", err)
	}
}

func stdoutOf(ex agentapi.Execution) string { return strings.Join(ex.Logs.Stdout, "") }

func TestCodeInterpreter(t *testing.T) {
	e := newEnv(t)
	sb := e.ciSandbox(api.CreateSandboxRequest{})
	id := sb.ID

	t.Run("variables persist", func(t *testing.T) {
		ex := e.code(id, agentapi.RunCodeRequest{Code: "x = 41"})
		if ex.Error != nil || ex.ContextID != agentapi.DefaultContextID {
			t.Fatalf("%+v", ex)
		}
		ex = e.code(id, agentapi.RunCodeRequest{Code: "x + 1"})
		if got := mainText(t, ex); got != "42" || ex.ExecutionCount < 2 {
			t.Fatalf("x + 1 = %q (count %d): %+v", got, ex.ExecutionCount, ex)
		}
	})

	t.Run("png", func(t *testing.T) {
		ex := e.code(id, agentapi.RunCodeRequest{Code: "import matplotlib.pyplot as plt\nplt.plot([1,2,3]); plt.show()"})
		if ex.Error != nil {
			t.Fatalf("%+v", ex.Error)
		}
		imgs := pngs(t, ex)
		if len(imgs) != 1 {
			t.Fatalf("%d PNGs, want 1: %+v", len(imgs), ex)
		}
		checkPNG(t, imgs[0])
	})

	t.Run("ZeroDivisionError", func(t *testing.T) {
		ex := e.code(id, agentapi.RunCodeRequest{Code: "1/0"})
		if ex.Error == nil || ex.Error.Name != "ZeroDivisionError" || !strings.Contains(ex.Error.Traceback, "ZeroDivisionError") {
			t.Fatalf("error = %+v", ex.Error)
		}
		if strings.Contains(ex.Error.Traceback, "\x1b[") {
			t.Errorf("traceback has ANSI escapes: %q", ex.Error.Traceback)
		}
		if got := mainText(t, e.code(id, agentapi.RunCodeRequest{Code: "x * 2"})); got != "82" {
			t.Fatalf("after the error x * 2 = %q", got)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		ex := e.code(id, agentapi.RunCodeRequest{Code: "while True: pass", TimeoutSeconds: 2})
		d := time.Since(start)
		if ex.Error == nil || ex.Error.Name != "TimeoutError" || !ex.TimedOut || ex.StateLost {
			t.Fatalf("%+v %+v", ex, ex.Error)
		}
		if d < 2*time.Second || d > 4*time.Second {
			t.Errorf("returned after %v, want about 2 s", d)
		}
		if got := mainText(t, e.code(id, agentapi.RunCodeRequest{Code: "x"})); got != "41" {
			t.Fatalf("after the timeout x = %q", got)
		}
	})

	t.Run("stream", func(t *testing.T) {
		status, body := e.do("POST", "/v1/sandboxes/"+id+"/code",
			agentapi.RunCodeRequest{Code: "print('a')\nimport sys; print('b', file=sys.stderr)\ndisplay(1)\n2"},
			"Accept", agentapi.ContentTypeNDJSON)
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		var types []string
		sc := bufio.NewScanner(bytes.NewReader(body))
		for sc.Scan() {
			var ev agentapi.CodeEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("%q: %v", sc.Text(), err)
			}
			if ev.Type != agentapi.EventHeartbeat {
				types = append(types, ev.Type)
			}
		}
		if got := strings.Join(types, ","); got != "start,stdout,stderr,result,result,end" {
			t.Fatalf("events %s:\n%s", got, body)
		}
	})
}
