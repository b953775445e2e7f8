package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/sdk/go/wire"
)

// Terminals. A background process started with a pty writes to its
// terminal; the agent reads the master into the process's replay buffer
// (one ring of wire.TerminalReplayBytes), never waiting for anyone. Each
// viewer (GET /processes/{pid}/terminal, agentapi.TerminalUpgrade) follows
// that ring at its own offset: it gets the replay, then live output; a
// viewer that falls a whole ring behind skips to the oldest byte kept and is
// told how much it lost (wire.EventDropped). So a slow or vanished viewer
// costs the program nothing, and memory is one ring per terminal however
// many viewers there are. Every viewer may write; input frames are written
// to the terminal whole, one at a time, in the order they arrive.

// terminalChunk is the most output one frame carries.
const terminalChunk = 32 << 10

// terminalInputWait is how long one attempt to write input waits for the
// program to read before checking whether its viewer is gone.
const terminalInputWait = 250 * time.Millisecond

// terminal is a background process's terminal state.
type terminal struct {
	mu      sync.Mutex
	size    wire.PtySize
	viewers int
}

func (t *terminal) getSize() wire.PtySize {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size
}

// join counts a new viewer, or reports that there are as many as allowed.
func (t *terminal) join() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.viewers >= wire.MaxTerminalViewers {
		return false
	}
	t.viewers++
	return true
}

func (t *terminal) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.viewers--
}

// handleTerminal is GET /processes/{pid}/terminal: it turns the request's
// connection into the process's terminal channel (agentapi terminal.go).
func (s *Server) handleTerminal(w http.ResponseWriter, r *http.Request) error {
	b, err := s.lookupProc(r)
	if err != nil {
		return err
	}
	if b.term == nil {
		return conflict(`process %d was started without a terminal; start a process with "pty": {"cols": 80, "rows": 24} to have one`, b.info.Pid)
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), agentapi.TerminalUpgrade) {
		return badRequest("GET /processes/{pid}/terminal upgrades the connection: send Connection: Upgrade and Upgrade: %s", agentapi.TerminalUpgrade)
	}
	if !b.term.join() {
		return &apiError{status: http.StatusTooManyRequests, code: agentapi.CodeRateLimited,
			msg: fmt.Sprintf("process %d's terminal has %d viewers already, the most it takes; close one first", b.info.Pid, wire.MaxTerminalViewers)}
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		b.term.leave()
		return fmt.Errorf("taking over the connection: %w", err)
	}
	_ = conn.SetDeadline(time.Time{}) // the server's header timeout no longer applies
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+agentapi.TerminalUpgrade+"\r\n\r\n"); err != nil {
		conn.Close()
		b.term.leave()
		return nil
	}
	go b.serveTerminal(conn, brw.Reader)
	return nil
}

// frameWriter sends frames on one connection from several goroutines.
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (f *frameWriter) frame(kind byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return agentapi.WriteTerminalFrame(f.w, kind, p)
}

func (f *frameWriter) event(ev wire.TerminalEvent) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return f.frame(agentapi.TerminalEvent, data)
}

// serveTerminal is one viewer: its output follows the replay buffer, its
// input goes to the terminal. It ends after the exit event, or when the
// host closes the connection.
func (b *bgProc) serveTerminal(conn net.Conn, r io.Reader) {
	gone := make(chan struct{})
	defer b.term.leave()
	defer conn.Close()
	defer close(gone)
	fw := &frameWriter{w: conn}
	inputDone := make(chan struct{})
	go func() {
		defer close(inputDone)
		b.terminalInput(r, fw, gone)
	}()
	var off, dropped int64
	first := true
	for {
		finished := false
		select {
		case <-b.p.done:
			finished = true // every byte is in the buffer now
		default:
		}
		data, next, lost, changed := b.out.readRaw(stdout, off, terminalChunk)
		if lost > 0 && !first { // the first read's skip is the replay's start
			dropped += lost
			if fw.event(wire.TerminalEvent{Type: wire.EventDropped, Dropped: dropped}) != nil {
				return
			}
		}
		first = false
		off = next
		if len(data) > 0 {
			if fw.frame(agentapi.TerminalOutput, data) != nil {
				return
			}
			continue
		}
		if finished {
			_ = fw.event(exitEvent(b.p.result()))
			return
		}
		select {
		case <-changed:
		case <-b.p.done:
		case <-inputDone:
			return
		}
	}
}

// resize sets the terminal's size; the kernel sends SIGWINCH to its
// foreground process group. A size out of range is a bad request; a
// terminal already closed (its program ended) is a conflict.
func (b *bgProc) resize(size wire.PtySize) error {
	if err := checkPtySize("resize", size); err != nil {
		return err
	}
	if err := setPtySize(b.p.pty, size); err != nil {
		return conflict("the terminal of process %d is closed (its program ended); its size cannot change", b.info.Pid)
	}
	b.term.mu.Lock()
	b.term.size = size
	b.term.mu.Unlock()
	return nil
}

// handleResize is POST /processes/{pid}/resize {"cols": C, "rows": R}: the
// resize a terminal viewer sends as a control message, for a client
// without a terminal channel open (the E2B facade's Update). It answers
// the process with its new size.
func (s *Server) handleResize(w http.ResponseWriter, r *http.Request) error {
	b, err := s.lookupProc(r)
	if err != nil {
		return err
	}
	if b.term == nil {
		return conflict(`process %d was started without a terminal, which has no size; start a process with "pty": {"cols": 80, "rows": 24} to have one`, b.info.Pid)
	}
	var size wire.PtySize
	if err := decodeJSON(r, &size, false); err != nil {
		return err
	}
	if err := b.resize(size); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, b.snapshot())
	return nil
}

// exitEvent is the exit event for res.
func exitEvent(res agentapi.ExecResult) wire.TerminalEvent {
	code := res.ExitCode
	return wire.TerminalEvent{Type: wire.EventExit, ExitCode: &code, Signal: res.Signal,
		TimedOut: res.TimedOut, OOMKilled: res.OOMKilled, ProcessLimitKilled: res.ProcessLimitKilled}
}

// terminalInput reads the host's frames until the connection ends: input
// to the terminal, control messages applied. A frame that is not the
// protocol's ends the connection.
func (b *bgProc) terminalInput(r io.Reader, fw *frameWriter, gone <-chan struct{}) {
	buf := make([]byte, agentapi.MaxTerminalFrameBytes)
	for {
		kind, p, err := agentapi.ReadTerminalFrame(r, buf)
		if err != nil {
			return
		}
		switch kind {
		case agentapi.TerminalInput:
			// Input after the terminal closed is dropped: nothing reads it.
			_ = b.p.writeTerminal(p, gone)
		case agentapi.TerminalControl:
			if err := b.control(p); err != nil {
				if fw.event(wire.TerminalEvent{Type: wire.EventError, Message: err.Error()}) != nil {
					return
				}
			}
		default:
			return
		}
	}
}

// control applies one wire.TerminalControl.
func (b *bgProc) control(data []byte) error {
	var c wire.TerminalControl
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return fmt.Errorf("control message is not a terminal control (%v); send {\"type\": \"resize\", \"cols\": C, \"rows\": R} or {\"type\": \"signal\", \"signal\": \"SIGINT\"}", err)
	}
	switch c.Type {
	case wire.ControlResize:
		return b.resize(wire.PtySize{Cols: c.Cols, Rows: c.Rows})
	case wire.ControlSignal:
		if c.Signal == "" {
			return badRequest(`a signal message names its signal, e.g. {"type": "signal", "signal": "SIGTERM"}`)
		}
		sig, err := parseSignal(c.Signal)
		if err != nil {
			return err
		}
		b.p.signal(sig)
		return nil
	}
	return badRequest("control message type %q is not one of %q or %q", c.Type, wire.ControlResize, wire.ControlSignal)
}

// writeTerminal writes b to the terminal as input, whole, after any input
// being written. While the program reads none, it waits until stop is
// closed (then it fails with os.ErrDeadlineExceeded, part of b perhaps
// written). Once the terminal is closed it fails with errStdinClosed.
func (p *proc) writeTerminal(b []byte, stop <-chan struct{}) error {
	p.ptyMu.Lock()
	defer p.ptyMu.Unlock()
	for len(b) > 0 {
		if err := p.pty.SetWriteDeadline(time.Now().Add(terminalInputWait)); err != nil {
			return errStdinClosed
		}
		n, err := p.pty.Write(b)
		b = b[n:]
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			select {
			case <-stop:
				return err
			default:
			}
		case err != nil:
			return errStdinClosed
		}
	}
	return nil
}
