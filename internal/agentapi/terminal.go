package agentapi

import (
	"encoding/binary"
	"fmt"
	"io"

	"withruntime.dev/runtime/sdk/go/wire"
)

// The terminal channel between the host and the agent. The host asks
//
//	GET /processes/{pid}/terminal   (Connection: Upgrade, Upgrade: TerminalUpgrade)
//
// and the agent answers 101 Switching Protocols (or 404 for no such process,
// 409 for a process without a terminal, 429 when it has MaxTerminalViewers
// already). From then on both sides send frames: one kind byte, the
// payload's length as 4 bytes big-endian, then the payload (at most
// MaxTerminalFrameBytes).
//
//	agent -> host: TerminalOutput (raw output bytes), TerminalEvent (a
//	               wire.TerminalEvent as JSON: dropped, exit)
//	host -> agent: TerminalInput (raw input bytes), TerminalControl (a
//	               wire.TerminalControl as JSON: resize, signal)
//
// The agent sends the replay and live output, then the exit event, and
// closes the connection. The host reads every frame with its cap, since the
// agent is inside the sandbox.

// TerminalUpgrade is the Upgrade protocol of GET /processes/{pid}/terminal.
const TerminalUpgrade = "withruntime-terminal"

// Terminal frame kinds.
const (
	TerminalOutput  byte = 'o'
	TerminalEvent   byte = 'e'
	TerminalInput   byte = 'i'
	TerminalControl byte = 'c'
)

// MaxTerminalFrameBytes caps one frame's payload either way (64 KiB).
const MaxTerminalFrameBytes = wire.MaxTerminalMessageBytes

// WriteTerminalFrame writes one frame of kind holding p (at most
// MaxTerminalFrameBytes).
func WriteTerminalFrame(w io.Writer, kind byte, p []byte) error {
	if len(p) > MaxTerminalFrameBytes {
		return fmt.Errorf("terminal frame of %d bytes is over the %d-byte cap", len(p), MaxTerminalFrameBytes)
	}
	var head [5]byte
	head[0] = kind
	binary.BigEndian.PutUint32(head[1:], uint32(len(p)))
	// One write: frames from several goroutines never interleave when
	// the caller serialises calls, and small frames go out in one segment.
	buf := make([]byte, 0, len(head)+len(p))
	buf = append(append(buf, head[:]...), p...)
	_, err := w.Write(buf)
	return err
}

// ReadTerminalFrame reads one frame into buf (which must hold
// MaxTerminalFrameBytes) and returns its kind and payload (a slice of buf).
// A declared length over the cap is an error and nothing more is read.
func ReadTerminalFrame(r io.Reader, buf []byte) (kind byte, p []byte, err error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > MaxTerminalFrameBytes || int(n) > len(buf) {
		return 0, nil, fmt.Errorf("terminal frame declares %d bytes, over the %d-byte cap", n, MaxTerminalFrameBytes)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return head[0], buf[:n], nil
}
