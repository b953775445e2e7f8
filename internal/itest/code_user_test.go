package itest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// TestCodeContextUser: a context runs its kernel as "user" (default) or
// "root"; a cwd its user cannot enter is refused with a 400 that says so
// (it used to fail as "permission denied starting /usr/bin/python3").
func TestCodeContextUser(t *testing.T) {
	e := newEnv(t)
	id := e.ciSandbox(api.CreateSandboxRequest{}).ID
	base := "/v1/sandboxes/" + id
	st, body := e.do("POST", base+"/contexts", agentapi.CreateContextRequest{Cwd: "/root"})
	if st != http.StatusBadRequest || !strings.Contains(string(body), "can enter") || !strings.Contains(string(body), "root") {
		t.Fatalf("a user context in /root: %d %s", st, body)
	}
	var c agentapi.Context
	e.must(http.StatusCreated, "POST", base+"/contexts", agentapi.CreateContextRequest{Cwd: "/root", User: "root"}, &c)
	if c.User != "root" || c.Cwd != "/root" {
		t.Fatalf("%+v", c)
	}
	ex := e.code(id, agentapi.RunCodeRequest{ContextID: c.ID, Code: "import os; print(os.getcwd(), os.geteuid())"})
	if stdoutOf(ex) != "/root 0\n" {
		t.Fatalf("root context: %q %+v", stdoutOf(ex), ex.Error)
	}
	var d agentapi.Context
	e.must(http.StatusCreated, "POST", base+"/contexts", agentapi.CreateContextRequest{}, &d)
	if d.User != "user" {
		t.Fatalf("default user: %+v", d)
	}
	if st, body := e.do("POST", base+"/contexts", agentapi.CreateContextRequest{User: "nobody"}); st != http.StatusBadRequest {
		t.Fatalf("user nobody: %d %s", st, body)
	}
	// Commands take the same check.
	if st, body := e.do("POST", base+"/exec", agentapi.ExecRequest{Command: "pwd", Cwd: "/root"}); st != http.StatusBadRequest ||
		!strings.Contains(string(body), "can enter") {
		t.Fatalf("exec as user in /root: %d %s", st, body)
	}
	if res := e.exec(id, agentapi.ExecRequest{Command: "pwd", Cwd: "/root", User: "root"}); res.Stdout != "/root\n" {
		t.Fatalf("exec as root in /root: %+v", res)
	}
}

// TestCodeContextMove: PATCH .../contexts/{id} {cwd} moves a running
// kernel (its variables kept, no execution counted), makes a default
// context not yet started in the directory given (the sandbox's first cell
// runs there), and refuses a directory the kernel's user cannot enter or
// that does not exist. A directory whose name holds quotes and a newline
// is taken as a name, never as code.
func TestCodeContextMove(t *testing.T) {
	e := newEnv(t)
	id := e.ciSandbox(api.CreateSandboxRequest{}).ID
	base := "/v1/sandboxes/" + id
	var c agentapi.Context
	e.must(http.StatusOK, "PATCH", base+"/contexts/default", agentapi.UpdateContextRequest{Cwd: "/tmp"}, &c)
	if c.ID != agentapi.DefaultContextID || c.Cwd != "/tmp" {
		t.Fatalf("default moved: %+v", c)
	}
	ex := e.code(id, agentapi.RunCodeRequest{Code: "import os; kept = 42; print(os.getcwd())"})
	if stdoutOf(ex) != "/tmp\n" {
		t.Fatalf("the first cell: %q %+v", stdoutOf(ex), ex.Error)
	}
	odd := "/workspace/it's \"odd\"\n');import os;os._exit(3);('"
	e.exec(id, agentapi.ExecRequest{Argv: []string{"mkdir", "-p", odd}})
	e.must(http.StatusOK, "PATCH", base+"/contexts/default", agentapi.UpdateContextRequest{Cwd: odd}, &c)
	ex = e.code(id, agentapi.RunCodeRequest{Code: "import os; print(os.getcwd() == " + pyString(odd) + ", kept)"})
	if stdoutOf(ex) != "True 42\n" || ex.ExecutionCount != 2 {
		t.Fatalf("after a move: %q count %d %+v", stdoutOf(ex), ex.ExecutionCount, ex.Error)
	}
	if st, body := e.do("PATCH", base+"/contexts/default", agentapi.UpdateContextRequest{Cwd: "/root"}); st != http.StatusBadRequest ||
		!strings.Contains(string(body), "can enter") {
		t.Fatalf("a user kernel to /root: %d %s", st, body)
	}
	if st, body := e.do("PATCH", base+"/contexts/default", agentapi.UpdateContextRequest{Cwd: "/nowhere"}); st != http.StatusBadRequest {
		t.Fatalf("a missing directory: %d %s", st, body)
	}
	if st, body := e.do("PATCH", base+"/contexts/ctx_0000000000000000", agentapi.UpdateContextRequest{Cwd: "/tmp"}); st != http.StatusNotFound {
		t.Fatalf("a missing context: %d %s", st, body)
	}
	// A restart starts the new kernel where the context was moved.
	e.must(http.StatusOK, "POST", base+"/contexts/default/restart", nil, &c)
	if ex = e.code(id, agentapi.RunCodeRequest{Code: "import os; print(os.getcwd() == " + pyString(odd) + ")"}); stdoutOf(ex) != "True\n" {
		t.Fatalf("after a restart: %q %+v", stdoutOf(ex), ex.Error)
	}
}

// pyString is s as a Python string literal.
func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
