package agent

import (
	"context"
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
)

// portDialTimeout bounds the connect to a port on the sandbox's loopback.
const portDialTimeout = 5 * time.Second

// handlePortConnect is POST /ports/{port}/connect: it connects to the TCP
// port on the sandbox's own loopback and, once connected, turns the
// request's connection into that TCP connection (see agentapi.PortUpgrade).
// Only loopback addresses are dialed: the relay reaches this sandbox's own
// ports and nothing else, whatever the network policy lets out.
func (s *Server) handlePortConnect(w http.ResponseWriter, r *http.Request) error {
	raw := r.PathValue("port")
	port, err := strconv.Atoi(raw)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != raw {
		return badRequest("port %q is not a TCP port: give a number from 1 to 65535", raw)
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), agentapi.PortUpgrade) {
		return badRequest("POST /ports/{port}/connect upgrades the connection: send Connection: Upgrade and Upgrade: %s", agentapi.PortUpgrade)
	}
	target, err := dialLoopback(r.Context(), port)
	if err != nil {
		return &apiError{status: http.StatusBadGateway, code: agentapi.CodePortClosed,
			msg: fmt.Sprintf("nothing in the sandbox accepts connections on port %d (127.0.0.1 and ::1 were tried: %v); start a server listening on that port", port, err)}
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		target.Close()
		return fmt.Errorf("taking over the connection: %w", err)
	}
	_ = conn.SetDeadline(time.Time{}) // the server's header timeout no longer applies
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+agentapi.PortUpgrade+"\r\n\r\n"); err != nil {
		conn.Close()
		target.Close()
		return nil
	}
	go splice(conn, brw.Reader, target)
	return nil
}

// dialLoopback connects to port on 127.0.0.1, then on ::1.
func dialLoopback(ctx context.Context, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: portDialTimeout}
	p := strconv.Itoa(port)
	c, err4 := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", p))
	if err4 == nil {
		return c, nil
	}
	c, err6 := d.DialContext(ctx, "tcp6", net.JoinHostPort("::1", p))
	if err6 == nil {
		return c, nil
	}
	return nil, err4
}

// splice copies a (whose buffered reads come from ar) and b into each
// other until both directions have ended. An end of file on one side is
// passed on as a half close; an error on either ends both.
func splice(a net.Conn, ar io.Reader, b net.Conn) {
	var once sync.Once
	closeBoth := func() { once.Do(func() { a.Close(); b.Close() }) }
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst net.Conn, src io.Reader) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			closeBoth()
			return
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			_ = cw.CloseWrite()
			return
		}
		closeBoth()
	}
	go pipe(b, ar)
	go pipe(a, b)
	wg.Wait()
	closeBoth()
}
