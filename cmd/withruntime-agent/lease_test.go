package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An agent that is not PID 1 of its PID namespace (run on a host, as the
// Kubernetes tests' fake node does) must not end its lease with kill(-1),
// which would kill every process it can signal: the whole machine, as
// root. The test runs it in a PID namespace of its own (unshare) beside a
// sleep it must leave alive, so a wrong agent kills only that namespace.
func TestLeaseEndOutsidePID1KillsOnlyItsOwn(t *testing.T) {
	dir, agent := agentInNamespaces(t)
	past := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	script := `sleep 60 & s=$!; "$0" -socket "$1/a.sock" -user root -workspace "$1/ws" -lease-ends-at "$2" 2>/dev/null; ` +
		`if kill -0 $s 2>/dev/null; then echo alive; kill $s; else echo killed; fi`
	out, err := exec.Command("unshare", "--pid", "--fork", "sh", "-c", script, agent, dir, past).CombinedOutput()
	if err != nil {
		t.Fatalf("unshare: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "alive" {
		t.Fatalf("after the agent's lease end its sibling is %q, want alive", got)
	}
}

// agentInNamespaces skips the test without root or unshare, and otherwise
// builds the agent into a directory of the test's: it returns both.
func agentInNamespaces(t *testing.T) (dir, agent string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for unshare")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	dir = t.TempDir()
	agent = filepath.Join(dir, "agent")
	if out, err := exec.Command("go", "build", "-o", agent, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	return dir, agent
}
