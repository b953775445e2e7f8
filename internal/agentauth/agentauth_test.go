package agentauth

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/driver"
)

func serveHealth(t *testing.T, c Credentials) string {
	t.Helper()
	ln, err := Listen("127.0.0.1:0", c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	return ln.Addr().String()
}

func get(t *testing.T, conn net.Conn) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://agent/health", nil)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.Status
}

func TestDialWithTheSandboxsCredentials(t *testing.T) {
	c, err := New("sbx_a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveHealth(t, c)
	conn, err := Dial(context.Background(), addr, c.CertPEM, c.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := get(t, conn); got != "200 OK" {
		t.Fatalf("status %q", got)
	}
}

// The attack: the pod IP the server dials now belongs to another sandbox
// (or anything else listening there). Its certificate is not the pinned
// one, so the server refuses it before sending the token.
func TestDialRefusesAnotherSandboxsAgent(t *testing.T) {
	mine, _ := New("sbx_a", time.Hour)
	other, _ := New("sbx_b", time.Hour)
	addr := serveHealth(t, other)
	_, err := Dial(context.Background(), addr, mine.CertPEM, mine.Token)
	if !errors.Is(err, driver.ErrChannel) {
		t.Fatalf("dial to another sandbox's agent: %v, want ErrChannel", err)
	}
}

// The attack the other way: something that reaches the agent's port (another
// pod) without the token gets nothing served.
func TestAgentRefusesAWrongToken(t *testing.T) {
	c, _ := New("sbx_a", time.Hour)
	addr := serveHealth(t, c)
	_, err := Dial(context.Background(), addr, c.CertPEM, "0000000000000000000000000000000000000000000000000000000000000000")
	if !errors.Is(err, driver.ErrChannel) {
		t.Fatalf("dial with a wrong token: %v, want ErrChannel", err)
	}
	// A plain connection that never speaks TLS is closed by the agent.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write([]byte("GET /health HTTP/1.1\r\nHost: agent\r\n\r\n"))
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, _ := raw.Read(buf)
	if n > 0 && string(buf[:4]) == "HTTP" && string(buf[9:12]) == "200" {
		t.Fatalf("plain HTTP was served: %q", buf[:n])
	}
}

func TestLoadRefusesAShortToken(t *testing.T) {
	dir := t.TempDir()
	c, _ := New("sbx_a", time.Hour)
	write := func(name string, b []byte) {
		if err := writeFile(dir, name, b); err != nil {
			t.Fatal(err)
		}
	}
	write(CertFile, c.CertPEM)
	write(KeyFile, c.KeyPEM)
	write(TokenFile, []byte("short\n"))
	if _, err := Load(dir); err == nil {
		t.Fatal("a 5-character token was accepted")
	}
	write(TokenFile, []byte(c.Token+"\n"))
	got, err := Load(dir)
	if err != nil || got.Token != c.Token {
		t.Fatalf("Load: %v, token %q", err, got.Token)
	}
}
