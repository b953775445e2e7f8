package withruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/sdk/go/internal/websocket"
	"withruntime.dev/runtime/sdk/go/wire"
)

// Terminals: a program on a pseudo-terminal inside the sandbox (a shell,
// a REPL, vim, tmux), shaped after E2B's sbx.pty: CreateTerminal (create
// with a size and an on-data callback), Terminal.SendInput, Resize, Kill,
// Wait, and ConnectTerminal (connect again, with the recent output first).
//
// Its I/O is the WebSocket GET /v1/sandboxes/{id}/processes/{pid}/terminal
// (wire/terminal.go). The SDK needs nothing but the standard library, so
// it speaks WebSocket through a minimal client of its own
// (internal/websocket: the handshake over the Client's *http.Client,
// masked writes, whole messages up to a cap, pings, the closing handshake).

// Process is a background process as the server describes it (POST
// /v1/sandboxes/{id}/processes): wire.Process.
type Process = wire.Process

// TerminalOptions configures CreateTerminal.
type TerminalOptions struct {
	// Size is the terminal's size (default 80 columns by 24 rows; each
	// 1 to wire.MaxPtyCols / wire.MaxPtyRows).
	Size wire.PtySize
	// Command is a shell command line to run (bash -c); Argv a program and
	// its arguments. Neither: a login shell (bash -l, or sh).
	Command string
	Argv    []string
	// Cwd, Env, User and TimeoutSeconds are as in ExecRequest (a terminal
	// has no timeout unless given one; the lease ends it).
	Cwd            string
	Env            map[string]string
	User           string
	TimeoutSeconds float64
	// OnData receives the terminal's output as it comes, byte for byte (a
	// UTF-8 character may be split between two calls), from one goroutine,
	// in order. It must not block for long: while it runs no output is
	// read, and a terminal that falls 1 MiB behind loses its oldest output
	// (Terminal.Dropped). Nil: output is discarded.
	OnData func([]byte)
}

// loginShell runs bash as a login shell, or sh where there is no bash.
const loginShell = `if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi`

// CreateTerminal starts a program on a new terminal in the sandbox and
// connects to it. Errors: ErrBadRequest (a size out of range, a cwd that
// does not exist), the sandbox's state (ErrLeaseEnded, ErrSandboxStopped,
// ErrPaused), a transport error.
func (s *Sandbox) CreateTerminal(ctx context.Context, opts TerminalOptions) (*Terminal, error) {
	size := opts.Size
	if size == (wire.PtySize{}) {
		size = wire.PtySize{Cols: 80, Rows: 24}
	}
	req := ExecRequest{Command: opts.Command, Argv: opts.Argv, Cwd: opts.Cwd, Env: opts.Env, User: opts.User,
		TimeoutSeconds: opts.TimeoutSeconds, Pty: &size}
	if req.Command == "" && len(req.Argv) == 0 {
		req.Command = loginShell
	}
	var p Process
	if err := s.c.doJSON(ctx, "POST", s.path("/processes"), req, &p); err != nil {
		return nil, err
	}
	t, err := s.ConnectTerminal(ctx, p.Pid, opts.OnData)
	if err != nil {
		return nil, err
	}
	t.process = p
	return t, nil
}

// ConnectTerminal connects to the terminal of background process pid (made
// by CreateTerminal, the CLI or the API with "pty"): onData first gets its
// recent output (the last 1 MiB at most), then live output. Several
// connections to one terminal may be open at once (up to
// wire.MaxTerminalViewers), each may send input. Errors: ErrNotFound (no
// such process), an *APIError with status 409 (a process without a
// terminal) or 429 (too many connections), the sandbox's state, a
// transport error.
func (s *Sandbox) ConnectTerminal(ctx context.Context, pid int, onData func([]byte)) (*Terminal, error) {
	hdr := map[string][]string{}
	if s.c.apiKey != "" {
		hdr["Authorization"] = []string{"Bearer " + s.c.apiKey}
	}
	hctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(hctx, s.c.hc, s.c.baseURL+s.path("/processes/"+strconv.Itoa(pid)+"/terminal"), hdr, 2*wire.MaxTerminalMessageBytes)
	if err != nil {
		if resp != nil {
			defer resp.Body.Close()
			if resp.StatusCode >= 400 {
				return nil, decodeError(resp)
			}
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("withruntime: terminal of process %d: %w", pid, ctx.Err())
		}
		return nil, fmt.Errorf("withruntime: cannot open the terminal of process %d at %s: %w", pid, s.c.baseURL, err)
	}
	t := &Terminal{s: s, Pid: pid, ws: ws, onData: onData, done: make(chan struct{})}
	go t.read()
	return t, nil
}

// Terminal is one connection to a program's terminal. Its methods are safe
// for concurrent use.
type Terminal struct {
	// Pid is the program's process id in the sandbox (for ConnectTerminal
	// and the processes API).
	Pid int

	s       *Sandbox
	ws      *websocket.Conn
	onData  func([]byte)
	process Process
	done    chan struct{} // closed when the connection ends

	mu      sync.Mutex
	exit    *TerminalExit
	dropped int64
	errs    []string // error events
	err     error    // why the connection ended without an exit
}

// TerminalExit is how a terminal's program ended.
type TerminalExit struct {
	// ExitCode is its exit status: 128+N when signal N ended it (130 after
	// Ctrl-C), 124 when its timeout did, 137 when it was killed for the
	// sandbox's memory or process limit.
	ExitCode int
	// Signal names the signal that ended it, if any.
	Signal string
	// TimedOut, OOMKilled and ProcessLimitKilled say its timeout, or the
	// sandbox's memory or process limit, ended it.
	TimedOut, OOMKilled, ProcessLimitKilled bool
}

// ErrTerminalDisconnected says a terminal's connection ended before its
// program did (Disconnect, a network failure, the sandbox paused or
// stopped). The program may still run: ConnectTerminal connects again.
var ErrTerminalDisconnected = errors.New("withruntime: the terminal's connection ended before its program")

// Process is the process record made by CreateTerminal (zero for
// ConnectTerminal).
func (t *Terminal) Process() Process { return t.process }

func (t *Terminal) read() {
	defer close(t.done)
	for {
		typ, msg, err := t.ws.Read()
		if err != nil {
			t.mu.Lock()
			if t.exit == nil {
				t.err = err
			}
			t.mu.Unlock()
			return
		}
		if typ == websocket.Binary {
			if t.onData != nil && len(msg) > 0 {
				t.onData(msg)
			}
			continue
		}
		var ev wire.TerminalEvent
		if json.Unmarshal(msg, &ev) != nil {
			continue // not an event: skip it, as any type the SDK does not know
		}
		t.mu.Lock()
		switch ev.Type {
		case wire.EventExit:
			x := TerminalExit{Signal: ev.Signal, TimedOut: ev.TimedOut, OOMKilled: ev.OOMKilled, ProcessLimitKilled: ev.ProcessLimitKilled}
			if ev.ExitCode != nil {
				x.ExitCode = *ev.ExitCode
			}
			t.exit = &x
		case wire.EventDropped:
			t.dropped = ev.Dropped
		case wire.EventError:
			t.errs = append(t.errs, ev.Message)
		}
		t.mu.Unlock()
	}
}

// SendInput writes p to the terminal as typed input (Ctrl-C is "\x03",
// Ctrl-D "\x04", Enter "\r"), in messages of at most
// wire.MaxTerminalMessageBytes.
func (t *Terminal) SendInput(ctx context.Context, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), wire.MaxTerminalMessageBytes)
		if err := t.write(ctx, websocket.Binary, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Resize sets the terminal's size; the program gets SIGWINCH. The server
// answers a size out of range with an error event (Errors).
func (t *Terminal) Resize(ctx context.Context, size wire.PtySize) error {
	if size.Cols < 1 || size.Cols > wire.MaxPtyCols || size.Rows < 1 || size.Rows > wire.MaxPtyRows {
		return fmt.Errorf("%w: a terminal is 1 to %d columns by 1 to %d rows, not %dx%d", ErrBadRequest, wire.MaxPtyCols, wire.MaxPtyRows, size.Cols, size.Rows)
	}
	data, _ := json.Marshal(wire.TerminalControl{Type: wire.ControlResize, Cols: size.Cols, Rows: size.Rows})
	return t.write(ctx, websocket.Text, data)
}

// Signal sends sig ("SIGTERM", "SIGINT", ...) to everything the program
// started. To interrupt only its foreground job, send "\x03" as input.
func (t *Terminal) Signal(ctx context.Context, sig string) error {
	data, _ := json.Marshal(wire.TerminalControl{Type: wire.ControlSignal, Signal: sig})
	return t.write(ctx, websocket.Text, data)
}

// Kill kills everything the program started (SIGKILL, through the
// processes API, so it works also when the connection is gone).
func (t *Terminal) Kill(ctx context.Context) error {
	return t.s.c.doJSON(ctx, "POST", t.s.path("/processes/"+strconv.Itoa(t.Pid)+"/kill"), struct{}{}, nil)
}

// write sends one message; ctx bounds the wait for the connection to
// take it.
func (t *Terminal) write(ctx context.Context, typ int, p []byte) error {
	errc := make(chan error, 1)
	go func() { errc <- t.ws.Write(typ, p) }()
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("withruntime: terminal of process %d: %w", t.Pid, err)
		}
		return nil
	case <-ctx.Done():
		t.ws.CloseNow()
		return fmt.Errorf("withruntime: terminal of process %d: %w", t.Pid, ctx.Err())
	}
}

// Wait waits for the program to end and returns how. When the connection
// ends first it returns an error wrapping ErrTerminalDisconnected (the
// program may still run: ConnectTerminal again); when ctx ends first, its
// error (the connection stays).
func (t *Terminal) Wait(ctx context.Context) (TerminalExit, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
		return TerminalExit{}, fmt.Errorf("withruntime: waiting for the terminal of process %d: %w", t.Pid, ctx.Err())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exit != nil {
		return *t.exit, nil
	}
	why := ""
	if len(t.errs) > 0 {
		why = " (" + strings.Join(t.errs, "; ") + ")"
	} else if t.err != nil {
		why = " (" + t.err.Error() + ")"
	}
	return TerminalExit{}, fmt.Errorf("%w%s", ErrTerminalDisconnected, why)
}

// Dropped is how many bytes of output this connection missed because it
// fell more than 1 MiB behind (OnData too slow); the program never waits.
func (t *Terminal) Dropped() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dropped
}

// Errors are the server's answers to control messages it could not
// accept, and why a connection ended early, oldest first.
func (t *Terminal) Errors() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.errs...)
}

// Disconnect closes this connection; the program runs on (ConnectTerminal
// connects again).
func (t *Terminal) Disconnect() error {
	err := t.ws.Close(websocket.StatusNormal, "")
	<-t.done
	return err
}
