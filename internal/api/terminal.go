package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/sdk/go/wire"
)

// Terminals: GET /v1/sandboxes/{id}/processes/{pid}/terminal is a WebSocket
// (RFC 6455) onto the terminal of a background process started with "pty"
// (wire/terminal.go says what travels on it). The server relays between
// the client and the sandbox's agent (Manager.DialTerminal): binary
// messages are the terminal's bytes both ways; text messages are checked
// and re-encoded, so that nothing but a wire.TerminalControl reaches the
// agent and nothing but a wire.TerminalEvent, the only kinds the agent
// sends, reaches the client. Every frame from the agent is read through
// agentapi.ReadTerminalFrame's cap. The server holds one frame each way per
// WebSocket: a slow client makes the server read the agent slowly, and the
// agent drops that viewer's oldest output (the program never waits); a
// client that sends faster than the program reads is slowed by TCP.
//
// Writer policy: every viewer may write. Input messages are written to the
// terminal whole, in the order the agent receives them; the last resize
// wins. A viewer that only watches sends nothing.

// Bounds of the terminals one key holds open at once in this server.
const (
	// maxTerminalsPerKey bounds a key's open terminal WebSockets (each
	// holds two descriptors and a connection to its sandbox's agent).
	maxTerminalsPerKey = 256
	// terminalHeldBytes is what one open terminal holds in the server
	// (frame buffers each way, the WebSocket's own buffers), booked in the
	// key's memory bound (budget.go).
	terminalHeldBytes = 4 * wire.MaxTerminalMessageBytes
	// terminalPing is how often the server pings a quiet client; one that
	// does not answer within terminalPongWait is closed.
	terminalPing     = 30 * time.Second
	terminalPongWait = 20 * time.Second
	// maxTerminalEventBytes caps an event from the agent (only exit,
	// dropped and error events exist, all small).
	maxTerminalEventBytes = 4 << 10
)

// terminalCounts is the server's count of open terminals by key id.
var terminalCounts = struct {
	mu sync.Mutex
	n  map[string]int
}{n: map[string]int{}}

// openTerminal books a terminal for key, or says why it cannot.
func openTerminal(key string) (release func(), err error) {
	terminalCounts.mu.Lock()
	defer terminalCounts.mu.Unlock()
	if terminalCounts.n[key] >= maxTerminalsPerKey {
		return nil, errs.Retry(errs.RateLimited, 10*time.Second,
			"this key has %d terminals open on this server, the most it may; close one (or detach a viewer) first", maxTerminalsPerKey)
	}
	if !Hold(key, terminalHeldBytes) {
		return nil, errs.Retry(errs.Capacity, 10*time.Second,
			"this key's requests hold %d MiB of the server's memory, the most one key may; retry once some have ended", maxHeldBytesPerKey>>20)
	}
	terminalCounts.n[key]++
	return func() {
		Release(key, terminalHeldBytes)
		terminalCounts.mu.Lock()
		defer terminalCounts.mu.Unlock()
		if terminalCounts.n[key]--; terminalCounts.n[key] <= 0 {
			delete(terminalCounts.n, key)
		}
	}, nil
}

func (s *Server) terminalRoutes() {
	s.handle("GET", "/v1/sandboxes/{id}/processes/{pid}/terminal", s.terminal)
}

// isWebSocket reports whether r asks for a WebSocket.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") &&
		strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
}

// terminal serves one terminal WebSocket.
func (s *Server) terminal(w http.ResponseWriter, r *http.Request) error {
	id, raw := r.PathValue("id"), r.PathValue("pid")
	if err := intParam(1, maxPid, "(a process id)")("pid", raw); err != nil {
		return err
	}
	if err := checkQuery(r.URL.RawQuery, nil); err != nil {
		return err
	}
	if !isWebSocket(r) {
		return badRequest("GET %s is a WebSocket: connect with a WebSocket client (Connection: Upgrade, Upgrade: websocket), such as `withruntime sandbox attach %s %s` or the SDKs' terminals", r.URL.Path, id, raw)
	}
	pid, _ := strconv.Atoi(raw) // checked above
	release, err := openTerminal(keyFrom(r.Context()).ID)
	if err != nil {
		return err
	}
	defer release()
	agent, err := s.cfg.Manager.DialTerminal(r.Context(), id, pid)
	if err != nil {
		return err
	}
	defer agent.Close()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil // Accept answered (403 for a cross-origin page, 400 for a bad handshake)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(wire.MaxTerminalMessageBytes)
	s.relayTerminal(r.Context(), ws, agent, id)
	return nil
}

// relayTerminal relays between the client's WebSocket and the agent's
// terminal channel until either ends.
func (s *Server) relayTerminal(ctx context.Context, ws *websocket.Conn, agent net.Conn, id string) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.terminalInput(ctx, ws, agent)
		// The client closed (or broke): the output side ends quietly, and
		// closing the agent's side ends the viewer there.
		cancel()
		agent.Close()
	}()
	go func() {
		defer wg.Done()
		defer cancel()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(terminalPing):
			}
			pctx, pcancel := context.WithTimeout(ctx, terminalPongWait)
			err := ws.Ping(pctx)
			pcancel()
			if err != nil {
				ws.CloseNow()
				return
			}
		}
	}()
	code, reason := s.terminalOutput(ctx, ws, agent, id)
	_ = ws.Close(code, reason)
	cancel()
	wg.Wait()
}

// terminalOutput sends the agent's frames to the client until the exit
// event or the channel's end, and returns the WebSocket's close status.
func (s *Server) terminalOutput(ctx context.Context, ws *websocket.Conn, agent net.Conn, id string) (websocket.StatusCode, string) {
	buf := make([]byte, agentapi.MaxTerminalFrameBytes)
	for {
		kind, p, err := agentapi.ReadTerminalFrame(agent, buf)
		if err != nil {
			if ctx.Err() != nil {
				return websocket.StatusNormalClosure, ""
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) {
				s.cfg.Log.Warn("terminal: the agent's frame breaks its protocol", "sandbox", id, "err", err)
				return websocket.StatusInternalError, "the sandbox's agent broke the terminal protocol"
			}
			// The sandbox paused or stopped, or its agent went away.
			msg := "the connection to the sandbox ended before the process did"
			if _, rerr := s.cfg.Manager.Running(context.WithoutCancel(ctx), id); rerr != nil {
				msg = rerr.Error()
			}
			_ = writeEvent(ctx, ws, wire.TerminalEvent{Type: wire.EventError, Message: msg})
			return websocket.StatusGoingAway, "the sandbox's terminal channel ended; reconnect to see why"
		}
		switch kind {
		case agentapi.TerminalOutput:
			if ws.Write(ctx, websocket.MessageBinary, p) != nil {
				return websocket.StatusNormalClosure, ""
			}
		case agentapi.TerminalEvent:
			ev, err := agentEvent(p)
			if err != nil {
				s.cfg.Log.Warn("terminal: the agent's event breaks its protocol", "sandbox", id, "err", err)
				return websocket.StatusInternalError, "the sandbox's agent broke the terminal protocol"
			}
			if writeEvent(ctx, ws, ev) != nil {
				return websocket.StatusNormalClosure, ""
			}
			if ev.Type == wire.EventExit {
				return websocket.StatusNormalClosure, "the process exited"
			}
		default:
			s.cfg.Log.Warn("terminal: the agent sent an unknown frame", "sandbox", id, "kind", kind)
			return websocket.StatusInternalError, "the sandbox's agent broke the terminal protocol"
		}
	}
}

// agentEvent decodes an event from the agent (hostile) into one of the
// kinds the agent sends, with only their fields.
func agentEvent(p []byte) (wire.TerminalEvent, error) {
	var ev wire.TerminalEvent
	if len(p) > maxTerminalEventBytes {
		return ev, fmt.Errorf("an event of %d bytes, over %d", len(p), maxTerminalEventBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return ev, err
	}
	switch ev.Type {
	case wire.EventExit:
		if ev.ExitCode == nil {
			return ev, errors.New("an exit event without its exit code")
		}
		return wire.TerminalEvent{Type: ev.Type, ExitCode: ev.ExitCode, Signal: ev.Signal, TimedOut: ev.TimedOut,
			OOMKilled: ev.OOMKilled, ProcessLimitKilled: ev.ProcessLimitKilled}, nil
	case wire.EventDropped:
		return wire.TerminalEvent{Type: ev.Type, Dropped: ev.Dropped}, nil
	case wire.EventError:
		return wire.TerminalEvent{Type: ev.Type, Message: ev.Message}, nil
	}
	return ev, fmt.Errorf("an event of type %q", ev.Type)
}

func writeEvent(ctx context.Context, ws *websocket.Conn, ev wire.TerminalEvent) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return ws.Write(ctx, websocket.MessageText, data)
}

// terminalInput sends the client's messages to the agent until either
// ends: binary messages as input, text messages checked as
// wire.TerminalControl (a bad one is answered with an error event).
func (s *Server) terminalInput(ctx context.Context, ws *websocket.Conn, agent net.Conn) {
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			if len(data) > 0 && agentapi.WriteTerminalFrame(agent, agentapi.TerminalInput, data) != nil {
				return
			}
			continue
		}
		ctl, err := checkControl(data)
		if err != nil {
			if writeEvent(ctx, ws, wire.TerminalEvent{Type: wire.EventError, Message: err.Error()}) != nil {
				return
			}
			continue
		}
		enc, _ := json.Marshal(ctl)
		if agentapi.WriteTerminalFrame(agent, agentapi.TerminalControl, enc) != nil {
			return
		}
	}
}

// checkControl decodes and checks a control message from the client.
func checkControl(data []byte) (wire.TerminalControl, error) {
	var c wire.TerminalControl
	if err := decodeJSON(data, &c); err != nil {
		return c, fmt.Errorf("%v; a control message is {\"type\": \"resize\", \"cols\": C, \"rows\": R} or {\"type\": \"signal\", \"signal\": \"SIGTERM\"}", err)
	}
	switch c.Type {
	case wire.ControlResize:
		if c.Cols < 1 || c.Cols > wire.MaxPtyCols || c.Rows < 1 || c.Rows > wire.MaxPtyRows || c.Signal != "" {
			return c, fmt.Errorf("resize wants cols from 1 to %d and rows from 1 to %d (and no signal), got cols %d, rows %d", wire.MaxPtyCols, wire.MaxPtyRows, c.Cols, c.Rows)
		}
		return wire.TerminalControl{Type: c.Type, Cols: c.Cols, Rows: c.Rows}, nil
	case wire.ControlSignal:
		if c.Signal == "" || c.Cols != 0 || c.Rows != 0 {
			return c, errors.New(`signal wants the signal's name and nothing else, e.g. {"type": "signal", "signal": "SIGTERM"}`)
		}
		if err := checkName("signal", c.Signal); err != nil {
			return c, err
		}
		return wire.TerminalControl{Type: c.Type, Signal: c.Signal}, nil
	}
	return c, fmt.Errorf("control message type %q is not %q or %q", c.Type, wire.ControlResize, wire.ControlSignal)
}
