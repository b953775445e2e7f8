package itest

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// hostTerm is a terminal on the host (a pty) with a withruntime command
// on it, as a person at a terminal runs one.
type hostTerm struct {
	t      *testing.T
	master *os.File
	slave  *os.File
	cmd    *exec.Cmd
	// initial is the terminal's local modes before the command started.
	initial uint32

	mu  sync.Mutex
	out bytes.Buffer
}

// onHostTerm starts withruntime args on a new host terminal of rows x cols.
func (e *env) onHostTerm(rows, cols uint16, args ...string) *hostTerm {
	e.t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		e.t.Fatal(err)
	}
	tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := e.cliCmd(args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	h := &hostTerm{t: e.t, master: master, slave: slave, cmd: cmd, initial: tio.Lflag}
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		master.Close()
		slave.Close()
	})
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := master.Read(buf)
			h.mu.Lock()
			h.out.Write(buf[:n])
			h.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return h
}

func (h *hostTerm) output() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.out.String()
}

func (h *hostTerm) waitOutput(mark int, want string, d time.Duration) int {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for {
		out := h.output()
		if i := strings.Index(out[min(mark, len(out)):], want); i >= 0 {
			return mark + i + len(want)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the host terminal never showed %q; after the mark: %q", want, out[min(mark, len(out)):])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *hostTerm) send(s string) {
	h.t.Helper()
	if _, err := h.master.Write([]byte(s)); err != nil {
		h.t.Fatal(err)
	}
}

// lflag is the host terminal's local modes (ICANON, ECHO, ...).
func (h *hostTerm) lflag() uint32 {
	h.t.Helper()
	tio, err := unix.IoctlGetTermios(int(h.slave.Fd()), unix.TCGETS)
	if err != nil {
		h.t.Fatal(err)
	}
	return tio.Lflag
}

func (h *hostTerm) wait(d time.Duration) int {
	h.t.Helper()
	done := make(chan struct{})
	go func() { h.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		h.t.Fatalf("withruntime did not exit within %s; its terminal: %q", d, tail(h.output(), 400))
	}
	if ws, ok := h.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return h.cmd.ProcessState.ExitCode()
}

// `withruntime sandbox exec -it` under a real terminal: raw mode, the
// window's size and its changes, the program's exit code, the terminal's
// settings restored; `shell` killed by SIGTERM restores them too and hangs
// up the program; detach and attach.
func TestCLITerminal(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	h := e.onHostTerm(30, 100, "sandbox", "exec", "-it", "-e", "PS1=$ ", sb.ID, "--", "bash", "--norc", "--noprofile", "-i")
	before := h.initial
	if before&(unix.ICANON|unix.ECHO) == 0 {
		t.Fatalf("a new host terminal is not in cooked mode: %#x", before)
	}
	m := h.waitOutput(0, "$ ", 30*time.Second)
	if raw := h.lflag(); raw&(unix.ICANON|unix.ECHO|unix.ISIG) != 0 {
		t.Errorf("the host terminal is not in raw mode while attached: lflag %#x", raw)
	}
	h.send("stty size\r")
	m = h.waitOutput(m, "30 100", 10*time.Second)
	// The window grows: the kernel sends the CLI SIGWINCH, the CLI a resize.
	if err := pty.Setsize(h.master, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the sandbox's terminal to follow the window", func() bool {
		mark := len(h.output())
		h.send("stty size\r")
		time.Sleep(300 * time.Millisecond)
		return strings.Contains(h.output()[mark:], "40 120")
	})
	// Ctrl-C goes to the program in the sandbox, not to the CLI.
	h.send("sleep 100\r")
	time.Sleep(500 * time.Millisecond)
	h.send("\x03")
	h.send("echo rc=$?\r")
	h.waitOutput(m, "rc=130", 10*time.Second)
	h.send("exit 3\r")
	if code := h.wait(30 * time.Second); code != 3 {
		t.Errorf("exec -it exit code %d, want 3; terminal %q", code, tail(h.output(), 300))
	}
	if after := h.lflag(); after != before {
		t.Errorf("the host terminal's lflag is %#x after exec -it, was %#x", after, before)
	}

	// shell, then SIGTERM to the CLI: the terminal is restored, the CLI
	// exits 143, and the shell in the sandbox is hung up.
	h = e.onHostTerm(24, 80, "sandbox", "shell", sb.ID)
	before = h.initial
	h.waitOutput(0, "$ ", 30*time.Second)
	var list agentapi.ProcessList
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID+"/processes", nil, &list)
	shellPid := list.Processes[len(list.Processes)-1].Pid
	h.cmd.Process.Signal(syscall.SIGTERM)
	if code := h.wait(30 * time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("shell after SIGTERM: exit %d, want 143; terminal %q", code, tail(h.output(), 300))
	}
	if after := h.lflag(); after != before {
		t.Errorf("the host terminal's lflag is %#x after a SIGTERM, was %#x", after, before)
	}
	waitFor(t, 10*time.Second, "the hung-up shell to end", func() bool {
		var p agentapi.Process
		e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/sandboxes/%s/processes/%d", sb.ID, shellPid), nil, &p)
		return !p.Running
	})

	// Detach with Ctrl-P Ctrl-Q: the program runs on; attach comes back to it.
	h = e.onHostTerm(24, 80, "sandbox", "exec", "-it", "-e", "PS1=$ ", sb.ID, "--", "bash", "--norc", "--noprofile", "-i")
	m = h.waitOutput(0, "$ ", 30*time.Second)
	h.send("echo before-detach\r")
	h.waitOutput(m, "before-detach", 10*time.Second)
	h.send("\x10\x11")
	if code := h.wait(30 * time.Second); code != 0 {
		t.Errorf("detach: exit %d, want 0", code)
	}
	h.waitOutput(m, "withruntime sandbox attach "+sb.ID+" ", 10*time.Second)
	out := h.output()
	i := strings.Index(out, "withruntime sandbox attach "+sb.ID+" ")
	var pid int
	fmt.Sscanf(out[i+len("withruntime sandbox attach "+sb.ID+" "):], "%d", &pid)
	h = e.onHostTerm(24, 80, "sandbox", "attach", sb.ID, fmt.Sprint(pid))
	m = h.waitOutput(0, "before-detach", 30*time.Second) // the replay
	h.send("exit 4\r")
	if code := h.wait(30 * time.Second); code != 4 {
		t.Errorf("attach: exit %d, want 4; terminal %q", code, tail(h.output(), 300))
	}
}

// TestCLIRunTerminal: `withruntime sandbox run -it` under a real terminal,
// as docker run -it: a fresh sandbox, the program on a terminal of the
// window's size, its exit code the CLI's, the host terminal restored, and
// the sandbox destroyed at the end.
func TestCLIRunTerminal(t *testing.T) {
	e := newEnv(t)
	h := e.onHostTerm(33, 111, "sandbox", "run", "-it", "--", "bash", "--norc", "--noprofile", "-c", "stty size; tty; read -r line; echo got=$line; exit 5")
	before := h.initial
	m := h.waitOutput(0, "33 111", 60*time.Second)
	m = h.waitOutput(m, "/dev/pts/", 10*time.Second)
	h.send("hello\r")
	h.waitOutput(m, "got=hello", 10*time.Second)
	if code := h.wait(30 * time.Second); code != 5 {
		t.Errorf("run -it exit code %d, want 5; terminal %q", code, tail(h.output(), 300))
	}
	if after := h.lflag(); after != before {
		t.Errorf("the host terminal's lflag is %#x after run -it, was %#x", after, before)
	}
	var list api.SandboxList
	e.must(http.StatusOK, "GET", "/v1/sandboxes", nil, &list)
	for _, sb := range list.Sandboxes {
		if sb.State != "stopped" {
			t.Errorf("run -it left sandbox %s %s", sb.ID, sb.State)
		}
	}
}
