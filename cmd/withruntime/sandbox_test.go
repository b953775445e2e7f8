package main

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/api"
)

func TestReadStdin(t *testing.T) {
	got, err := readStdin(strings.NewReader("héllo\x00\n"))
	if err != nil || got != "héllo\x00\n" {
		t.Fatalf("text: %q, %v", got, err)
	}
	if got, err := readStdin(strings.NewReader("")); err != nil || got != "" {
		t.Fatalf("empty: %q, %v", got, err)
	}
	full := strings.Repeat("x", maxStdinBytes)
	if got, err := readStdin(strings.NewReader(full)); err != nil || len(got) != maxStdinBytes {
		t.Fatalf("exactly the cap: %d bytes, %v", len(got), err)
	}
	if _, err := readStdin(strings.NewReader(full + "y")); err == nil || !strings.Contains(err.Error(), "more than 16 MiB") {
		t.Fatalf("over the cap: %v", err)
	}
	if _, err := readStdin(strings.NewReader("ab\xffc")); err == nil || !strings.Contains(err.Error(), "not UTF-8 text (at byte offset 2)") {
		t.Fatalf("not UTF-8: %v", err)
	}
}

// TestCommandStdin: a terminal gives the command no stdin (nothing is read
// from it), a pipe gives it what was written, --no-stdin skips the pipe.
func TestCommandStdin(t *testing.T) {
	ptmx, tty := openPty(t)
	defer ptmx.Close()
	defer tty.Close()
	if !isTerminal(tty) {
		t.Fatal("a pty is not a terminal")
	}
	got, err := commandStdin(context.Background(), tty, false)
	if err != nil || got != "" {
		t.Fatalf("terminal: %q, %v", got, err)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if isTerminal(r) {
		t.Fatal("a pipe is a terminal")
	}
	go func() { w.WriteString("hello\n"); w.Close() }()
	if got, err := commandStdin(context.Background(), r, false); err != nil || got != "hello\n" {
		t.Fatalf("pipe: %q, %v", got, err)
	}

	r2, w2, _ := os.Pipe()
	defer r2.Close()
	defer w2.Close() // never written nor closed: reading it would hang
	if got, err := commandStdin(context.Background(), r2, true); err != nil || got != "" {
		t.Fatalf("--no-stdin: %q, %v", got, err)
	}
	// A signal while it waits for input ends the wait.
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(signalled{syscall.SIGINT}) })
	var sig signalled
	if _, err := commandStdin(ctx, r2, false); !errors.As(err, &sig) || sig.exitCode() != 130 {
		t.Fatalf("interrupted read: %v", err)
	}
}

// openPty opens a pseudo-terminal pair.
func openPty(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no /dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(fd)
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		unix.Close(fd)
		t.Skipf("ptsname: %v", err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		unix.Close(fd)
		t.Skipf("opening the pty: %v", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), tty
}

func TestExecRequest(t *testing.T) {
	req, err := execRequest([]string{"ls | wc -l"}, 5)
	if err != nil || req.Command != "ls | wc -l" || req.Argv != nil || req.TimeoutSeconds != 5 {
		t.Fatalf("one word: %+v, %v", req, err)
	}
	req, err = execRequest([]string{"python3", "-c", ""}, 0)
	if err != nil || req.Command != "" || len(req.Argv) != 3 {
		t.Fatalf("argv: %+v, %v", req, err)
	}
	for _, words := range [][]string{{""}, {"  "}, {"", "x"}} {
		if _, err := execRequest(words, 0); err == nil || !strings.Contains(err.Error(), "after --") {
			t.Errorf("%q: %v", words, err)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		3 * time.Second: "3s", 5 * time.Minute: "5m", 90 * time.Minute: "1h30m", 2 * time.Hour: "2h",
		61 * time.Second: "1m1s", time.Hour + time.Second: "1h0m1s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("%s: %q, want %q", d, got, want)
		}
	}
}

func TestExitStatus(t *testing.T) {
	bg := context.Background()
	hup, cancel := context.WithCancelCause(bg)
	cancel(signalled{syscall.SIGHUP})
	for _, c := range []struct {
		ctx  context.Context
		err  error
		want int
	}{
		{bg, nil, 0},
		{bg, exitError{3}, 3},
		{bg, signalled{syscall.SIGINT}, 130},
		{bg, signalled{syscall.SIGTERM}, 143},
		{bg, signalled{syscall.SIGHUP}, 129},
		{bg, signalled{syscall.SIGPIPE}, 141},
		{bg, &os.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.EPIPE}, 141},
		{hup, context.Canceled, 129},
		{bg, errors.New("boom"), 125},
	} {
		if got := exitStatus(c.ctx, c.err); got != c.want {
			t.Errorf("%v: exit %d, want %d", c.err, got, c.want)
		}
	}
}

func TestStateText(t *testing.T) {
	for _, c := range []struct {
		sb   api.Sandbox
		want string
	}{
		{api.Sandbox{State: "running"}, "running"},
		{api.Sandbox{State: "paused", ImageMode: "full"}, "paused"},
		{api.Sandbox{State: "paused", ImageMode: "filesystem"}, "paused (files only)"},
		{api.Sandbox{State: "stopped", EndReason: "lease"}, "stopped (lease)"},
	} {
		if got := stateText(c.sb); got != c.want {
			t.Errorf("stateText(%+v) = %q, want %q", c.sb, got, c.want)
		}
	}
}
