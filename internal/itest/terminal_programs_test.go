package itest

import (
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/sdk/go/wire"
)

// Programs that need a terminal, as a person drives them (issue 27's
// must-show): python3 shows its prompt and evaluates 6*7; vim without a
// vimrc, typed ihello<Esc>:wq file<CR>, writes the file.
func TestTerminalPrograms(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})

	t.Run("python3", func(t *testing.T) {
		p := e.startTerminal(sb.ID, agentapi.ExecRequest{Command: "python3"}, wire.PtySize{Cols: 80, Rows: 24})
		c := e.attach(sb.ID, p.Pid)
		// Its prompt shows only on a terminal (on a pipe python3 reads a
		// script, silently).
		m := c.waitOutput(0, ">>> ", 20*time.Second)
		c.send("6*7\r")
		m = c.waitOutput(m, "6*7\r\n42\r\n>>> ", 10*time.Second)
		c.send("\x04") // Ctrl-D at the prompt: end of input
		ev, _ := c.exit(20 * time.Second)
		if ev.ExitCode == nil || *ev.ExitCode != 0 {
			t.Fatalf("python3 ended with %+v; output %q", ev, tail(c.output()[m:], 300))
		}
	})

	t.Run("vim", func(t *testing.T) {
		p := e.startTerminal(sb.ID, agentapi.ExecRequest{Argv: []string{"vim", "-u", "NONE"}}, wire.PtySize{Cols: 80, Rows: 24})
		c := e.attach(sb.ID, p.Pid)
		// An empty buffer draws "~" on its empty lines: vim is on the screen.
		m := c.waitOutput(0, "~", 20*time.Second)
		time.Sleep(300 * time.Millisecond) // let it finish drawing and reading the terminal's answers
		c.send("ihello")
		c.send("\x1b") // Esc, alone, so that it is not read as the start of a key's sequence
		time.Sleep(300 * time.Millisecond)
		c.send(":wq file\r")
		ev, _ := c.exit(20 * time.Second)
		if ev.ExitCode == nil || *ev.ExitCode != 0 {
			t.Fatalf("vim ended with %+v; output %q", ev, tail(c.output()[m:], 500))
		}
		if got := string(e.getFile(sb.ID, "/workspace/file")); got != "hello\n" {
			t.Fatalf("the file vim wrote holds %q, want %q", got, "hello\n")
		}
		if !strings.Contains(c.output(), "\x1b[") {
			t.Errorf("vim drew no screen (no escape sequences): %q", tail(c.output(), 300))
		}
	})
}
