package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// ConnectionInfo is a kernel's connection file (the JSON a kernel is
// started with: `ipykernel_launcher -f FILE`).
type ConnectionInfo struct {
	// Transport is "ipc" (unix sockets named IP-PORT) or "tcp".
	Transport       string `json:"transport"`
	IP              string `json:"ip"`
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	Key             string `json:"key"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name,omitempty"`
}

// addr is the network and address of the socket on port.
func (c ConnectionInfo) addr(port int) (network, addr string) {
	if c.Transport == "ipc" {
		return "unix", c.IP + "-" + strconv.Itoa(port)
	}
	return "tcp", net.JoinHostPort(c.IP, strconv.Itoa(port))
}

// IPCPaths are the unix socket paths of an ipc connection (shell, iopub,
// stdin, control, heartbeat).
func (c ConnectionInfo) IPCPaths() []string {
	var out []string
	for _, p := range []int{c.ShellPort, c.IOPubPort, c.StdinPort, c.ControlPort, c.HBPort} {
		_, a := c.addr(p)
		out = append(out, a)
	}
	return out
}

// Client is a connection to one kernel's shell and IOPub channels. It is
// safe for concurrent use; the kernel runs one request at a time.
type Client struct {
	sig     signer
	session string
	shell   *zconn
	iopub   *zconn
	info    ConnectionInfo

	controlMu sync.Mutex
	control   *zconn // dialed by the first Interrupt

	mu      sync.Mutex
	waiters map[string]*Request // by msg_id
	err     error               // set when a channel broke
	done    chan struct{}       // closed when err is set
}

// Dial connects to the kernel described by info. The kernel must be
// listening; Dial does not wait for it to be ready (see Ready).
func Dial(ctx context.Context, info ConnectionInfo) (*Client, error) {
	if info.SignatureScheme != "" && info.SignatureScheme != "hmac-sha256" {
		return nil, fmt.Errorf("jupyter: signature scheme %q is not supported (only hmac-sha256)", info.SignatureScheme)
	}
	c := &Client{sig: signer{key: []byte(info.Key)}, session: newID(), info: info,
		waiters: map[string]*Request{}, done: make(chan struct{})}
	var err error
	network, addr := info.addr(info.ShellPort)
	if c.shell, err = dialZMTP(ctx, network, addr, "DEALER"); err != nil {
		return nil, err
	}
	network, addr = info.addr(info.IOPubPort)
	if c.iopub, err = dialZMTP(ctx, network, addr, "SUB"); err != nil {
		c.shell.close()
		return nil, err
	}
	// Subscribe to every topic (ZMTP 3.0: a message of 0x01 + topic).
	if err := c.iopub.send([][]byte{{1}}); err != nil {
		c.shell.close()
		c.iopub.close()
		return nil, fmt.Errorf("jupyter: subscribing to IOPub: %w", err)
	}
	go c.read(c.shell, ChannelShell)
	go c.read(c.iopub, ChannelIOPub)
	return c, nil
}

// Channel names where a message came from.
type Channel int

const (
	ChannelShell Channel = iota
	ChannelIOPub
	ChannelControl
)

// Close closes the connection; requests in flight end with an error.
func (c *Client) Close() error {
	c.fail(errors.New("jupyter: connection closed"))
	c.shell.close()
	c.iopub.close()
	c.controlMu.Lock()
	if c.control != nil {
		c.control.close()
	}
	c.controlMu.Unlock()
	return nil
}

// Interrupt sends an interrupt_request on the control channel (dialed on
// first use), for kernels whose interrupt mode is "message" rather than
// SIGINT. It does not wait for the interrupt_reply: the interrupted
// execution's own reply is the news. ctx bounds the dial.
func (c *Client) Interrupt(ctx context.Context) error {
	m, err := newMessage(c.session, "interrupt_request", struct{}{})
	if err != nil {
		return err
	}
	frames, err := c.sig.encode(m)
	if err != nil {
		return err
	}
	c.controlMu.Lock()
	defer c.controlMu.Unlock()
	if err := c.Err(); err != nil {
		return err
	}
	if c.control == nil {
		network, addr := c.info.addr(c.info.ControlPort)
		z, err := dialZMTP(ctx, network, addr, "DEALER")
		if err != nil {
			return fmt.Errorf("jupyter: dialing the control channel: %w", err)
		}
		c.control = z
		go c.read(z, ChannelControl)
	}
	if err := c.control.send(frames); err != nil {
		return fmt.Errorf("jupyter: sending to the control channel: %w", err)
	}
	return nil
}

// Done is closed when the connection broke or was closed; Err says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (nil while it works).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	close(c.done)
}

// read receives messages from one channel and hands each to the request
// it answers. Messages that answer no request in flight (output of a
// thread after its cell ended) are dropped. A message with a bad
// signature is dropped; a broken stream ends the connection.
func (c *Client) read(z *zconn, ch Channel) {
	for {
		frames, err := z.recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			c.fail(fmt.Errorf("jupyter: reading from the kernel: %w", err))
			return
		}
		m, err := c.sig.decode(frames)
		if err != nil {
			continue
		}
		c.mu.Lock()
		r := c.waiters[m.ParentID()]
		c.mu.Unlock()
		if r != nil {
			r.deliver(ch, m)
		}
	}
}

// Request is one request in flight: the kernel's messages about it, in
// the order each channel delivered them.
type Request struct {
	c      *Client
	id     string
	msgs   chan Received
	closed chan struct{}
	once   sync.Once
}

// Received is a message and its channel.
type Received struct {
	Channel Channel
	Msg     *Message
}

func (r *Request) deliver(ch Channel, m *Message) {
	select {
	case r.msgs <- Received{ch, m}:
	case <-r.closed:
	}
}

// C delivers the messages about the request; select on it together with
// the client's Done.
func (r *Request) C() <-chan Received { return r.msgs }

// ID is the request's msg_id.
func (r *Request) ID() string { return r.id }

// Next returns the next message about the request. It fails when ctx is
// done or the connection broke.
func (r *Request) Next(ctx context.Context) (Received, error) {
	select {
	case m := <-r.msgs:
		return m, nil
	default:
	}
	select {
	case m := <-r.msgs:
		return m, nil
	case <-ctx.Done():
		return Received{}, ctx.Err()
	case <-r.c.done:
		return Received{}, r.c.Err()
	}
}

// Close stops delivery of the request's messages.
func (r *Request) Close() {
	r.once.Do(func() {
		close(r.closed)
		r.c.mu.Lock()
		delete(r.c.waiters, r.id)
		r.c.mu.Unlock()
	})
}

// Send sends a request of msgType with content on the shell channel.
func (c *Client) Send(msgType string, content any) (*Request, error) {
	m, err := newMessage(c.session, msgType, content)
	if err != nil {
		return nil, err
	}
	frames, err := c.sig.encode(m)
	if err != nil {
		return nil, err
	}
	r := &Request{c: c, id: m.Header.MsgID, msgs: make(chan Received, 16), closed: make(chan struct{})}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.waiters[r.id] = r
	c.mu.Unlock()
	if err := c.shell.send(frames); err != nil {
		r.Close()
		c.fail(fmt.Errorf("jupyter: sending to the kernel: %w", err))
		return nil, c.Err()
	}
	return r, nil
}

// Ready waits until the kernel answers a kernel_info_request and its IOPub
// messages reach this client (a SUB socket misses what is published before
// its subscription arrives, so the request is repeated until they do).
func (c *Client) Ready(ctx context.Context) error {
	for {
		r, err := c.Send("kernel_info_request", struct{}{})
		if err != nil {
			return err
		}
		ok, err := waitIOPub(ctx, r, 500*time.Millisecond)
		r.Close()
		if ok || err != nil {
			return err
		}
	}
}

// waitIOPub waits up to d for an IOPub message about r.
func waitIOPub(ctx context.Context, r *Request, d time.Duration) (bool, error) {
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		m, err := r.Next(tctx)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			if tctx.Err() != nil {
				return false, nil
			}
			return false, err
		}
		if m.Channel == ChannelIOPub {
			return true, nil
		}
	}
}

// ExecuteRequest is the content of an execute_request.
type ExecuteRequest struct {
	Code            string         `json:"code"`
	Silent          bool           `json:"silent"`
	StoreHistory    bool           `json:"store_history"`
	UserExpressions map[string]any `json:"user_expressions"`
	AllowStdin      bool           `json:"allow_stdin"`
	StopOnError     bool           `json:"stop_on_error"`
}

// Execute sends code to run. The caller reads the request's messages
// until it has both the execute_reply (shell) and the idle status (IOPub),
// then closes it.
//
// stop_on_error is off: the agent sends a context one request at a time,
// so there is never a queue worth aborting, and ipykernel's abort window
// (it stays "aborting" until a callback it schedules after the error's
// reply runs) aborted the request that came right after a failing cell —
// the silent cell restoring a call's env (the env leaked into later
// cells), or under load the user's next cell.
func (c *Client) Execute(code string) (*Request, error) {
	return c.Send("execute_request", ExecuteRequest{
		Code: code, StoreHistory: true, UserExpressions: map[string]any{},
		AllowStdin: false, StopOnError: false,
	})
}

// Content types of the IOPub and reply messages an execution produces.
type (
	// Status is a status message: ExecutionState "busy", "idle" or
	// "starting".
	Status struct {
		ExecutionState string `json:"execution_state"`
	}
	// Stream is output to stdout or stderr (Name).
	Stream struct {
		Name string `json:"name"`
		Text string `json:"text"`
	}
	// DisplayData is display_data, update_display_data and execute_result
	// (which also has ExecutionCount).
	DisplayData struct {
		Data           map[string]json.RawMessage `json:"data"`
		Metadata       map[string]json.RawMessage `json:"metadata"`
		ExecutionCount int                        `json:"execution_count"`
	}
	// ErrorContent is an error message and the error part of a reply.
	ErrorContent struct {
		EName     string   `json:"ename"`
		EValue    string   `json:"evalue"`
		Traceback []string `json:"traceback"`
	}
	// ExecuteReply is the content of an execute_reply.
	ExecuteReply struct {
		Status         string `json:"status"` // "ok", "error", "aborted"
		ExecutionCount int    `json:"execution_count"`
		ErrorContent
	}
)
