package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/sdk/go/wire"
)

// StartProcess starts a background process (POST .../processes); with
// req.Pty set it runs on a terminal, reached with Terminal.
func (c *Client) StartProcess(ctx context.Context, id string, req agentapi.ExecRequest) (agentapi.Process, error) {
	var p agentapi.Process
	err := c.do(ctx, "POST", "/v1/sandboxes/"+id+"/processes", req, &p)
	return p, err
}

// Signal sends sig to everything background process pid started (POST
// .../kill).
func (c *Client) Signal(ctx context.Context, id string, pid int, sig string) error {
	return c.do(ctx, "POST", "/v1/sandboxes/"+id+"/processes/"+strconv.Itoa(pid)+"/kill", agentapi.KillRequest{Signal: sig}, nil)
}

// TerminalConn is one WebSocket onto a process's terminal (wire/terminal.go
// says what travels on it). Its methods may be called from several
// goroutines, but Next from one at a time.
type TerminalConn struct {
	ws *websocket.Conn
}

// terminalDialWait bounds the WebSocket's opening handshake.
const terminalDialWait = 60 * time.Second

// Terminal connects to the terminal of background process pid in sandbox
// id. Errors: *APIError with the server's answer (404 no such sandbox or
// process, 409 a process without a terminal, 429 too many clients), or a
// transport error.
func (c *Client) Terminal(ctx context.Context, id string, pid int) (*TerminalConn, error) {
	if c.APIKey == "" {
		return nil, ErrNoAPIKey
	}
	url := strings.TrimRight(c.BaseURL, "/") + "/v1/sandboxes/" + id + "/processes/" + strconv.Itoa(pid) + "/terminal"
	dctx, cancel := context.WithTimeout(ctx, terminalDialWait)
	defer cancel()
	hc := c.HTTP // not the bounded client: a terminal may be quiet for hours; pings keep it honest
	if hc == nil {
		hc = http.DefaultClient
	}
	ws, resp, err := websocket.Dial(dctx, url, &websocket.DialOptions{
		HTTPClient:      hc,
		HTTPHeader:      http.Header{"Authorization": {"Bearer " + c.APIKey}},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			var eb agentapi.ErrorBody
			data, _ := io.ReadAll(resp.Body)
			if json.Unmarshal(data, &eb) == nil && eb.Error.Message != "" {
				return nil, &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
			}
			return nil, &APIError{Status: resp.StatusCode, Code: "http_" + resp.Status, Message: resp.Status}
		}
		return nil, fmt.Errorf("cannot open the terminal at %s: %w", c.BaseURL, err)
	}
	ws.SetReadLimit(2 * wire.MaxTerminalMessageBytes)
	return &TerminalConn{ws: ws}, nil
}

// Input writes p to the terminal, in messages of at most
// wire.MaxTerminalMessageBytes.
func (t *TerminalConn) Input(ctx context.Context, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), wire.MaxTerminalMessageBytes)
		if err := t.ws.Write(ctx, websocket.MessageBinary, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Control sends a control message (resize, signal).
func (t *TerminalConn) Control(ctx context.Context, ctl wire.TerminalControl) error {
	data, err := json.Marshal(ctl)
	if err != nil {
		return err
	}
	return t.ws.Write(ctx, websocket.MessageText, data)
}

// Next returns the next output (data) or event (ev, when data is nil).
// After the exit event the server closes: Next then returns an error.
func (t *TerminalConn) Next(ctx context.Context) (data []byte, ev *wire.TerminalEvent, err error) {
	for {
		typ, msg, err := t.ws.Read(ctx)
		if err != nil {
			return nil, nil, err
		}
		if typ == websocket.MessageBinary {
			if len(msg) == 0 {
				continue
			}
			return msg, nil, nil
		}
		var e wire.TerminalEvent
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, nil, fmt.Errorf("the server sent a terminal event that is not one (%v)", err)
		}
		return nil, &e, nil
	}
}

// Close closes the WebSocket (the process runs on).
func (t *TerminalConn) Close() error { return t.ws.Close(websocket.StatusNormalClosure, "") }
