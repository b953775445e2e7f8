package itest

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpSession starts `withruntime mcp` with args as an MCP client does (a
// command on stdin/stdout) and returns its session and its instructions.
func (e *env) mcpSession(args ...string) (*mcp.ClientSession, string) {
	e.t.Helper()
	cmd := exec.Command(buildWithruntime(e.t), append([]string{"mcp"}, args...)...)
	cmd.Env = append(os.Environ(), "WITHRUNTIME_URL="+e.http.URL, "WITHRUNTIME_API_KEY="+e.key)
	client := mcp.NewClient(&mcp.Implementation{Name: "itest", Version: "0.0.1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs, cs.InitializeResult().Instructions
}

// TestMCPVolume: `withruntime mcp --volume NAME:PATH[:ro]` mounts the key's
// volume in each session's sandbox, so that what one session writes there
// outlives it and another session reads it; a read-only mount refuses
// writes; the model is told where the volumes are; a volume the key does
// not have, or a bad --volume, is refused at start.
func TestMCPVolume(t *testing.T) {
	e := newEnv(t)
	e.createVolume("mcpvol", 32)

	cs, instr := e.mcpSession("--lease", "10m", "--volume", "mcpvol:/data")
	if !strings.Contains(instr, "Persistent storage is mounted at /data") {
		t.Errorf("instructions: %q", instr)
	}
	if res := mcpCall(t, cs, "runtime_write_file", map[string]any{"path": "/data/notes.md", "content": "kept across sessions\n"}); res.IsError {
		t.Fatalf("write: %q", mcpText(t, res))
	}
	running := e.running()
	if len(running) != 1 || len(running[0].Volumes) != 1 || running[0].Volumes[0].Name != "mcpvol" || running[0].Volumes[0].Path != "/data" {
		t.Fatalf("the session's sandbox: %+v", running)
	}
	cs.Close()
	waitFor(t, 15*time.Second, "the first session's sandbox to be destroyed", func() bool { return len(e.running()) == 0 })
	if st, body := e.do("GET", "/v1/volumes/mcpvol/files?path=/notes.md", nil); st != http.StatusOK || string(body) != "kept across sessions\n" {
		t.Fatalf("the volume after the session: %d %q", st, body)
	}

	ro, instr := e.mcpSession("--lease", "10m", "--volume", "mcpvol:/srv:ro")
	if !strings.Contains(instr, "/srv (read-only)") {
		t.Errorf("instructions: %q", instr)
	}
	if text := mcpText(t, mcpCall(t, ro, "runtime_exec", map[string]any{"command": "cat /srv/notes.md"})); !strings.Contains(text, "kept across sessions") {
		t.Fatalf("a later session reads the volume: %q", text)
	}
	if text := mcpText(t, mcpCall(t, ro, "runtime_exec", map[string]any{"command": "echo x > /srv/other"})); !strings.Contains(text, "Read-only file system") {
		t.Fatalf("a write to a read-only mount: %q", text)
	}

	for _, c := range []struct{ flag, want string }{
		{"novol:/data", `no volume "novol"`},
		{"mcpvol", "want NAME:PATH"},
	} {
		r := e.cli(nil, "mcp", "--volume", c.flag)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("mcp --volume %s: %+v, want an error saying %q", c.flag, r, c.want)
		}
	}
}
