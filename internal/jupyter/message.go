// Package jupyter is a client of the Jupyter messaging protocol (version
// 5.3): it talks to a running kernel (ipykernel) over ZeroMQ, signs what it
// sends and checks the signature of what it receives, and runs code cell by
// cell. The agent uses it to host code-interpreter contexts; see
// docs/ARCHITECTURE.md for why the agent speaks the protocol itself.
//
// Reference: https://jupyter-client.readthedocs.io/en/stable/messaging.html
package jupyter

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ProtocolVersion is the messaging protocol version the client speaks.
const ProtocolVersion = "5.3"

// delimiter separates the ZeroMQ routing prefix from a message's frames.
var delimiter = []byte("<IDS|MSG>")

// Header is a message's header (and, as parent_header, the header of the
// request a message answers).
type Header struct {
	MsgID    string `json:"msg_id"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	MsgType  string `json:"msg_type"`
	Version  string `json:"version"`
}

// Message is one protocol message. Content is kept raw: callers decode the
// fields of the message types they handle.
type Message struct {
	Header       Header
	ParentHeader Header
	Metadata     json.RawMessage
	Content      json.RawMessage
}

// Type is the message's msg_type.
func (m *Message) Type() string { return m.Header.MsgType }

// ParentID is the msg_id of the request this message answers ("" for none).
func (m *Message) ParentID() string { return m.ParentHeader.MsgID }

// ErrSignature is returned for a message whose HMAC signature does not
// match the connection's key: it was not sent by the kernel.
var ErrSignature = errors.New("jupyter: message signature does not match the key")

// signer signs and verifies messages with a connection's key
// (HMAC-SHA256, hex, over header, parent header, metadata and content).
type signer struct{ key []byte }

func (s signer) sign(frames ...[]byte) []byte {
	if len(s.key) == 0 {
		return nil
	}
	mac := hmac.New(sha256.New, s.key)
	for _, f := range frames {
		mac.Write(f)
	}
	sum := mac.Sum(nil)
	out := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(out, sum)
	return out
}

// encode builds the frames of m, signed.
func (s signer) encode(m *Message) ([][]byte, error) {
	h, err := json.Marshal(m.Header)
	if err != nil {
		return nil, err
	}
	var p []byte
	if m.ParentHeader.MsgID == "" {
		p = []byte("{}")
	} else if p, err = json.Marshal(m.ParentHeader); err != nil {
		return nil, err
	}
	md := []byte(m.Metadata)
	if len(md) == 0 {
		md = []byte("{}")
	}
	c := []byte(m.Content)
	if len(c) == 0 {
		c = []byte("{}")
	}
	return [][]byte{delimiter, s.sign(h, p, md, c), h, p, md, c}, nil
}

// decode parses frames (routing prefix, delimiter, signature, header,
// parent, metadata, content, buffers) and checks the signature.
func (s signer) decode(frames [][]byte) (*Message, error) {
	i := 0
	for i < len(frames) && !bytes.Equal(frames[i], delimiter) {
		i++
	}
	if len(frames)-i < 6 {
		return nil, fmt.Errorf("jupyter: malformed message: %d frames, no delimiter or fewer than 5 after it", len(frames))
	}
	f := frames[i+1:]
	if len(s.key) > 0 && !hmac.Equal(f[0], s.sign(f[1], f[2], f[3], f[4])) {
		return nil, ErrSignature
	}
	m := &Message{Metadata: f[3], Content: f[4]}
	if err := json.Unmarshal(f[1], &m.Header); err != nil {
		return nil, fmt.Errorf("jupyter: malformed header: %w", err)
	}
	if err := json.Unmarshal(f[2], &m.ParentHeader); err != nil {
		return nil, fmt.Errorf("jupyter: malformed parent header: %w", err)
	}
	return m, nil
}

// newMessage is a request of msgType with content (marshalled to JSON).
func newMessage(session, msgType string, content any) (*Message, error) {
	c, err := json.Marshal(content)
	if err != nil {
		return nil, err
	}
	return &Message{
		Header: Header{
			MsgID:    newID(),
			Session:  session,
			Username: "withruntime",
			Date:     time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
			MsgType:  msgType,
			Version:  ProtocolVersion,
		},
		Content: c,
	}, nil
}

// newID returns a random hex identifier (128 bits).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NewKey returns a random signing key for a new kernel's connection (hex
// of 256 bits, as jupyter_client makes them).
func NewKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
