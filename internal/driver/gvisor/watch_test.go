package gvisor

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// startFake starts a process whose command line names a sandbox bundle the
// way runsc-sandbox's does, living for d.
func startFake(t *testing.T, id string, d time.Duration) *exec.Cmd {
	t.Helper()
	secs := strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
	cmd := exec.Command("sh", "-c", "sleep "+secs, "/state/sandboxes/"+id+"/bundle")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func TestWaitPidReturnsWhenTheProcessExits(t *testing.T) {
	cmd := startFake(t, "sbx_a", 300*time.Millisecond)
	start := time.Now()
	if err := waitPid(context.Background(), cmd.Process.Pid, "sbx_a"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 200*time.Millisecond || took > 2*time.Second {
		t.Fatalf("waitPid returned after %s for a process living 300ms", took)
	}
}

func TestWaitPidStopsWithTheContext(t *testing.T) {
	cmd := startFake(t, "sbx_b", 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := waitPid(ctx, cmd.Process.Pid, "sbx_b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waitPid: %v, want the context's error", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("waitPid took %s to notice its context ended", took)
	}
}

func TestWaitPidIgnoresAnotherProcess(t *testing.T) {
	cmd := startFake(t, "sbx_c", 30*time.Second)
	// The pid is alive but is not sandbox sbx_other's: it counts as exited.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := waitPid(ctx, cmd.Process.Pid, "sbx_other"); err != nil {
		t.Fatalf("waitPid on a reused pid: %v", err)
	}
}

func TestHostPidsLimit(t *testing.T) {
	if got := hostPidsLimit(0); got != 0 {
		t.Errorf("no limit: %d", got)
	}
	if got := hostPidsLimit(1024); got < 4*1024 {
		t.Errorf("host pids limit %d leaves no room for gVisor's host tasks of 1024 processes", got)
	}
}
