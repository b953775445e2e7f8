package itest

// Field cases C26-C31 (see /work/shared/cases/README.md) and the code
// interpreter's limits, against real kernels.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// C26: a figure left open comes back without plt.show(), as a notebook's
// inline backend shows it; two shows are two PNGs; a closed figure none.
func TestC26FigureWithoutShow(t *testing.T) {
	e := newEnv(t)
	id := e.ciSandbox(api.CreateSandboxRequest{}).ID
	for _, c := range []struct {
		code string
		want int
	}{
		{"import matplotlib.pyplot as plt\nplt.plot([1,2,3])", 1},
		{"plt.plot([1,2,3]); plt.show()\nplt.plot([3,2,1]); plt.show()", 2},
		{"plt.plot([1,2,3]); plt.close()", 0},
		{"fig, ax = plt.subplots(); ax.bar(['a','b'], [1,2]); None", 1},
	} {
		ex := e.code(id, agentapi.RunCodeRequest{Code: c.code})
		if ex.Error != nil {
			t.Fatalf("%q: %+v", c.code, ex.Error)
		}
		imgs := pngs(t, ex)
		if len(imgs) != c.want {
			t.Fatalf("%q: %d PNGs, want %d: %+v", c.code, len(imgs), c.want, ex.Results)
		}
		for _, img := range imgs {
			checkPNG(t, img)
		}
		for _, r := range ex.Results {
			if _, ok := r.Data["image/png"]; ok && r.IsMainResult {
				t.Errorf("%q: a figure is a display, not the cell's value", c.code)
			}
		}
	}
}

// C27: a DataFrame as the cell's value has text/plain and text/html; a
// display() mid-cell is not the main result; print stays in stdout, in order.
func TestC27RichDisplay(t *testing.T) {
	e := newEnv(t)
	id := e.ciSandbox(api.CreateSandboxRequest{}).ID
	ex := e.code(id, agentapi.RunCodeRequest{Code: "import pandas as pd\ndf = pd.DataFrame({'a':[1,2]})\nprint('one')\ndisplay(df)\nprint('two')\ndf"})
	if ex.Error != nil {
		t.Fatal(ex.Error)
	}
	if len(ex.Results) != 2 || ex.Results[0].IsMainResult || !ex.Results[1].IsMainResult {
		t.Fatalf("results %+v, want a display then the main result", ex.Results)
	}
	for _, r := range ex.Results {
		var html, text string
		if json.Unmarshal(r.Data["text/html"], &html) != nil || !strings.Contains(html, "<table") {
			t.Errorf("no HTML table: %s", r.Data["text/html"])
		}
		if json.Unmarshal(r.Data["text/plain"], &text) != nil || !strings.Contains(text, "a") {
			t.Errorf("no text/plain: %s", r.Data["text/plain"])
		}
	}
	if got := stdoutOf(ex); got != "one\ntwo\n" {
		t.Errorf("stdout %q, want \"one\\ntwo\\n\"", got)
	}
	// Each MIME type the issue names comes through as itself.
	ex = e.code(id, agentapi.RunCodeRequest{Code: `from IPython.display import Markdown, SVG, JSON, HTML
display(Markdown("**b**")); display(SVG('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>')); display(JSON({"k": 1})); HTML("<p>h</p>")`})
	if ex.Error != nil || len(ex.Results) != 4 {
		t.Fatalf("%+v", ex)
	}
	for i, mime := range []string{"text/markdown", "image/svg+xml", "application/json", "text/html"} {
		if _, ok := ex.Results[i].Data[mime]; !ok {
			t.Errorf("result %d has no %s: %v", i, mime, ex.Results[i].Data)
		}
	}
	var obj map[string]int
	if err := json.Unmarshal(ex.Results[2].Data["application/json"], &obj); err != nil || obj["k"] != 1 {
		t.Errorf("application/json is not the object: %s", ex.Results[2].Data["application/json"])
	}
}

// C28: a timeout interrupts and leaves a working kernel with its variables.
func TestC28TimeoutKeepsContext(t *testing.T) {
	e := newEnv(t)
	id := e.ciSandbox(api.CreateSandboxRequest{}).ID
	e.code(id, agentapi.RunCodeRequest{Code: "kept = 'yes'"})
	start := time.Now()
	ex := e.code(id, agentapi.RunCodeRequest{Code: "import time; time.sleep(60)", TimeoutSeconds: 2})
	if d := time.Since(start); d < 2*time.Second || d > 4*time.Second {
		t.Errorf("returned after %v, want about 2 s", d)
	}
	if ex.Error == nil || ex.Error.Name != "TimeoutError" || !ex.TimedOut || ex.StateLost ||
		!strings.Contains(ex.Error.Value, "kept") || !strings.Contains(ex.Error.Traceback, "KeyboardInterrupt") {
		t.Fatalf("%+v %+v", ex, ex.Error)
	}
	start = time.Now()
	ex = e.code(id, agentapi.RunCodeRequest{Code: "1+1"})
	if got := mainText(t, ex); got != "2" || time.Since(start) > 2*time.Second {
		t.Fatalf("1+1 = %q after %v", got, time.Since(start))
	}
	if ex.Restarted {
		t.Errorf("reports a restart that did not happen: %+v", ex)
	}
	if got := mainText(t, e.code(id, agentapi.RunCodeRequest{Code: "kept"})); got != "'yes'" {
		t.Fatalf("kept = %q", got)
	}
}

// C29: a cell that ignores SIGINT gets its kernel restarted after a short
// grace, and both that answer and the next say plainly that state was lost.
func TestC29Uninterruptible(t *testing.T) {
	e := newEnv(t)
	id := e.ciSandbox(api.CreateSandboxRequest{}).ID
	e.code(id, agentapi.RunCodeRequest{Code: "kept = 1"})
	start := time.Now()
	ex := e.code(id, agentapi.RunCodeRequest{Code: "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", TimeoutSeconds: 2})
	d := time.Since(start)
	if d < 2*time.Second || d > 6*time.Second {
		t.Errorf("returned after %v, want the timeout plus a short grace", d)
	}
	if ex.Error == nil || ex.Error.Name != "TimeoutError" || !ex.TimedOut || !ex.StateLost ||
		!strings.Contains(ex.Error.Value, "lost") || !strings.Contains(ex.Notice, "lost") {
		t.Fatalf("%+v %+v", ex, ex.Error)
	}
	ex = e.code(id, agentapi.RunCodeRequest{Code: "1+1"})
	if got := mainText(t, ex); got != "2" || !ex.Restarted || !strings.Contains(ex.Notice, "gone") {
		t.Fatalf("next call: %q %+v", got, ex)
	}
	ex = e.code(id, agentapi.RunCodeRequest{Code: "kept"})
	if ex.Error == nil || ex.Error.Name != "NameError" || ex.Restarted {
		t.Fatalf("a variable survived a restart, or the notice repeats: %+v %+v", ex, ex.Error)
	}
	var c agentapi.Context
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+id+"/contexts/default", nil, &c)
	if c.Restarts != 1 || c.State != "idle" {
		t.Errorf("context %+v, want 1 restart and idle", c)
	}
}

// C30: nothing waits for input.
func TestC30NoInput(t *testing.T) {
	e := newEnv(t)
	id := e.ciSandbox(api.CreateSandboxRequest{}).ID
	e.code(id, agentapi.RunCodeRequest{Code: "1"}) // the kernel's start is not the case
	for _, code := range []string{"input()", "%%bash\nread x\necho \"got:[$x]\"", "import sys; sys.stdin.read()", "import getpass; getpass.getpass()"} {
		start := time.Now()
		ex := e.code(id, agentapi.RunCodeRequest{Code: code, TimeoutSeconds: 30})
		if d := time.Since(start); d > time.Second {
			t.Errorf("%q took %v", code, d)
		}
		if ex.TimedOut {
			t.Errorf("%q timed out", code)
		}
		t.Logf("%q: error %+v stdout %q", code, ex.Error, stdoutOf(ex))
	}
	ex := e.code(id, agentapi.RunCodeRequest{Code: "input('name? ')"})
	if ex.Error == nil || !strings.Contains(ex.Error.Name, "StdinNotImplemented") {
		t.Errorf("input() error %+v, want StdinNotImplementedError", ex.Error)
	}
}

// C31: the kernel works in /workspace as the sandbox user, and files go
// both ways between cells and the file API.
func TestC31SharedWorkspace(t *testing.T) {
	e := newEnv(t)
	id := e.ciSandbox(api.CreateSandboxRequest{}).ID
	ex := e.code(id, agentapi.RunCodeRequest{Code: "import os; open('out.csv','w').write('a,b\\n'); print(os.getcwd(), os.getuid())"})
	if got := stdoutOf(ex); got != "/workspace 1000\n" {
		t.Fatalf("cwd and uid %q, want \"/workspace 1000\\n\" (%+v)", got, ex.Error)
	}
	status, body := e.do("GET", "/v1/sandboxes/"+id+"/files?path=out.csv", nil)
	if status != 200 || string(body) != "a,b\n" {
		t.Fatalf("read out.csv: %d %q", status, body)
	}
	e.must(http.StatusOK, "PUT", "/v1/sandboxes/"+id+"/files?path=in.txt", "from the API", nil)
	if got := mainText(t, e.code(id, agentapi.RunCodeRequest{Code: "open('in.txt').read()"})); got != "'from the API'" {
		t.Fatalf("in.txt from a cell: %q", got)
	}
}

// Two contexts do not see each other's variables; the contexts API.
func TestCodeContexts(t *testing.T) {
	e := newEnv(t)
	id := e.ciSandbox(api.CreateSandboxRequest{}).ID
	base := "/v1/sandboxes/" + id
	var a, b agentapi.Context
	e.must(http.StatusCreated, "POST", base+"/contexts", agentapi.CreateContextRequest{}, &a)
	e.must(http.StatusCreated, "POST", base+"/contexts", agentapi.CreateContextRequest{Cwd: "/tmp", Env: map[string]string{"WHO": "b"}}, &b)
	if a.ID == b.ID || a.State != "idle" || b.Cwd != "/tmp" {
		t.Fatalf("%+v %+v", a, b)
	}
	e.code(id, agentapi.RunCodeRequest{Code: "v = 'a'", ContextID: a.ID})
	e.code(id, agentapi.RunCodeRequest{Code: "v = 'b'", ContextID: b.ID})
	if got := mainText(t, e.code(id, agentapi.RunCodeRequest{Code: "v", ContextID: a.ID})); got != "'a'" {
		t.Fatalf("a sees v = %q", got)
	}
	ex := e.code(id, agentapi.RunCodeRequest{Code: "import os; v, os.getcwd(), os.environ.get('WHO')", ContextID: b.ID})
	if got := mainText(t, ex); got != "('b', '/tmp', 'b')" {
		t.Fatalf("b: %q", got)
	}
	if ex := e.code(id, agentapi.RunCodeRequest{Code: "v"}); ex.Error == nil || ex.Error.Name != "NameError" {
		t.Fatalf("the default context sees another's variable: %+v", ex)
	}
	// Per-call env, put back afterwards.
	ex = e.code(id, agentapi.RunCodeRequest{Code: "os.environ['WHO'], os.environ.get('EXTRA')", ContextID: b.ID, Env: map[string]string{"WHO": "call", "EXTRA": "x"}})
	if got := mainText(t, ex); got != "('call', 'x')" {
		t.Fatalf("per-call env: %q %+v", got, ex.Error)
	}
	if got := mainText(t, e.code(id, agentapi.RunCodeRequest{Code: "os.environ['WHO'], os.environ.get('EXTRA')", ContextID: b.ID})); got != "('b', None)" {
		t.Fatalf("env after the call: %q", got)
	}
	// ... also after a cell that raised, and the next cell runs. ipykernel
	// aborted the request right after a failing one while stop_on_error
	// was on (the env's restore: the env leaked into later cells). A
	// thread that holds the GIL widens that window as load does.
	for i := 0; i < 10; i++ {
		e.code(id, agentapi.RunCodeRequest{Code: "import threading; threading.Thread(target=lambda: sum(range(3 * 10**6))).start(); 1/0", ContextID: b.ID, Env: map[string]string{"WHO": "failed"}})
		ex := e.code(id, agentapi.RunCodeRequest{Code: "os.environ['WHO']", ContextID: b.ID})
		if got := mainText(t, ex); got != "'b'" || ex.Error != nil {
			t.Fatalf("call %d after a failing cell with env: %q %+v", i, got, ex.Error)
		}
	}
	var list agentapi.ContextList
	e.must(http.StatusOK, "GET", base+"/contexts", nil, &list)
	if len(list.Contexts) != 3 {
		t.Fatalf("%d contexts, want 3 (a, b, default): %+v", len(list.Contexts), list)
	}
	// Restart loses the state; delete removes the context.
	var r agentapi.Context
	e.must(http.StatusOK, "POST", base+"/contexts/"+a.ID+"/restart", nil, &r)
	if r.Restarts != 1 {
		t.Errorf("restart: %+v", r)
	}
	if ex := e.code(id, agentapi.RunCodeRequest{Code: "v", ContextID: a.ID}); ex.Error == nil || ex.Error.Name != "NameError" || ex.Restarted {
		t.Fatalf("after restart: %+v %+v", ex, ex.Error)
	}
	e.must(http.StatusNoContent, "DELETE", base+"/contexts/"+a.ID, nil, nil)
	status, body := e.do("POST", base+"/code", agentapi.RunCodeRequest{Code: "1", ContextID: a.ID})
	if status != http.StatusNotFound || errorCode(t, body) != agentapi.CodeNotFound {
		t.Fatalf("deleted context: %d %s", status, body)
	}
	status, body = e.do("POST", base+"/code", agentapi.RunCodeRequest{Code: "1", Language: "cobol"})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "python") {
		t.Fatalf("unknown language: %d %s", status, body)
	}
}

// A sandbox without kernels says so.
func TestCodeNeedsKernels(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	status, body := e.do("POST", "/v1/sandboxes/"+sb.ID+"/code", agentapi.RunCodeRequest{Code: "1"})
	if status != http.StatusNotImplemented || errorCode(t, body) != agentapi.CodeNotImplemented || !strings.Contains(string(body), "code-interpreter") {
		t.Fatalf("%d %s", status, body)
	}
}

// A memory bomb is reported as out of memory, the context restarts with a
// notice, and the sandbox goes on.
func TestCodeMemoryBomb(t *testing.T) {
	e := newEnv(t)
	id := e.ciSandbox(api.CreateSandboxRequest{MemoryMiB: 512}).ID
	e.code(id, agentapi.RunCodeRequest{Code: "kept = 1"})
	ex := e.code(id, agentapi.RunCodeRequest{Code: "hog = []\nwhile True: hog.append(b'x' * (32 << 20))", TimeoutSeconds: 60})
	if ex.Error == nil || ex.Error.Name != "OutOfMemoryError" || !ex.OutOfMemory || !ex.StateLost || !strings.Contains(ex.Error.Value, "memory") {
		t.Fatalf("%+v %+v", ex, ex.Error)
	}
	if r := e.sh(id, "echo ok"); r.Stdout != "ok\n" {
		t.Fatalf("sandbox after the bomb: %+v", r)
	}
	ex = e.code(id, agentapi.RunCodeRequest{Code: "'kept' in globals()"})
	if got := mainText(t, ex); got != "False" || !ex.Restarted || !strings.Contains(ex.Notice, "memory") {
		t.Fatalf("next call: %q %+v", got, ex)
	}
}
