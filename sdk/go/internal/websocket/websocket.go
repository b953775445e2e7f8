// Package websocket is the smallest client of the WebSocket protocol (RFC
// 6455) that the SDK's terminals need, on the standard library alone (the
// SDK takes no dependency): the opening handshake through an *http.Client
// (its transport, TLS and proxy settings), unfragmented masked writes,
// reads of whole messages up to a cap (fragments joined), pings answered,
// and the closing handshake. No extensions (no compression), no
// subprotocols. The server's side is a full implementation
// (github.com/coder/websocket), against which this one is tested.
package websocket

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Message types.
const (
	Text   = 1
	Binary = 2
)

const (
	opContinuation = 0
	opClose        = 8
	opPing         = 9
	opPong         = 10
)

// Close status codes used here.
const (
	StatusNormal      = 1000
	StatusProtocol    = 1002
	StatusMessageBig  = 1009
	statusNoStatus    = 1005
	maxControlPayload = 125
	closeWait         = 2 * time.Second
)

// CloseError is how the peer closed the connection: its status code and
// reason.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("websocket closed with status %d %s", e.Code, e.Reason)
}

// Conn is a client's end of a WebSocket. Write and Close may be called
// from several goroutines; Read from one at a time.
type Conn struct {
	rwc    io.ReadWriteCloser
	br     *bufio.Reader
	maxMsg int

	wmu       sync.Mutex
	closeSent bool

	once sync.Once
}

// Dial opens a WebSocket to url (http:// or https://) with hc, sending
// header with the handshake. ctx bounds the handshake only. On a refusal it
// returns the server's answer (its body unread, the caller closes it) and
// an error. maxMsg caps a message read (bytes).
func Dial(ctx context.Context, hc *http.Client, url string, header http.Header, maxMsg int) (*Conn, *http.Response, error) {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, nil, err
	}
	key := base64.StdEncoding.EncodeToString(nonce[:])
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", key)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return nil, resp, fmt.Errorf("the server answered %s, not a WebSocket", resp.Status)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, nil, errors.New("the HTTP client's transport does not hand over upgraded connections")
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") ||
		resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		rwc.Close()
		return nil, nil, errors.New("the server's answer to the WebSocket handshake is not one")
	}
	return &Conn{rwc: rwc, br: bufio.NewReader(rwc), maxMsg: maxMsg}, nil, nil
}

// Write sends one message of type typ (Text or Binary).
func (c *Conn) Write(typ int, p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return errors.New("websocket: write after close")
	}
	return c.writeFrame(byte(typ), p)
}

// writeFrame writes one final frame, masked as a client must; c.wmu held.
func (c *Conn) writeFrame(op byte, p []byte) error {
	head := make([]byte, 2, 14+len(p))
	head[0] = 0x80 | op
	switch n := len(p); {
	case n < 126:
		head[1] = 0x80 | byte(n)
	case n <= 0xffff:
		head[1] = 0x80 | 126
		head = binary.BigEndian.AppendUint16(head, uint16(n))
	default:
		head[1] = 0x80 | 127
		head = binary.BigEndian.AppendUint64(head, uint64(n))
	}
	var mask [4]byte
	if _, err := rand.Read(mask[:]); err != nil {
		return err
	}
	frame := append(head, mask[:]...)
	for i, b := range p {
		frame = append(frame, b^mask[i&3])
	}
	_, err := c.rwc.Write(frame)
	return err
}

// Read returns the next message and its type. Pings are answered on the
// way. When the peer closes, Read returns a *CloseError (after answering
// the close); any other error means the connection broke.
func (c *Conn) Read() (typ int, msg []byte, err error) {
	typ = -1
	for {
		fin, op, payload, err := c.readFrame()
		if err != nil {
			c.rwc.Close()
			return 0, nil, err
		}
		switch op {
		case opPing:
			c.wmu.Lock()
			if !c.closeSent {
				_ = c.writeFrame(opPong, payload)
			}
			c.wmu.Unlock()
			continue
		case opPong:
			continue
		case opClose:
			ce := &CloseError{Code: statusNoStatus}
			if len(payload) >= 2 {
				ce.Code = int(binary.BigEndian.Uint16(payload))
				ce.Reason = string(payload[2:])
			}
			c.sendClose(StatusNormal, "")
			c.rwc.Close()
			return 0, nil, ce
		case opContinuation:
			if typ < 0 {
				return 0, nil, c.fail(StatusProtocol, "a continuation frame without a message")
			}
		case Text, Binary:
			if typ >= 0 {
				return 0, nil, c.fail(StatusProtocol, "a new message inside a fragmented one")
			}
			typ = int(op)
		default:
			return 0, nil, c.fail(StatusProtocol, fmt.Sprintf("unknown opcode %d", op))
		}
		if len(msg)+len(payload) > c.maxMsg {
			return 0, nil, c.fail(StatusMessageBig, fmt.Sprintf("a message over %d bytes", c.maxMsg))
		}
		msg = append(msg, payload...)
		if fin {
			return typ, msg, nil
		}
	}
}

// readFrame reads one frame; a length over maxMsg is refused before its
// payload is read.
func (c *Conn) readFrame() (fin bool, op byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return false, 0, nil, err
	}
	fin, op = h[0]&0x80 != 0, h[0]&0x0f
	if h[0]&0x70 != 0 || h[1]&0x80 != 0 {
		return false, 0, nil, c.fail(StatusProtocol, "reserved bits or a masked frame from the server")
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return false, 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return false, 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if op >= opClose && (n > maxControlPayload || !fin) {
		return false, 0, nil, c.fail(StatusProtocol, "a control frame that is too long or fragmented")
	}
	if n > uint64(c.maxMsg) {
		return false, 0, nil, c.fail(StatusMessageBig, fmt.Sprintf("a frame over %d bytes", c.maxMsg))
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(c.br, payload); err != nil {
		return false, 0, nil, err
	}
	return fin, op, payload, nil
}

// fail closes the connection for a protocol error and returns it.
func (c *Conn) fail(code int, why string) error {
	c.sendClose(code, "")
	c.rwc.Close()
	return fmt.Errorf("websocket: %s", why)
}

func (c *Conn) sendClose(code int, reason string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return
	}
	c.closeSent = true
	p := binary.BigEndian.AppendUint16(nil, uint16(code))
	p = append(p, reason[:min(len(reason), maxControlPayload-2)]...)
	_ = c.writeFrame(opClose, p)
}

// Close starts the closing handshake with code and reason: a Read in
// progress then ends with the server's answer. The connection is closed
// at the latest a couple of seconds later.
func (c *Conn) Close(code int, reason string) error {
	c.sendClose(code, reason)
	c.once.Do(func() { time.AfterFunc(closeWait, func() { c.rwc.Close() }) })
	return nil
}

// CloseNow closes the connection without the handshake.
func (c *Conn) CloseNow() error { return c.rwc.Close() }
