package gvisor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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
	// Until the child has exec'd sh, its command line is the test
	// binary's, which names no sandbox (seen under load in CI).
	for deadline := time.Now().Add(5 * time.Second); !isSandboxProcess(cmd.Process.Pid, id); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the fake sandbox process of %s never showed its bundle on its command line", id)
		}
	}
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

func TestPidFromFile(t *testing.T) {
	d := &Driver{cfg: Config{StateDir: t.TempDir()}}
	write := func(id, content string) {
		t.Helper()
		dir := d.sandboxDir(id)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pidFileName), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := startFake(t, "sbx_d", 30*time.Second)
	pid := strconv.Itoa(cmd.Process.Pid)
	write("sbx_d", pid)
	if got, ok := d.pidFromFile("sbx_d"); !ok || got != cmd.Process.Pid {
		t.Fatalf("pidFromFile of a live sandbox process: %d, %v; want %d, true", got, ok, cmd.Process.Pid)
	}
	// Not this sandbox's process (a stale file whose pid was reused): runsc
	// must be asked instead.
	write("sbx_e", pid)
	if got, ok := d.pidFromFile("sbx_e"); ok {
		t.Fatalf("pidFromFile took pid %d of another sandbox's process", got)
	}
	for _, bad := range []string{"", "x", "-1", "0", "99999999999"} {
		write("sbx_f", bad)
		if got, ok := d.pidFromFile("sbx_f"); ok {
			t.Fatalf("pidFromFile of %q: %d, want not ok", bad, got)
		}
	}
	if _, ok := d.pidFromFile("sbx_missing"); ok {
		t.Fatal("pidFromFile without a file: ok")
	}
}
