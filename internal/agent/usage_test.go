package agent

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestDescendantsCPUSeconds: only self's descendants count, each with its
// reaped children's time.
func TestDescendantsCPUSeconds(t *testing.T) {
	procs := []procEntry{
		{pid: 10, ppid: 1, cpuTicks: 1000},                 // self: counted by getrusage, not here
		{pid: 11, ppid: 10, cpuTicks: 100, childTicks: 50}, // a command
		{pid: 12, ppid: 11, cpuTicks: 200},                 // its child
		{pid: 20, ppid: 1, cpuTicks: 5000},                 // not ours
		{pid: 21, ppid: 20, cpuTicks: 7000},                // not ours either
		{pid: 30, ppid: 31, cpuTicks: 9000},                // a loop of parents
		{pid: 31, ppid: 30, cpuTicks: 9000},
	}
	if got := descendantsCPUSeconds(procs, 10); got != 3.5 {
		t.Fatalf("got %v s, want 3.5 (350 ticks)", got)
	}
}

// TestUsageCountsABusyChild: a busy child is counted while it runs and
// after it was reaped. The child spends a fixed amount of CPU time (not of
// wall time: on a loaded host a child busy for 2 s of wall time got 0.6 s of
// CPU and the test failed), and "during" is read once it has spent some.
func TestUsageCountsABusyChild(t *testing.T) {
	before := ownCPUSeconds() + descendantsCPUSeconds(scanProcs(), os.Getpid())
	cmd := exec.Command("python3", "-c", "import time\nwhile time.process_time() < 1.0: pass")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	during := before
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if during = ownCPUSeconds() + descendantsCPUSeconds(scanProcs(), os.Getpid()); during-before >= 0.4 {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	after := ownCPUSeconds() + descendantsCPUSeconds(scanProcs(), os.Getpid())
	t.Logf("before %.2f s, during %.2f s, after %.2f s", before, during, after)
	if during-before < 0.4 || after-before < 0.95 || after < during {
		t.Fatalf("before %.2f, during %.2f, after %.2f: want the busy child's 1 s counted while it runs and after", before, during, after)
	}
}
