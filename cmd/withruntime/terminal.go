package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/client"
	"withruntime.dev/runtime/sdk/go/wire"
)

// Interactive terminals: `sandbox shell`, `sandbox exec -it` and `sandbox
// attach` run a program on a terminal inside the sandbox (a background
// process started with pty) and connect this terminal to it, as `docker
// exec -it` does: raw mode, so that every key (Ctrl-C, Ctrl-Z, Ctrl-D)
// goes to the program; the window size at start and on every SIGWINCH;
// the terminal's settings restored on every way out; the program's exit
// code as the CLI's. Ctrl-P Ctrl-Q detaches and leaves the program running.

// detachHelp is the help text about the detach keys.
const detachHelp = `Ctrl-P Ctrl-Q (as in docker) detaches: the program keeps running and
` + "`withruntime sandbox attach ID PID`" + ` connects to it again, with its recent output.
A Ctrl-P is held back until the next key to tell; type it twice to send one.`

// Detach keys: Ctrl-P then Ctrl-Q.
const (
	detachKey1 = 0x10
	detachKey2 = 0x11
)

// detacher finds the detach keys in the input. A Ctrl-P is held back until
// the next byte says whether the two are the detach keys.
type detacher struct{ held bool }

// feed returns the bytes of p to send on, and whether the detach keys were
// typed (what follows them is dropped).
func (d *detacher) feed(p []byte) (out []byte, detach bool) {
	out = make([]byte, 0, len(p)+1)
	for _, b := range p {
		if d.held {
			d.held = false
			if b == detachKey2 {
				return out, true
			}
			out = append(out, detachKey1)
			if b == detachKey1 { // Ctrl-P twice sends one
				continue
			}
		}
		if b == detachKey1 {
			d.held = true
			continue
		}
		out = append(out, b)
	}
	return out, false
}

// windowSize is the size of this terminal (stdout's, else stdin's), or
// 80x24 when neither is a terminal.
func windowSize() wire.PtySize {
	for _, f := range []*os.File{os.Stdout, os.Stdin} {
		if w, h, err := term.GetSize(int(f.Fd())); err == nil && w > 0 && h > 0 {
			return wire.PtySize{Cols: min(w, wire.MaxPtyCols), Rows: min(h, wire.MaxPtyRows)}
		}
	}
	return wire.PtySize{Cols: 80, Rows: 24}
}

// startOnTerminal starts req in sandbox id on a terminal of this window's
// size and connects to it.
func startOnTerminal(ctx context.Context, s *session, id string, req agentapi.ExecRequest, input bool) error {
	size := windowSize()
	req.Pty = &size
	p, err := s.StartProcess(ctx, id, req)
	if err != nil {
		return err
	}
	return runTerminal(ctx, s, id, p.Pid, input, true)
}

// runTerminal connects this terminal to process pid's until the program
// ends (its exit code becomes the CLI's), the detach keys, or a signal.
// input forwards stdin; ours says the CLI started the program, which then
// gets SIGHUP when a signal ends the CLI, as a program whose terminal
// closes does.
func runTerminal(ctx context.Context, s *session, id string, pid int, input, ours bool) (err error) {
	tc, err := s.Terminal(ctx, id, pid)
	if err != nil {
		return err
	}
	defer tc.Close()
	restore := func() {}
	if fd := int(os.Stdin.Fd()); input && term.IsTerminal(fd) {
		st, err := term.MakeRaw(fd)
		if err != nil {
			return fmt.Errorf("putting the terminal in raw mode: %w", err)
		}
		restore = sync.OnceFunc(func() { _ = term.Restore(fd, st) })
		defer restore()
	}
	_ = tc.Control(ctx, wire.TerminalControl{Type: wire.ControlResize, Cols: windowSize().Cols, Rows: windowSize().Rows})
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	go func() {
		for range winch {
			size := windowSize()
			_ = tc.Control(ctx, wire.TerminalControl{Type: wire.ControlResize, Cols: size.Cols, Rows: size.Rows})
		}
	}()
	var detached atomic.Bool
	if input {
		go forwardInput(ctx, tc, &detached)
	}
	var notes []string
	var dropped int64
	defer func() {
		restore()
		if dropped > 0 {
			notes = append(notes, fmt.Sprintf("this terminal fell behind and missed %d bytes of the program's output", dropped))
		}
		for _, n := range notes {
			fmt.Fprintln(os.Stderr, "withruntime: "+n)
		}
	}()
	for {
		data, ev, err := tc.Next(ctx)
		switch {
		case err != nil && detached.Load():
			notes = append(notes, fmt.Sprintf("detached; process %d runs on: `withruntime sandbox attach %s %d` connects again", pid, id, pid))
			return nil
		case err != nil && ctx.Err() != nil:
			restore()
			if !ours {
				return interrupted(ctx, fmt.Sprintf("; process %d runs on", pid))
			}
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = s.Signal(hctx, id, pid, "SIGHUP")
			cancel()
			return interrupted(ctx, "; the program got SIGHUP, as when its terminal closes")
		case err != nil:
			restore()
			for _, n := range notes {
				fmt.Fprintln(os.Stderr, "withruntime: "+n)
			}
			notes = nil
			return whyStreamEnded(ctx, s, id, &client.StreamError{Err: err}, "sandbox "+id, "and it was stopped; create one with a longer --timeout")
		case data != nil:
			if _, err := os.Stdout.Write(data); err != nil {
				if errors.Is(err, syscall.EPIPE) {
					return signalled{syscall.SIGPIPE}
				}
				return fmt.Errorf("writing the terminal's output: %w", err)
			}
		case ev.Type == wire.EventDropped:
			dropped = ev.Dropped
		case ev.Type == wire.EventError:
			notes = append(notes, ev.Message)
		case ev.Type == wire.EventExit:
			restore()
			code := 0
			if ev.ExitCode != nil {
				code = *ev.ExitCode
			}
			return resultExit(agentapi.ExecResult{ExitCode: code, Signal: ev.Signal, TimedOut: ev.TimedOut,
				OOMKilled: ev.OOMKilled, ProcessLimitKilled: ev.ProcessLimitKilled})
		}
	}
}

// forwardInput sends stdin to the terminal until it ends or the detach keys
// are typed (then it sets detached and closes the connection).
func forwardInput(ctx context.Context, tc *client.TerminalConn, detached *atomic.Bool) {
	var d detacher
	buf := make([]byte, 32<<10)
	for {
		n, err := os.Stdin.Read(buf)
		if n > 0 {
			out, detach := d.feed(buf[:n])
			if len(out) > 0 && tc.Input(ctx, out) != nil {
				return
			}
			if detach {
				detached.Store(true)
				tc.Close()
				return
			}
		}
		if err != nil {
			return // end of input: the program goes on reading its terminal
		}
	}
}

// commandFlags are what shell and exec -it take of a command.
type commandFlags struct {
	cwd  string
	env  []string
	user string
}

func (f *commandFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.cwd, "cwd", "", "working directory (default /workspace)")
	cmd.Flags().StringArrayVarP(&f.env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
	cmd.Flags().StringVarP(&f.user, "user", "u", "", `run as "user" (default) or "root"`)
}

func (f *commandFlags) apply(req *agentapi.ExecRequest) error {
	env, err := pairs("--env", f.env)
	if err != nil {
		return err
	}
	req.Cwd, req.Env, req.User = f.cwd, env, f.user
	return nil
}

// loginShell starts the sandbox's bash as a login shell, or sh where the
// template has no bash.
const loginShell = `if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi`

func newShellCmd() *cobra.Command {
	var f commandFlags
	cmd := &cobra.Command{
		Use:   "shell ID [-- CMD [ARGS...]]",
		Short: "Open an interactive shell (or CMD) on a terminal in a running sandbox",
		Long: `Runs a login shell (bash -l, or sh), or CMD, on a terminal in sandbox ID and
connects this terminal to it: every key goes to the program, the window size
follows this window, and the CLI exits with the program's exit code. A
signal that ends the CLI (SIGTERM, SIGHUP) sends the program SIGHUP.
` + detachHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := agentapi.ExecRequest{Command: loginShell}
			if len(args) > 1 {
				var err error
				if req, err = execRequest(args[1:], 0); err != nil {
					return err
				}
			}
			if err := f.apply(&req); err != nil {
				return err
			}
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			return startOnTerminal(cmd.Context(), s, args[0], req, true)
		},
	}
	f.add(cmd)
	return cmd
}

func newAttachCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "attach ID PID",
		Short: "Connect this terminal to a program running on a terminal in a sandbox",
		Long: `Connects to the terminal of process PID (started by shell, exec -it, or the
API with "pty") in sandbox ID: its recent output first (the last 1 MiB), then
live. The CLI exits with the program's exit code when it ends.
` + detachHelp,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			pid, err := strconv.Atoi(args[1])
			if err != nil || pid < 1 {
				return fmt.Errorf("PID %q is not a process id; `withruntime sandbox attach ID PID` takes the pid that shell, exec -it or the API printed", args[1])
			}
			s, err := connect(cmd.Context(), "")
			if err != nil {
				return err
			}
			defer s.Close()
			return runTerminal(cmd.Context(), s, args[0], pid, true, false)
		},
	}
}
