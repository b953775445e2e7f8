package itest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/api"
	withruntime "withruntime.dev/runtime/sdk/go"
	"withruntime.dev/runtime/sdk/go/wire"
)

// termOutput collects a terminal's output from its OnData.
type termOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *termOutput) write(p []byte) { s.mu.Lock(); s.b.Write(p); s.mu.Unlock() }
func (s *termOutput) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func (s *termOutput) wait(t *testing.T, mark int, want string) int {
	t.Helper()
	waitFor(t, 20*time.Second, "terminal output "+want, func() bool { return strings.Contains(s.String()[mark:], want) })
	out := s.String()
	return mark + strings.Index(out[mark:], want) + len(want)
}

// The Go SDK's terminals, through its own minimal WebSocket client against
// the server's (github.com/coder/websocket).
func TestSDKTerminal(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	ctx := context.Background()
	sbx, err := e.sdkClient().Connect(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out termOutput
	term, err := sbx.CreateTerminal(ctx, withruntime.TerminalOptions{
		Size: wire.PtySize{Cols: 100, Rows: 30}, Argv: []string{"bash", "--norc", "--noprofile", "-i"},
		Env: map[string]string{"PS1": "$ "}, OnData: out.write,
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := term.Process(); p.Pid != term.Pid || p.Pty == nil || p.Pty.Cols != 100 {
		t.Fatalf("process %+v", p)
	}
	m := out.wait(t, 0, "$ ")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(term.SendInput(ctx, []byte("stty size; echo $TERM\r")))
	m = out.wait(t, m, "30 100")
	m = out.wait(t, m, "xterm-256color")
	must(term.Resize(ctx, wire.PtySize{Cols: 132, Rows: 50}))
	waitFor(t, 10*time.Second, "the resize", func() bool {
		mark := len(out.String())
		must(term.SendInput(ctx, []byte("stty size\r")))
		time.Sleep(300 * time.Millisecond)
		return strings.Contains(out.String()[mark:], "50 132")
	})
	if err := term.Resize(ctx, wire.PtySize{Cols: 0, Rows: 1}); !errors.Is(err, withruntime.ErrBadRequest) {
		t.Errorf("resize to 0 columns: %v", err)
	}
	// Input larger than one message (64 KiB) arrives whole.
	must(term.SendInput(ctx, []byte("stty raw -echo; head -c 200000 > /tmp/in; stty sane; echo got-it\r")))
	time.Sleep(500 * time.Millisecond)
	must(term.SendInput(ctx, bytes.Repeat([]byte("z"), 200000)))
	m = out.wait(t, m, "got-it")
	if r := e.sh(sb.ID, "wc -c < /tmp/in; tr -d z < /tmp/in | wc -c"); r.Stdout != "200000\n0\n" {
		t.Errorf("200000 bytes of input: %q", r.Stdout)
	}
	// Ctrl-C, then disconnect: the shell runs on; connect again: the replay.
	must(term.SendInput(ctx, []byte("sleep 100\r")))
	time.Sleep(500 * time.Millisecond)
	must(term.SendInput(ctx, []byte("\x03echo rc=$?\r")))
	out.wait(t, m, "rc=130")
	must(term.Disconnect())
	if _, err := term.Wait(ctx); !errors.Is(err, withruntime.ErrTerminalDisconnected) {
		t.Errorf("wait after disconnect: %v", err)
	}
	var again termOutput
	term2, err := sbx.ConnectTerminal(ctx, term.Pid, again.write)
	if err != nil {
		t.Fatal(err)
	}
	again.wait(t, 0, "rc=130")
	must(term2.SendInput(ctx, []byte("exit 3\r")))
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	x, err := term2.Wait(wctx)
	if err != nil || x.ExitCode != 3 {
		t.Fatalf("exit %+v %v", x, err)
	}
	// Kill ends a program however it runs; a missing process is ErrNotFound.
	sleeper, err := sbx.CreateTerminal(ctx, withruntime.TerminalOptions{Command: "sleep 600"})
	if err != nil {
		t.Fatal(err)
	}
	must(sleeper.Kill(ctx))
	if x, err := sleeper.Wait(wctx); err != nil || x.ExitCode != 137 || x.Signal != "SIGKILL" {
		t.Errorf("killed: %+v %v", x, err)
	}
	if _, err := sbx.ConnectTerminal(ctx, 99999, nil); !errors.Is(err, withruntime.ErrNotFound) {
		t.Errorf("no such process: %v", err)
	}
}
