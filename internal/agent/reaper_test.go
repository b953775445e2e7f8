package agent

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// TestPID1ReapsZombies runs the real binary as PID 1 of a new PID namespace
// (unshare, root only) and checks that orphans do not stay zombies.
func TestPID1ReapsZombies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent binary")
	}
	if os.Getuid() != 0 {
		t.Skip("needs root for a PID namespace")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare")
	}
	t.Parallel()
	dir := shortTempDir(t)
	bin := filepath.Join(dir, "agent")
	build := exec.Command("go", "build", "-o", bin, "withruntime.dev/runtime/cmd/withruntime-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "a.sock")
	ws := t.TempDir()
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "--kill-child",
		bin, "--socket", sock, "--user", currentUser(t), "--workspace", ws)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	a := newClientAgent(t, sock, ws)
	eventually(t, 5*time.Second, "agent listening", func() bool {
		resp, err := a.client.Get("http://agent/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	res := a.exec(agentapi.ExecRequest{Command: `ps -o pid= -p 1 >/dev/null && echo "init=$(ps -o args= -p 1)"`})
	if res.ExitCode != 0 {
		t.Fatalf("ps: %+v", res)
	}
	res = a.exec(agentapi.ExecRequest{Command: `for i in 1 2 3 4 5; do sh -c "sh -c 'sleep 1' &" & wait; done; sleep 3; ps -eo stat= | grep -c '^Z'`})
	if res.Stdout != "0\n" {
		t.Fatalf("zombies: %+v", res)
	}
	// Exit codes still reach the agent (the reaper does not steal them).
	if res := a.exec(agentapi.ExecRequest{Command: "exit 7"}); res.ExitCode != 7 {
		t.Fatalf("exit code under pid 1: %+v", res)
	}
}
