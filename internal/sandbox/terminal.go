package sandbox

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/errs"
)

// DialTerminal returns the terminal channel of background process pid in
// sandbox id (agentapi terminal.go): frames of the process's output and
// events from the agent, of input and control messages to it. Every frame
// read from it comes from inside the sandbox: read it with
// agentapi.ReadTerminalFrame, which caps it. A paused sandbox with
// autoResume is resumed first; the connection is closed when the sandbox
// pauses or stops. Errors: the sandbox's state (errs.NotFound,
// errs.LeaseEnded, errs.Paused, ...), driver.ErrChannel when the agent's
// socket was tampered with, errs.NotFound for no such process,
// errs.Conflict for a process without a terminal, errs.RateLimited when the
// terminal has as many viewers as it takes, or a plain error when the
// agent's answer is not the protocol's.
func (m *Manager) DialTerminal(ctx context.Context, id string, pid int) (net.Conn, error) {
	if pid < 1 {
		return nil, errs.New(errs.Invalid, "process id %d is not one: give the pid of a background process", pid)
	}
	_, ls, err := m.heldOrAttach(ctx, id)
	if err != nil {
		return nil, err
	}
	conn, err := ls.handle.Dial(ctx)
	if err != nil {
		return nil, err
	}
	br, eb, err := agentUpgrade(ctx, conn, "GET", "/processes/"+strconv.Itoa(pid)+"/terminal", agentapi.TerminalUpgrade)
	if err == nil && eb != nil {
		err = terminalRefusal(eb)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	tc := &portConn{Conn: conn, br: br}
	tc.stop = context.AfterFunc(ls.requests(), func() { conn.Close() })
	return tc, nil
}

// terminalRefusal is the error for the agent's refusal of a terminal. Its
// message is the agent's (cut to 1 KiB by agentUpgrade): it names the
// process and says what to do.
func terminalRefusal(eb *agentapi.Error) error {
	kind := map[string]error{
		agentapi.CodeNotFound:    errs.NotFound,
		agentapi.CodeConflict:    errs.Conflict,
		agentapi.CodeRateLimited: errs.RateLimited,
		agentapi.CodeBadRequest:  errs.Invalid,
	}[eb.Code]
	if kind == nil {
		return fmt.Errorf("the sandbox's agent refused the terminal (%s): %s", eb.Code, eb.Message)
	}
	if kind == errs.RateLimited {
		return errs.Retry(kind, 5*time.Second, "%s", eb.Message)
	}
	return errs.New(kind, "%s", eb.Message)
}
