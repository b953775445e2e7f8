package kubernetes_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	withruntime "withruntime.dev/runtime/sdk/go"
	"withruntime.dev/runtime/sdk/go/tools"
)

// workspace is where the sandbox's files go: /workspace on a real node; on
// the fake node (pods are host processes, no root filesystem of their own)
// the pod's workspace directory, so that nothing is written to the host's
// own /workspace.
func (s *server) workspace(t *testing.T, id string) string {
	t.Helper()
	if s.nodeDir == "" {
		return withruntime.Workspace
	}
	dirs, _ := filepath.Glob(filepath.Join(s.nodeDir, ns+"_wr-"+strings.ReplaceAll(id, "_", "-")+"_*"))
	if len(dirs) != 1 {
		t.Fatalf("fake node: pod directories of %s: %v", id, dirs)
	}
	return filepath.Join(dirs[0], "workspace")
}

// TestToolsFilesAndLeaseEnd: through `serve --driver kubernetes`, the four
// tools of the SDKs work on a pod (write a program, list it, run it, read
// what it wrote), the file API round-trips bytes, and a sandbox whose lease
// ends is stopped with reason lease_ended and leaves nothing in the
// cluster.
func TestToolsFilesAndLeaseEnd(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	client, err := withruntime.NewClient(withruntime.WithBaseURL("http://"+s.addr), withruntime.WithAPIKey(s.key))
	if err != nil {
		t.Fatal(err)
	}
	sbx, err := client.Create(ctx, withruntime.Options{Template: "base", TimeoutSeconds: 120})
	if err != nil {
		t.Fatal(err)
	}
	ws := s.workspace(t, sbx.ID())
	ts := tools.ForSandbox(sbx)
	call := func(name string, args any) tools.Result {
		t.Helper()
		raw, _ := json.Marshal(args)
		res, err := tools.Dispatch(ctx, ts, name, raw)
		if err != nil || res.IsError {
			t.Fatalf("%s %s: %v %q", name, raw, err, res.Text)
		}
		return res
	}
	prog := filepath.Join(ws, "hello.py")
	out := filepath.Join(ws, "out.txt")
	call(tools.WriteFileName, map[string]any{"path": prog, "content": "open('" + out + "', 'w').write(str(6*7))\nprint('done')\n"})
	if res := call(tools.ListFilesName, map[string]any{"path": ws}); !strings.Contains(res.Text, "hello.py") {
		t.Fatalf("list: %q, want hello.py", res.Text)
	}
	res := call(tools.ExecName, map[string]any{"command": "python3 hello.py", "cwd": ws, "timeoutSeconds": 0})
	if o, ok := res.Data.(*tools.ExecOutput); !ok || o.ExitCode != 0 || strings.TrimSpace(o.Stdout) != "done" {
		t.Fatalf("exec: %q", res.Text)
	}
	if res := call(tools.ReadFileName, map[string]any{"path": out}); !strings.Contains(res.Text, "42") {
		t.Fatalf("read: %q, want 42", res.Text)
	}
	// The file API: bytes (not text) round-trip.
	blob := []byte{0, 1, 2, 0xff, 'x', '\n'}
	if _, err := sbx.Files().WriteFile(ctx, filepath.Join(ws, "blob"), blob); err != nil {
		t.Fatal(err)
	}
	if got, err := sbx.Files().ReadFile(ctx, filepath.Join(ws, "blob")); err != nil || string(got) != string(blob) {
		t.Fatalf("read back %q %v, want %q", got, err, blob)
	}
	if err := sbx.Destroy(ctx); err != nil {
		t.Fatal(err)
	}

	// Lease end: the server stops the sandbox at its lease. On a real node
	// a pod takes about 30 s to start here (the native snapshotter copies
	// the template's image): the lease must outlast that, or the agent
	// ends the sandbox before it first answers.
	lease := int64(2)
	if s.nodeDir == "" {
		lease = 60
	}
	short, err := client.Create(ctx, withruntime.Options{Template: "base", TimeoutSeconds: lease})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Duration(lease+30) * time.Second)
	for {
		info, err := short.Refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State == "stopped" {
			if info.EndReason != "lease_ended" {
				t.Fatalf("end reason %q, want lease_ended", info.EndReason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox still %s 30 s after its %d s lease", info.State, lease)
		}
		time.Sleep(200 * time.Millisecond)
	}
	assertNothingLeft(t, s)
}
