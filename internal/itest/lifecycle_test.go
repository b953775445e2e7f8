package itest

import (
	"net/http"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

func TestCreateExecDestroy(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{Metadata: map[string]string{"task": "t1"}})
	if sb.State != "running" || sb.Template != "base" || sb.CPU != 1 || sb.MemoryMiB != 512 || sb.Metadata["task"] != "t1" {
		t.Fatalf("created sandbox: %+v", sb)
	}
	if d := sb.LeaseEndsAt.Sub(sb.CreatedAt).Seconds(); d != 300 {
		t.Fatalf("default lease %vs, want 300s", d)
	}
	res := e.exec(sb.ID, agentapi.ExecRequest{Argv: []string{"python3", "-c", "print(6*7)"}})
	if res.ExitCode != 0 || res.Stdout != "42\n" {
		t.Fatalf("python3: %+v", res)
	}
	res = e.sh(sb.ID, "dmesg | head -1; id -un; pwd; echo $HOME")
	if !strings.Contains(res.Stdout, "gVisor") || !strings.Contains(res.Stdout, "user\n/workspace\n/home/user\n") {
		t.Fatalf("sandbox identity: %+v", res)
	}
	var list api.SandboxList
	e.must(http.StatusOK, "GET", "/v1/sandboxes?metadata.task=t1", nil, &list)
	if len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != sb.ID {
		t.Fatalf("list by metadata: %+v", list)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
	var got api.Sandbox
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID, nil, &got)
	if got.State != "stopped" || got.EndReason != "deleted" {
		t.Fatalf("after delete: %+v", got)
	}
	status, body := e.do("POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Command: "true"})
	if status != http.StatusGone || errorCode(t, body) != "sandbox_stopped" {
		t.Fatalf("exec on destroyed: %d %s", status, body)
	}
}

func TestExitCodes(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	for _, c := range []struct {
		cmd    string
		code   int
		signal string
		stderr string
	}{
		{"exit 3", 3, "", ""},
		{"true", 0, "", ""},
		{"kill -9 $$", 137, "SIGKILL", ""},
		{"kill -TERM $$", 143, "SIGTERM", ""},
		{"nonexistent-cmd-xyz", 127, "", "not found"},
		{"printf out; printf err >&2; exit 7", 7, "", "err"},
	} {
		res := e.sh(sb.ID, c.cmd)
		if res.ExitCode != c.code || res.Signal != c.signal || !strings.Contains(res.Stderr, c.stderr) {
			t.Errorf("%q: %+v, want exit %d signal %q stderr containing %q", c.cmd, res, c.code, c.signal, c.stderr)
		}
	}
}
