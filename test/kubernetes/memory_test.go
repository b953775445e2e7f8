package kubernetes_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestMemoryLimitOnRealNode: on a real node (gVisor in the pod), a command
// that allocates past the sandbox's memory never gets it: it fails for
// memory (MemoryError, or the agent kills it: oomKilled) and the sandbox
// lives on. Only on a real node: the fake node runs pods as host processes,
// whose memory nothing bounds.
func TestMemoryLimitOnRealNode(t *testing.T) {
	if os.Getenv("WITHRUNTIME_K8S_NODE") != "real" {
		t.Skip("needs a real node (scripts/test-kubernetes.sh --real-node)")
	}
	s := startServer(t)
	api := "http://" + s.addr
	id, _ := create(t, s, `{"template": "base", "memoryMiB": 256, "timeoutSeconds": 600}`)
	status, b := call(t, "POST", api+"/v1/sandboxes/"+id+"/exec", s.key,
		`{"command": "python3 -c \"x=bytearray(1024*1024*1024); print('got', len(x))\"", "timeoutSeconds": 120}`)
	t.Logf("1 GiB allocation in a 256 MiB sandbox: %d %s", status, b)
	if status != http.StatusOK {
		t.Fatalf("exec: %d %s, want the command to fail and the sandbox to live on", status, b)
	}
	var res struct {
		ExitCode  int    `json:"exitCode"`
		Stdout    string `json:"stdout"`
		Stderr    string `json:"stderr"`
		OOMKilled bool   `json:"oomKilled"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || strings.Contains(res.Stdout, "got") {
		t.Fatalf("the allocation succeeded: %+v", res)
	}
	if !strings.Contains(res.Stderr, "MemoryError") && !res.OOMKilled {
		t.Errorf("failed, but not for memory: %+v", res)
	}
	status, b = call(t, "POST", api+"/v1/sandboxes/"+id+"/exec", s.key, `{"command": "echo ok"}`)
	if status != http.StatusOK || !strings.Contains(string(b), `"stdout":"ok\n"`) {
		t.Fatalf("the sandbox after the failed allocation: %d %s", status, b)
	}
	if status, b := call(t, "DELETE", api+"/v1/sandboxes/"+id, s.key, ""); status != http.StatusOK && status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, b)
	}
	assertNothingLeft(t, s)
}
