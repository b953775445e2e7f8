package jupyter

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

func TestSignAndVerify(t *testing.T) {
	s := signer{key: []byte("k")}
	m, err := newMessage("sess", "execute_request", map[string]string{"code": "1"})
	if err != nil {
		t.Fatal(err)
	}
	frames, err := s.encode(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.decode(append([][]byte{[]byte("routing-id")}, frames...))
	if err != nil || got.Header.MsgID != m.Header.MsgID || string(got.Content) != `{"code":"1"}` {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	frames[5] = []byte(`{"code":"2"}`)
	if _, err := s.decode(frames); !errors.Is(err, ErrSignature) {
		t.Fatalf("tampered content: err = %v, want ErrSignature", err)
	}
	if _, err := (signer{key: []byte("other")}).decode(frames); !errors.Is(err, ErrSignature) {
		t.Fatalf("another key: err = %v", err)
	}
	if _, err := s.decode([][]byte{[]byte("<IDS|MSG>"), []byte("x")}); err == nil {
		t.Fatal("a short message decoded")
	}
}

// TestAgainstZeroMQ talks to a ROUTER and a PUB socket of another ZeroMQ
// implementation (go-zeromq/zmq4), as a kernel binds them.
func TestAgainstZeroMQ(t *testing.T) {
	dir := t.TempDir()
	info := ConnectionInfo{Transport: "ipc", IP: filepath.Join(dir, "k"), ShellPort: 1, IOPubPort: 2, Key: NewKey(), SignatureScheme: "hmac-sha256"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	router := zmq4.NewRouter(ctx, zmq4.WithID(zmq4.SocketIdentity("kernel")))
	defer router.Close()
	pub := zmq4.NewPub(ctx)
	defer pub.Close()
	_, shellAddr := info.addr(info.ShellPort)
	_, iopubAddr := info.addr(info.IOPubPort)
	if err := router.Listen("ipc://" + shellAddr); err != nil {
		t.Fatal(err)
	}
	if err := pub.Listen("ipc://" + iopubAddr); err != nil {
		t.Fatal(err)
	}
	sig := signer{key: []byte(info.Key)}
	// The kernel: answer each request on shell, with busy/idle on IOPub.
	go func() {
		for {
			msg, err := router.Recv()
			if err != nil {
				return
			}
			req, err := sig.decode(msg.Frames)
			if err != nil {
				t.Errorf("kernel: %v", err)
				return
			}
			publish := func(msgType string, content any) {
				m, _ := newMessage("kernel", msgType, content)
				m.ParentHeader = req.Header
				f, _ := sig.encode(m)
				_ = pub.Send(zmq4.NewMsgFrom(append([][]byte{[]byte("kernel.1." + msgType)}, f...)...))
			}
			publish("status", Status{ExecutionState: "busy"})
			if req.Type() == "execute_request" {
				var er ExecuteRequest
				_ = json.Unmarshal(req.Content, &er)
				publish("stream", Stream{Name: "stdout", Text: er.Code})
			}
			publish("status", Status{ExecutionState: "idle"})
			reply, _ := newMessage("kernel", req.Type()[:len(req.Type())-len("request")]+"reply", ExecuteReply{Status: "ok", ExecutionCount: 1})
			reply.ParentHeader = req.Header
			f, _ := sig.encode(reply)
			_ = router.Send(zmq4.NewMsgFrom(append([][]byte{msg.Frames[0]}, f...)...))
		}
	}()

	c, err := Dial(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := c.Execute("print('hi')")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	idle, replied := false, false
	for !idle || !replied {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		got = append(got, m.Msg.Type())
		switch m.Msg.Type() {
		case "status":
			var st Status
			_ = json.Unmarshal(m.Msg.Content, &st)
			idle = st.ExecutionState == "idle"
		case "execute_reply":
			replied = true
		case "stream":
			var st Stream
			_ = json.Unmarshal(m.Msg.Content, &st)
			if st.Text != "print('hi')" {
				t.Errorf("stream %q", st.Text)
			}
		}
	}
	if len(got) != 4 {
		t.Errorf("messages %v, want status, stream, status, reply", got)
	}
}

// rawPeer accepts one connection at path, completes the ZMTP handshake as
// sockType and hands the connection to then.
func rawPeer(t *testing.T, path, sockType string, then func(net.Conn)) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		g := greeting()
		g[32] = 1
		_, _ = c.Write(g)
		var buf [64]byte
		if _, err := io.ReadFull(c, buf[:]); err != nil {
			return
		}
		z := &zconn{nc: c}
		z.r = newReader(c)
		if _, err := z.readFrames(true); err != nil {
			return
		}
		ready := appendProperty([]byte("\x05READY"), "Socket-Type", sockType)
		_, _ = c.Write(append([]byte{flagCommand, byte(len(ready))}, ready...))
		then(c)
	}()
}

// TestFrameCap: a peer that declares a frame of 2^62 bytes ends the
// connection with ErrTooLarge; nothing of that size is allocated.
func TestFrameCap(t *testing.T) {
	dir := t.TempDir()
	info := ConnectionInfo{Transport: "ipc", IP: filepath.Join(dir, "k"), ShellPort: 1, IOPubPort: 2, Key: "k"}
	_, shellAddr := info.addr(1)
	_, iopubAddr := info.addr(2)
	hold := make(chan struct{})
	defer close(hold)
	rawPeer(t, shellAddr, "ROUTER", func(net.Conn) { <-hold })
	rawPeer(t, iopubAddr, "PUB", func(c net.Conn) {
		hdr := []byte{flagLong, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(hdr[1:], 1<<62)
		_, _ = c.Write(hdr)
		<-hold
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the connection did not end")
	}
	if !errors.Is(c.Err(), ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", c.Err())
	}
	if err := c.Ready(ctx); err == nil {
		t.Fatal("Ready on a broken connection succeeded")
	}
}

// TestTooManyFrames: a message of more frames than maxFrames is refused.
func TestTooManyFrames(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		for i := 0; i < maxFrames+1; i++ {
			_, _ = b.Write([]byte{flagMore, 1, 'x'})
		}
		b.Close()
	}()
	z := &zconn{nc: a, r: newReader(a)}
	if _, err := z.readFrames(false); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}
