package itest

import (
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
