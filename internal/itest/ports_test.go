package itest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// portServers are programs the port relay tests run inside sandboxes: an
// echo of the request (method, path, headers, body length; /goto?URL
// redirects to URL), a raw Upgrade
// echo (what a WebSocket does), and two hostile servers: one whose answer
// is an endless header, one that answers random bytes.
const portServers = `
import http.server, json, os, socket, sys, threading, urllib.parse

class Echo(http.server.BaseHTTPRequestHandler):
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.path.startswith("/goto?"):
            self.send_response(302)
            self.send_header("Location", urllib.parse.unquote(self.path[len("/goto?"):]))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/landing")
            self.send_header("Set-Cookie", "sid=1; Path=/; Domain=example.com; HttpOnly")
            self.end_headers()
            return
        out = json.dumps({"method": self.command, "path": self.path, "headers": dict(self.headers),
                          "bodyLength": len(body), "who": os.environ.get("WHO", "")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = do_PUT = answer
    def log_message(self, *a): pass

def serve_upgrade(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen(16)
    while True:
        c, _ = s.accept()
        def run(c):
            data = b""
            while b"\r\n\r\n" not in data:
                data += c.recv(4096)
            c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
            rest = data.split(b"\r\n\r\n", 1)[1]
            if rest: c.sendall(rest)
            while True:
                b = c.recv(4096)
                if not b: break
                c.sendall(b)
            c.close()
        threading.Thread(target=run, args=(c,), daemon=True).start()

def serve_hostile(port, kind):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen(16)
    while True:
        c, _ = s.accept()
        def run(c):
            try:
                c.recv(65536)
                if kind == "headers":
                    c.sendall(b"HTTP/1.1 200 OK\r\n")
                    line = b"X-Flood: " + b"a" * 1000 + b"\r\n"
                    while True: c.sendall(line * 64)
                else:
                    while True: c.sendall(os.urandom(65536))
            except OSError: pass
            finally: c.close()
        threading.Thread(target=run, args=(c,), daemon=True).start()

kind, port = sys.argv[1], int(sys.argv[2])
if kind == "echo":
    http.server.ThreadingHTTPServer(("127.0.0.1", port), Echo).serve_forever()
elif kind == "echo6":
    class V6(http.server.ThreadingHTTPServer): address_family = socket.AF_INET6
    V6(("::", port), Echo).serve_forever()
elif kind == "upgrade":
    serve_upgrade(port)
else:
    serve_hostile(port, kind)
`

// startPortServer starts one of portServers in sandbox id and waits until
// the relay reaches it.
func startPortServer(e *env, id, kind string, port int, env map[string]string) {
	e.t.Helper()
	e.must(http.StatusOK, "PUT", "/v1/sandboxes/"+id+"/files?path=/workspace/servers.py", portServers, nil)
	var bg struct{ Pid int }
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+id+"/processes",
		agentapi.ExecRequest{Command: fmt.Sprintf("python3 /workspace/servers.py %s %d", kind, port), Env: env}, &bg)
	waitFor(e.t, 20*time.Second, kind+" server listening", func() bool {
		res := e.sh(id, fmt.Sprintf("python3 -c 'import socket; socket.create_connection((\"%s\", %d), 1)'", map[bool]string{true: "::1", false: "127.0.0.1"}[kind == "echo6"], port))
		return res.ExitCode == 0
	})
}

type echoed struct {
	Method     string            `json:"method"`
	Path       string            `json:"path"`
	Headers    map[string]string `json:"headers"`
	BodyLength int               `json:"bodyLength"`
	Who        string            `json:"who"`
}

// TestPortRelay: a program listening on a port inside a sandbox is reached
// through /v1/sandboxes/{id}/ports/{port}/, with the sandbox's internet off,
// without the caller's key, WebSocket-style upgrades included; bad ports are
// 400, a closed port 502.
func TestPortRelay(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 600}) // default policy: no internet
	base := "/v1/sandboxes/" + sb.ID + "/ports/"
	startPortServer(e, sb.ID, "echo", 8000, map[string]string{"WHO": "A"})

	status, data := e.do("POST", base+"8000/some/path%2Fx?q=1&r=%20", strings.Repeat("x", 300000), "Content-Type", "text/plain", "Cookie", "c=1")
	if status != http.StatusOK {
		t.Fatalf("relay: %d %s", status, data)
	}
	var got echoed
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if got.Method != "POST" || got.Path != "/some/path%2Fx?q=1&r=%20" || got.BodyLength != 300000 || got.Who != "A" {
		t.Errorf("the program saw %+v", got)
	}
	if h := got.Headers; h["Host"] != "localhost:8000" || h["X-Forwarded-Prefix"] != "/v1/sandboxes/"+sb.ID+"/ports/8000" || h["Cookie"] != "c=1" {
		t.Errorf("headers the program saw: %v", h)
	}
	if strings.Contains(string(data), e.key) || got.Headers["Authorization"] != "" {
		t.Errorf("the caller's key reached the sandbox: %s", data)
	}

	// A path-less URL is the program's root; a redirect and a cookie stay
	// under the relay's path.
	status, data = e.do("GET", "/v1/sandboxes/"+sb.ID+"/ports/8000", nil)
	if status != http.StatusOK || !strings.Contains(string(data), `"path": "/"`) && !strings.Contains(string(data), `"path":"/"`) {
		t.Errorf("GET .../ports/8000: %d %s", status, data)
	}
	req, _ := http.NewRequest("GET", e.http.URL+base+"8000/redirect", nil)
	req.Header.Set("Authorization", "Bearer "+e.key)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != 302 || loc != base+"8000/landing" {
		t.Errorf("redirect: %d Location %q", resp.StatusCode, loc)
	}
	if c := resp.Header.Get("Set-Cookie"); c != "sid=1; HttpOnly; Path="+base+"8000/" {
		t.Errorf("Set-Cookie relayed as %q", c)
	}

	// A server on ::1 only is reached too.
	startPortServer(e, sb.ID, "echo6", 8001, nil)
	if status, data := e.do("GET", base+"8001/v6", nil); status != http.StatusOK || !strings.Contains(string(data), "/v6") {
		t.Errorf("::1 server: %d %s", status, data)
	}

	// An upgraded connection (what a WebSocket is) carries bytes both ways.
	startPortServer(e, sb.ID, "upgrade", 8002, nil)
	conn, err := net.Dial("tcp", e.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s8002/ws HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", base, e.key)
	br := bufio.NewReader(conn)
	uresp, err := http.ReadResponse(br, nil)
	if err != nil || uresp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", uresp, err)
	}
	for _, msg := range []string{"ping", strings.Repeat("z", 100000)} {
		if _, err := conn.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(msg))
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(br, buf); err != nil || string(buf) != msg {
			t.Fatalf("echo through the upgraded connection: %q %v", buf[:min(len(buf), 20)], err)
		}
	}

	for _, c := range []struct {
		path, code string
		status     int
	}{
		{"8999/", agentapi.CodePortClosed, http.StatusBadGateway},
		{"0/", "bad_request", http.StatusBadRequest},
		{"65536/", "bad_request", http.StatusBadRequest},
		{"08000/", "bad_request", http.StatusBadRequest},
		{"http/", "bad_request", http.StatusBadRequest},
	} {
		status, data := e.do("GET", base+c.path, nil)
		if status != c.status || errorCode(t, data) != c.code {
			t.Errorf("GET %s: %d %s, want %d %s", c.path, status, data, c.status, c.code)
		}
	}
}

// TestPortRelayRedirectKeepsKey is issue 25's N8b: a program in a sandbox
// answers a redirect to another port of the API's host. Go's client keeps
// Authorization on a redirect to the same host name whatever the port, so
// before, a caller following it sent its key to whatever listened there.
// Now such a Location is dropped (the 302 arrives without one) and nothing
// reaches the other port; a redirect to the program's own address still
// lands under the relay's prefix and is followed there, and one to another
// site passes.
func TestPortRelayRedirectKeepsKey(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 600})
	startPortServer(e, sb.ID, "echo", 8000, nil)
	base := e.http.URL + "/v1/sandboxes/" + sb.ID + "/ports/8000"

	// Another port of the API's host (127.0.0.1), listening as a thief.
	var stolen atomic.Int32
	thief := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), e.key) {
			stolen.Add(1)
		}
		fmt.Fprint(w, "thanks")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go thief.Serve(ln)
	defer thief.Close()
	thiefURL := "http://" + ln.Addr().String() + "/steal"

	follow := func(target string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/goto?"+url.QueryEscape(target), nil)
		req.Header.Set("Authorization", "Bearer "+e.key)
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("GET goto %s: %v", target, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, target := range []string{thiefURL, "http://localhost:" + strings.TrimPrefix(thiefURL, "http://127.0.0.1:")} {
		resp := follow(target)
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "" {
			t.Errorf("redirect to %s: %d Location %q, want 302 without a Location", target, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if n := stolen.Load(); n != 0 {
		t.Fatalf("the caller's key reached another port of the API's host %d times by the relay's redirect", n)
	}

	// Its own address: followed under the prefix, to the echo.
	resp := follow("http://localhost:8000/landed")
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/v1/sandboxes/"+sb.ID+"/ports/8000/landed" {
		t.Errorf("redirect to its own address: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	// Another site: passed as it is (not followed here: the client would go there).
	req, _ := http.NewRequest("GET", base+"/goto?"+url.QueryEscape("https://example.com/x"), nil)
	req.Header.Set("Authorization", "Bearer "+e.key)
	resp, err = http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != "https://example.com/x" {
		t.Errorf("redirect to another site: %d Location %q", resp.StatusCode, loc)
	}
}

// TestPortRelayHostile: what a program inside answers cannot make the
// server hold more than the header cap, and the relay reaches nothing but
// the sandbox's own ports: not another sandbox's, not the host's, not with
// another tenant's key.
func TestPortRelayHostile(t *testing.T) {
	e := newEnv(t)
	a := e.create(api.CreateSandboxRequest{TimeoutSeconds: 600})
	b := e.create(api.CreateSandboxRequest{TimeoutSeconds: 600})
	startPortServer(e, a.ID, "headers", 8100, nil)
	startPortServer(e, a.ID, "garbage", 8101, nil)
	startPortServer(e, b.ID, "echo", 8102, map[string]string{"WHO": "B"})

	grown := heapGrowth(func() {
		for _, port := range []string{"8100", "8101"} {
			start := time.Now()
			status, data := e.do("GET", "/v1/sandboxes/"+a.ID+"/ports/"+port+"/", nil)
			if status != http.StatusBadGateway || errorCode(t, data) != "bad_gateway" {
				t.Errorf("hostile server on %s: %d %s, want 502 bad_gateway", port, status, data)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("hostile server on %s: the answer took %s", port, took)
			}
		}
	})
	if grown > 8<<20 {
		t.Errorf("the server's heap grew by %d MiB relaying hostile answers", grown>>20)
	}
	// The sandbox goes on.
	if res := e.sh(a.ID, "echo ok"); res.Stdout != "ok\n" {
		t.Errorf("after the hostile answers: %+v", res)
	}

	// B's port through B works; through A it is A's own (closed) port.
	if status, data := e.do("GET", "/v1/sandboxes/"+b.ID+"/ports/8102/", nil); status != http.StatusOK || !strings.Contains(string(data), `"B"`) {
		t.Fatalf("B's own port: %d %s", status, data)
	}
	if status, data := e.do("GET", "/v1/sandboxes/"+a.ID+"/ports/8102/", nil); status != http.StatusBadGateway || errorCode(t, data) != agentapi.CodePortClosed {
		t.Errorf("B's port through A: %d %s, want 502 port_closed", status, data)
	}

	// A port the host listens on (on its loopback) is not reached.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	hostPort := ln.Addr().(*net.TCPAddr).Port
	if status, data := e.do("GET", fmt.Sprintf("/v1/sandboxes/%s/ports/%d/", a.ID, hostPort), nil); status != http.StatusBadGateway || errorCode(t, data) != agentapi.CodePortClosed {
		t.Errorf("the host's port %d through A: %d %s, want 502 port_closed", hostPort, status, data)
	}
	// Neither is the server's own API port.
	apiPort := e.http.Listener.Addr().(*net.TCPAddr).Port
	if status, data := e.do("GET", fmt.Sprintf("/v1/sandboxes/%s/ports/%d/v1/health", a.ID, apiPort), nil); status != http.StatusBadGateway {
		t.Errorf("the API's port %d through A: %d %s, want 502", apiPort, status, data)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host's listener accepted %d connections through the relay", n)
	}

	// Another tenant's key: 404, as if the sandbox did not exist; its own
	// sandbox works.
	var tenant api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "tenant", DailyLimitMicros: 5_000_000}, &tenant)
	if o := e.try("GET", "/v1/sandboxes/"+b.ID+"/ports/8102/", nil, "Authorization", "Bearer "+tenant.Secret); o.status != http.StatusNotFound {
		t.Errorf("another tenant's key on B's port: %d %s, want 404", o.status, o.body)
	}
	if o := e.try("GET", "/v1/sandboxes/"+b.ID+"/ports/8102/", nil, "Authorization", "Bearer wr_nosuchkey"); o.status != http.StatusUnauthorized {
		t.Errorf("a wrong key on B's port: %d %s, want 401", o.status, o.body)
	}
}

// TestPortRelayForgedAgent: root inside replaces the agent with a server of
// its own that answers the port relay's handshake with an endless head:
// the server reads at most its cap and answers 502.
func TestPortRelayForgedAgent(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 600})
	fake := `import os, socketserver
class H(socketserver.StreamRequestHandler):
    def handle(self):
        while self.rfile.readline() not in (b"\r\n", b""): pass
        try:
            self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: withruntime-tcp\r\n")
            while True: self.wfile.write(b"X-Flood: " + b"a" * 1000 + b"\r\n")
        except OSError: pass
os.rename("/run/withruntime/agent.sock", "/run/withruntime/real.sock")
socketserver.ThreadingUnixStreamServer("/run/withruntime/agent.sock", H).serve_forever()
`
	e.must(200, "PUT", "/v1/sandboxes/"+sb.ID+"/files?path=/workspace/fake.py", fake, nil)
	e.must(201, "POST", "/v1/sandboxes/"+sb.ID+"/processes", agentapi.ExecRequest{Command: "python3 /workspace/fake.py", User: "root"}, nil)
	waitFor(t, 10*time.Second, "the forged agent", func() bool {
		st, err := os.Stat(filepath.Join(filepath.Dir(e.agentSocket(sb.ID)), "real.sock"))
		return err == nil && st.Mode()&os.ModeSocket != 0
	})
	time.Sleep(300 * time.Millisecond) // the forged agent listens
	grown := heapGrowth(func() {
		for range 3 {
			start := time.Now()
			status, data := e.do("GET", "/v1/sandboxes/"+sb.ID+"/ports/8000/", nil)
			if status != http.StatusBadGateway || errorCode(t, data) != "bad_gateway" || !strings.Contains(string(data), "protocol") {
				t.Errorf("relay through a forged agent: %d %s, want 502 bad_gateway", status, data)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the answer took %s", took)
			}
		}
	})
	if grown > 8<<20 {
		t.Errorf("the server's heap grew by %d MiB while relaying through a forged agent", grown>>20)
	}
}

// heapGrowth runs f and returns how far the process's heap in use rose
// above where it was before, at its highest while f ran (sampled every
// 5 ms; the server runs in this process).
func heapGrowth(f func()) int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := int64(ms.HeapInuse)
	var peak atomic.Int64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if v := int64(m.HeapInuse) - base; v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	f()
	close(done)
	<-sampled
	return peak.Load()
}

// TestPortRelayPause: a pause closes a relayed connection; the next request
// to the port of a paused sandbox with autoResume resumes it, and the
// program answers again; without autoResume it is 409 sandbox_paused.
func TestPortRelayPause(t *testing.T) {
	e := newEnv(t)
	yes := true
	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 600, AutoResume: &yes})
	no := false
	other := e.create(api.CreateSandboxRequest{TimeoutSeconds: 600, AutoResume: &no})
	startPortServer(e, sb.ID, "upgrade", 8200, nil)
	startPortServer(e, sb.ID, "echo", 8201, map[string]string{"WHO": "paused"})
	startPortServer(e, other.ID, "echo", 8202, nil)

	conn, err := net.Dial("tcp", e.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/sandboxes/%s/ports/8200/ HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", sb.ID, e.key)
	br := bufio.NewReader(conn)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+sb.ID+"/pause", nil, nil)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("x")); err == nil {
		if _, err := br.ReadByte(); err == nil {
			t.Errorf("a relayed connection still answered after the pause")
		}
	}

	status, data := e.do("GET", "/v1/sandboxes/"+sb.ID+"/ports/8201/", nil)
	if status != http.StatusOK || !strings.Contains(string(data), `"paused"`) {
		t.Errorf("the port of a paused sandbox with autoResume: %d %s", status, data)
	}
	var got api.Sandbox
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID, nil, &got)
	if got.State != "running" {
		t.Errorf("after the request: state %s, want running", got.State)
	}

	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+other.ID+"/pause", nil, nil)
	if status, data := e.do("GET", "/v1/sandboxes/"+other.ID+"/ports/8202/", nil); status != http.StatusConflict || errorCode(t, data) != "sandbox_paused" {
		t.Errorf("the port of a paused sandbox without autoResume: %d %s, want 409 sandbox_paused", status, data)
	}
}
