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
// after it was reaped.
func TestUsageCountsABusyChild(t *testing.T) {
	before := ownCPUSeconds() + descendantsCPUSeconds(scanProcs(), os.Getpid())
	cmd := exec.Command("sh", "-c", "end=$(($(date +%s)+2)); while [ $(date +%s) -lt $end ]; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	during := ownCPUSeconds() + descendantsCPUSeconds(scanProcs(), os.Getpid())
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	after := ownCPUSeconds() + descendantsCPUSeconds(scanProcs(), os.Getpid())
	t.Logf("before %.2f s, during %.2f s, after %.2f s", before, during, after)
	if during-before < 0.3 || after-before < 0.6 || after < during {
		t.Fatalf("before %.2f, during %.2f, after %.2f: want the busy child counted while it runs and after", before, during, after)
	}
}
