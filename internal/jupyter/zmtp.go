package jupyter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// The client half of ZMTP 3.0 (https://rfc.zeromq.org/spec/23/) with the
// NULL mechanism: the DEALER and SUB sockets a Jupyter client needs, one
// connection each, to a kernel that binds ROUTER and PUB sockets.
//
// It is written here rather than taken from a ZeroMQ library because the
// peer is a kernel that runs the sandbox user's code, which can write raw
// bytes to the kernel's sockets: every length it declares is checked
// against a cap before anything is allocated, so a forged frame header
// ends one connection (and the kernel is restarted), never the agent.
// (github.com/go-zeromq/zmq4 allocates whatever size a frame declares.)

// Limits on what a kernel may send in one message.
const (
	// MaxMessageBytes bounds the frames of one message together (a chart
	// or a large DataFrame's HTML is a few MiB).
	MaxMessageBytes = 64 << 20
	// maxFrames bounds the frames of one message (routing prefix, the six
	// protocol frames and binary buffers).
	maxFrames = 64
)

// ErrTooLarge is returned when a kernel sends a message over
// MaxMessageBytes or maxFrames: the connection is closed.
var ErrTooLarge = errors.New("jupyter: the kernel sent a message over the size limit")

const (
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
)

// zconn is one ZMTP connection.
type zconn struct {
	nc net.Conn
	r  *bufio.Reader

	wmu sync.Mutex // serializes writes of whole messages
	w   *bufio.Writer
}

// dialZMTP connects to the ZeroMQ socket at network/addr as a socket of
// sockType ("DEALER" or "SUB") and completes the handshake.
func dialZMTP(ctx context.Context, network, addr, sockType string) (*zconn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	z := &zconn{nc: nc, r: newReader(nc), w: bufio.NewWriterSize(nc, 64<<10)}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	} else {
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	}
	if err := z.handshake(sockType); err != nil {
		nc.Close()
		return nil, fmt.Errorf("jupyter: ZMTP handshake with %s: %w", addr, err)
	}
	_ = nc.SetDeadline(time.Time{})
	return z, nil
}

func newReader(nc net.Conn) *bufio.Reader { return bufio.NewReaderSize(nc, 64<<10) }

// greeting is ZMTP 3.0's: signature, version 3.0, mechanism NULL, client.
func greeting() []byte {
	g := make([]byte, 64)
	g[0], g[9] = 0xff, 0x7f
	g[10], g[11] = 3, 0
	copy(g[12:32], "NULL")
	return g
}

func (z *zconn) handshake(sockType string) error {
	if _, err := z.w.Write(greeting()); err != nil {
		return err
	}
	if err := z.w.Flush(); err != nil {
		return err
	}
	var peer [64]byte
	if _, err := io.ReadFull(z.r, peer[:]); err != nil {
		return fmt.Errorf("reading the greeting: %w", err)
	}
	if peer[0] != 0xff || peer[9] != 0x7f {
		return errors.New("the peer is not a ZeroMQ socket (bad greeting signature)")
	}
	if peer[10] < 3 {
		return fmt.Errorf("the peer speaks ZMTP %d.%d; 3.0 or later is needed", peer[10], peer[11])
	}
	if mech := string(bytes.TrimRight(peer[12:32], "\x00")); mech != "NULL" {
		return fmt.Errorf("the peer wants security mechanism %q; only NULL is supported", mech)
	}
	ready := []byte("\x05READY")
	ready = appendProperty(ready, "Socket-Type", sockType)
	if sockType == "DEALER" {
		ready = appendProperty(ready, "Identity", "")
	}
	if err := z.writeFrames([][]byte{ready}, true); err != nil {
		return err
	}
	cmd, err := z.readFrames(true)
	if err != nil {
		return fmt.Errorf("reading READY: %w", err)
	}
	if len(cmd) != 1 || len(cmd[0]) < 6 || cmd[0][0] != 5 {
		return errors.New("the peer did not answer READY")
	}
	switch name := string(cmd[0][1:6]); name {
	case "READY":
		return nil
	case "ERROR":
		return fmt.Errorf("the peer refused the connection: %q", cmd[0][6:])
	default:
		return fmt.Errorf("the peer answered %q instead of READY", name)
	}
}

func appendProperty(b []byte, name, value string) []byte {
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// send writes one message.
func (z *zconn) send(frames [][]byte) error {
	z.wmu.Lock()
	defer z.wmu.Unlock()
	return z.writeFrames(frames, false)
}

func (z *zconn) writeFrames(frames [][]byte, command bool) error {
	var hdr [9]byte
	for i, f := range frames {
		fl := byte(0)
		if command {
			fl |= flagCommand
		}
		if i < len(frames)-1 {
			fl |= flagMore
		}
		n := 2
		if len(f) > 255 {
			fl |= flagLong
			binary.BigEndian.PutUint64(hdr[1:], uint64(len(f)))
			n = 9
		} else {
			hdr[1] = byte(len(f))
		}
		hdr[0] = fl
		if _, err := z.w.Write(hdr[:n]); err != nil {
			return err
		}
		if _, err := z.w.Write(f); err != nil {
			return err
		}
	}
	return z.w.Flush()
}

// recv reads the next message, skipping commands (a PING is answered).
func (z *zconn) recv() ([][]byte, error) {
	for {
		frames, err := z.readFrames(false)
		if err != nil {
			return nil, err
		}
		if frames != nil {
			return frames, nil
		}
	}
}

// readFrames reads one message (or, when wantCommand, one command). A
// command met while reading messages is handled and nil returned.
func (z *zconn) readFrames(wantCommand bool) ([][]byte, error) {
	var frames [][]byte
	total := 0
	for {
		fl, err := z.r.ReadByte()
		if err != nil {
			return nil, err
		}
		var size uint64
		if fl&flagLong != 0 {
			var b [8]byte
			if _, err := io.ReadFull(z.r, b[:]); err != nil {
				return nil, err
			}
			size = binary.BigEndian.Uint64(b[:])
		} else {
			b, err := z.r.ReadByte()
			if err != nil {
				return nil, err
			}
			size = uint64(b)
		}
		if size > uint64(MaxMessageBytes-total) || len(frames) >= maxFrames {
			return nil, ErrTooLarge
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(z.r, body); err != nil {
			return nil, err
		}
		total += int(size)
		if fl&flagCommand != 0 {
			if wantCommand {
				return [][]byte{body}, nil
			}
			if err := z.command(body); err != nil {
				return nil, err
			}
			return nil, nil
		}
		if wantCommand {
			return nil, errors.New("expected a command, got a message")
		}
		frames = append(frames, body)
		if fl&flagMore == 0 {
			return frames, nil
		}
	}
}

// command handles a command the peer sends after the handshake: PING
// (ZMTP 3.1 heartbeats) is answered with PONG, ERROR ends the connection,
// anything else is ignored.
func (z *zconn) command(body []byte) error {
	if len(body) < 1 || int(body[0])+1 > len(body) {
		return errors.New("jupyter: malformed ZMTP command")
	}
	name := string(body[1 : 1+int(body[0])])
	rest := body[1+int(body[0]):]
	switch name {
	case "PING":
		// PING: TTL (2 bytes), context (rest); PONG echoes the context.
		ctx := []byte{}
		if len(rest) > 2 {
			ctx = rest[2:]
		}
		pong := append([]byte("\x04PONG"), ctx...)
		z.wmu.Lock()
		defer z.wmu.Unlock()
		return z.writeFrames([][]byte{pong}, true)
	case "ERROR":
		return fmt.Errorf("jupyter: the kernel closed the connection with an error: %q", rest)
	}
	return nil
}

func (z *zconn) close() error { return z.nc.Close() }
