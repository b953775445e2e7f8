package websocket

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// frame is a server's (unmasked) frame.
func frame(fin bool, op byte, p []byte) []byte {
	b := []byte{op, byte(len(p))}
	if fin {
		b[0] |= 0x80
	}
	return append(b, p...)
}

// readClientFrame reads one masked frame from the client.
func readClientFrame(t *testing.T, r *bufio.Reader) (byte, []byte) {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		t.Fatal(err)
	}
	if h[1]&0x80 == 0 {
		t.Fatal("an unmasked client frame")
	}
	n := int(h[1] & 0x7f)
	if n == 126 {
		var b [2]byte
		io.ReadFull(r, b[:])
		n = int(binary.BigEndian.Uint16(b[:]))
	}
	var mask [4]byte
	io.ReadFull(r, mask[:])
	p := make([]byte, n)
	io.ReadFull(r, p)
	for i := range p {
		p[i] ^= mask[i&3]
	}
	return h[0] & 0x0f, p
}

// server upgrades and runs script on the raw connection.
func server(t *testing.T, script func(rw *bufio.ReadWriter)) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
			base64.StdEncoding.EncodeToString(sum[:]) + "\r\n\r\n")
		rw.Flush()
		script(rw)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestFragmentsPingsAndClose(t *testing.T) {
	url := server(t, func(rw *bufio.ReadWriter) {
		rw.Write(frame(false, Binary, []byte("hel")))
		rw.Write(frame(true, opPing, []byte("p")))
		rw.Write(frame(true, opContinuation, []byte("lo")))
		rw.Flush()
		if op, p := readClientFrame(t, rw.Reader); op != opPong || string(p) != "p" {
			t.Errorf("pong: %d %q", op, p)
		}
		if op, p := readClientFrame(t, rw.Reader); op != Text || string(p) != "hi" {
			t.Errorf("message: %d %q", op, p)
		}
		rw.Write(frame(true, opClose, []byte{0x03, 0xe8, 'o', 'k'}))
		rw.Flush()
		if op, _ := readClientFrame(t, rw.Reader); op != opClose {
			t.Errorf("no close answered: %d", op)
		}
	})
	c, _, err := Dial(context.Background(), http.DefaultClient, url, nil, 1024)
	if err != nil {
		t.Fatal(err)
	}
	typ, msg, err := c.Read()
	if err != nil || typ != Binary || string(msg) != "hello" {
		t.Fatalf("read %d %q %v", typ, msg, err)
	}
	if err := c.Write(Text, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Read()
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Code != 1000 || ce.Reason != "ok" {
		t.Fatalf("close: %v", err)
	}
}

func TestOversizedMessage(t *testing.T) {
	url := server(t, func(rw *bufio.ReadWriter) {
		rw.Write(frame(true, Binary, make([]byte, 100)))
		rw.Flush()
		readClientFrame(t, rw.Reader) // the client's close (1009)
	})
	c, _, err := Dial(context.Background(), http.DefaultClient, url, nil, 50)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(); err == nil {
		t.Fatal("a message over the cap was read")
	}
}

func TestRefusal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"code":"not_found","message":"no"}}`, 404)
	}))
	defer srv.Close()
	_, resp, err := Dial(context.Background(), http.DefaultClient, srv.URL, nil, 50)
	if err == nil || resp == nil || resp.StatusCode != 404 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
}
