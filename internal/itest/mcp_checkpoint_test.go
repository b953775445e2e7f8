package itest

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/api"
)

// TestMCPCheckpoints: `withruntime mcp --checkpoints` lists
// runtime_checkpoint and runtime_rollback; a checkpoint saves the
// session's sandbox with a running process; after a change, a rollback
// continues in a copy of the checkpoint (the file as it was, the process
// still running) and destroys the sandbox it replaced; an id that is not
// the session's is refused; the checkpoints are deleted with the session.
func TestMCPCheckpoints(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.mcpSession("--lease", "10m", "--checkpoints")
	mustText := func(name string, args map[string]any) string {
		t.Helper()
		res := mcpCall(t, cs, name, args)
		if res.IsError {
			t.Fatalf("%s: %q", name, mcpText(t, res))
		}
		return mcpText(t, res)
	}
	mustText("runtime_write_file", map[string]any{"path": "state.txt", "content": "before"})
	mustText("runtime_exec", map[string]any{"command": "nohup sleep 900 >/dev/null 2>&1 &"})
	text := mustText("runtime_checkpoint", map[string]any{})
	id := regexp.MustCompile(`snap_[a-z0-9]+`).FindString(text)
	if id == "" {
		t.Fatalf("checkpoint answered %q", text)
	}
	first := e.running()
	mustText("runtime_write_file", map[string]any{"path": "state.txt", "content": "after a bad change"})

	if res := mcpCall(t, cs, "runtime_rollback", map[string]any{"checkpoint": "snap_notmine"}); !res.IsError || !strings.Contains(mcpText(t, res), "no checkpoint") {
		t.Errorf("a foreign checkpoint: %q", mcpText(t, res))
	}
	mustText("runtime_rollback", map[string]any{"checkpoint": id})
	if got := mustText("runtime_read_file", map[string]any{"path": "state.txt"}); !strings.Contains(got, "before") || strings.Contains(got, "bad change") {
		t.Errorf("after the rollback: %q", got)
	}
	if got := mustText("runtime_exec", map[string]any{"command": "pgrep -x sleep >/dev/null && echo running"}); !strings.Contains(got, "running") {
		t.Errorf("the checkpoint's process: %q", got)
	}
	now := e.running()
	if len(first) != 1 || len(now) != 1 || now[0].ID == first[0].ID {
		t.Errorf("sandboxes before %v and after %v the rollback: want one each, a new one", first, now)
	}
	// Roll back again to the same checkpoint.
	mustText("runtime_write_file", map[string]any{"path": "state.txt", "content": "again"})
	mustText("runtime_rollback", map[string]any{"checkpoint": id})
	if got := mustText("runtime_read_file", map[string]any{"path": "state.txt"}); !strings.Contains(got, "before") {
		t.Errorf("after the second rollback: %q", got)
	}
	cs.Close()
	waitFor(t, 15*time.Second, "the session's sandbox and checkpoint to go", func() bool {
		var list api.SnapshotList
		e.must(http.StatusOK, "GET", "/v1/snapshots", nil, &list)
		return len(e.running()) == 0 && len(list.Snapshots) == 0
	})
}
