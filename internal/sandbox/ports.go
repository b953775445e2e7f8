package sandbox

import (
	"bufio"
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

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/errs"
)

// Limits on the agent's answer to a port connect, which comes from inside
// the sandbox: its head (status line and headers) and the error body of a
// refusal are read with caps, within portHandshakeTimeout.
const (
	maxPortHandshakeBytes = 16 << 10
	maxPortErrorBytes     = 8 << 10
	portHandshakeTimeout  = 15 * time.Second
)

// ErrPortClosed says nothing in the sandbox accepts connections on the
// port DialPort was asked for (the API answers 502 port_closed).
var ErrPortClosed = errors.New("port closed")

// DialPort returns a connection to TCP port on the loopback of sandbox id,
// relayed by its agent over the agent channel (agentapi.PortUpgrade): the
// host never dials an address of the sandbox, so the connection reaches that
// sandbox's own ports and nothing else. A paused sandbox with autoResume is
// resumed first, as for any request. The connection is closed when the
// sandbox pauses. Errors: the sandbox's state (errs.NotFound,
// errs.LeaseEnded, errs.Paused, ...), driver.ErrChannel when the agent's
// socket was tampered with, ErrPortClosed (with the agent's message) when
// nothing listens on the port, or a plain error when the agent's answer is
// not the protocol's.
func (m *Manager) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, errs.New(errs.Invalid, "port %d is not a TCP port: give a number from 1 to 65535", port)
	}
	_, ls, err := m.heldOrAttach(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := ls.waitGate(ctx); err != nil {
		return nil, err
	}
	conn, err := ls.handle.Dial(ctx)
	if err != nil {
		return nil, err
	}
	br, err := portHandshake(ctx, conn, port)
	if err != nil {
		conn.Close()
		return nil, err
	}
	pc := &portConn{Conn: conn, br: br}
	pc.stop = context.AfterFunc(ls.requests(), func() { conn.Close() })
	return pc, nil
}

// portHandshake asks the agent for the port and reads its answer, with
// the caps above. It returns the reader holding whatever the agent sent
// after its 101 answer.
func portHandshake(ctx context.Context, conn net.Conn, port int) (*bufio.Reader, error) {
	br, eb, err := agentUpgrade(ctx, conn, "POST", "/ports/"+strconv.Itoa(port)+"/connect", agentapi.PortUpgrade)
	if err != nil {
		return nil, fmt.Errorf("the port connect: %w", err)
	}
	if eb != nil {
		if eb.Code == agentapi.CodePortClosed {
			return nil, fmt.Errorf("%w: %s", ErrPortClosed, eb.Message)
		}
		return nil, fmt.Errorf("the sandbox's agent refused the port connect: %s", eb.Message)
	}
	return br, nil
}

// agentUpgrade sends the agent a request for path that upgrades the
// connection to proto, and reads its answer with the caps above, within
// portHandshakeTimeout. On a 101 it returns the reader holding whatever
// the agent sent after it; on a refusal, the agent's error (its message cut
// to 1 KiB); an answer that is neither is an error.
func agentUpgrade(ctx context.Context, conn net.Conn, method, path, proto string) (*bufio.Reader, *agentapi.Error, error) {
	deadline := time.Now().Add(portHandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := method + " " + path + " HTTP/1.1\r\nHost: agent\r\nConnection: Upgrade\r\nUpgrade: " +
		proto + "\r\nContent-Length: 0\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		return nil, nil, fmt.Errorf("asking the agent: %w", err)
	}
	// The head is read through a limit: a hostile agent's endless header
	// ends the read at the cap, not in the server's memory.
	lr := &io.LimitedReader{R: conn, N: maxPortHandshakeBytes}
	br := bufio.NewReaderSize(lr, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("the sandbox's agent did not answer as the protocol says (%v)", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxPortErrorBytes))
		var eb agentapi.ErrorBody
		_ = json.Unmarshal(body, &eb)
		if eb.Error.Message == "" {
			eb.Error.Message = fmt.Sprintf("the agent answered %d", resp.StatusCode)
		}
		if len(eb.Error.Message) > 1024 {
			eb.Error.Message = eb.Error.Message[:1024]
		}
		return nil, &eb.Error, nil
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), proto) {
		return nil, nil, fmt.Errorf("the sandbox's agent upgraded to %q, not %q", resp.Header.Get("Upgrade"), proto)
	}
	// From here on the stream is the upgraded one's: no cap, no deadline.
	lr.N = 1 << 62
	_ = conn.SetDeadline(time.Time{})
	return br, nil, nil
}

// portConn is a relayed connection: reads first drain what the handshake
// read ahead.
type portConn struct {
	net.Conn
	br   *bufio.Reader
	stop func() bool
	once sync.Once
}

func (c *portConn) Read(p []byte) (int, error) { return c.br.Read(p) }

// CloseWrite passes a half close on to the port (the agent's socket end
// closes its write side, and the agent then closes the TCP connection's).
func (c *portConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *portConn) Close() error {
	c.once.Do(func() { c.stop() })
	return c.Conn.Close()
}
