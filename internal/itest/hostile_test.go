package itest

// The adversarial suite: root inside a sandbox attacks the host side. Every
// test here runs its attack as root inside a real gVisor sandbox, the way a
// tenant with an API key could, and checks that the server neither follows
// nor relays anything the sandbox planted.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
)

// rootSh runs command as root in sandbox id.
func (e *env) rootSh(id, command string) agentapi.ExecResult {
	e.t.Helper()
	return e.exec(id, agentapi.ExecRequest{Command: command, User: "root"})
}

// agentSocket is the host path of sandbox id's agent socket.
func (e *env) agentSocket(id string) string {
	return filepath.Join(e.dataDir, "gvisor", "sandboxes", id, "sock", "agent.sock")
}

// readMany reads path from sandbox id n times at once (so that new agent
// connections are dialed, not only a kept-alive one) and returns each
// answer as "status body".
func (e *env) readMany(id, path string, n int) []string {
	var wg sync.WaitGroup
	out := make([]string, n)
	for i := range n {
		wg.Go(func() {
			status, data := e.do("GET", "/v1/sandboxes/"+id+"/files?path="+path, nil)
			out[i] = fmt.Sprintf("%d %s", status, strings.TrimSpace(string(data)))
		})
	}
	wg.Wait()
	return out
}

// plant replaces sandbox id's agent socket, from inside as root, with what
// command makes at /run/withruntime/agent.sock.
func (e *env) plant(id, command string) {
	e.t.Helper()
	res := e.rootSh(id, "cd /run/withruntime && rm -f agent.sock && "+command+" && ls -la /run/withruntime")
	if res.ExitCode != 0 {
		e.t.Fatalf("planting %q: exit %d: %s %s", command, res.ExitCode, res.Stdout, res.Stderr)
	}
}

// TestHostileSocketToOtherSandbox: root in A points A's agent socket at B's.
// Before the fix, new connections for A went to B: reads through A's file
// API returned B's file and an upload to A landed in B (billed to A).
func TestHostileSocketToOtherSandbox(t *testing.T) {
	e := newEnv(t)
	a, b := e.create(api.CreateSandboxRequest{}), e.create(api.CreateSandboxRequest{})
	e.must(200, "PUT", "/v1/sandboxes/"+a.ID+"/files?path=/workspace/who", "sandbox-A", nil)
	e.must(200, "PUT", "/v1/sandboxes/"+b.ID+"/files?path=/workspace/who", "sandbox-B", nil)

	e.plant(a.ID, "ln -s "+e.agentSocket(b.ID)+" agent.sock")

	refused := 0
	for _, got := range e.readMany(a.ID, "/workspace/who", 6) {
		if strings.Contains(got, "sandbox-B") {
			t.Fatalf("a read through sandbox A's file API returned sandbox B's file: %s", got)
		}
		if strings.HasPrefix(got, "502 ") && strings.Contains(got, "agent_channel_refused") {
			refused++
		} else if got != "200 sandbox-A" {
			t.Errorf("read of A: %s; want A's own file or a 502 agent_channel_refused", got)
		}
	}
	if refused == 0 {
		t.Errorf("no read dialed a new connection to A's agent; the test did not test anything")
	}
	for range 3 {
		status, data := e.do("PUT", "/v1/sandboxes/"+a.ID+"/files?path=/workspace/planted", "from-A")
		if status == 200 {
			t.Logf("upload to A went to A's own agent over a kept-alive connection: %s", data)
		}
	}
	if res := e.sh(b.ID, "cat /workspace/who; test -e /workspace/planted && echo LEAKED; true"); res.Stdout != "sandbox-B" {
		t.Fatalf("sandbox B after the attack: %q %q", res.Stdout, res.Stderr)
	}
}

// TestHostileSocketToHostSocket: root in a sandbox points its agent socket at
// a unix socket of the host. The root-owned server must never connect to it.
func TestHostileSocketToHostSocket(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	hostSock := filepath.Join(dir, "host.sock")
	l, err := net.Listen("unix", hostSock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\nhost-secret\n")
			c.Close()
		}
	}()
	sb := e.create(api.CreateSandboxRequest{})
	e.plant(sb.ID, "ln -s "+hostSock+" agent.sock")
	for _, got := range e.readMany(sb.ID, "/etc/hostname", 6) {
		if strings.Contains(got, "host-secret") {
			t.Fatalf("the server relayed a host socket's answer: %s", got)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the server connected to a host socket %d times through a planted link", n)
	}
}

// TestHostileSocketReplaced: whatever root puts at the socket's place (a
// file, a directory, a FIFO, a hard link to its own socket under another
// name is fine), the server answers at once with a clear error and stays up.
func TestHostileSocketReplaced(t *testing.T) {
	e := newEnv(t)
	for _, plant := range []string{
		"echo x > agent.sock",
		"mkdir agent.sock",
		"mkfifo agent.sock",
		"ln -s /run/withruntime agent.sock",
		"ln -s ../../../../../../run/systemd/private agent.sock",
	} {
		t.Run(plant, func(t *testing.T) {
			sb := e.create(api.CreateSandboxRequest{})
			e.plant(sb.ID, plant)
			for _, got := range e.readMany(sb.ID, "/etc/hostname", 4) {
				if !strings.HasPrefix(got, "200 ") && !strings.HasPrefix(got, "502 ") {
					t.Errorf("read after %q: %s", plant, got)
				}
			}
			// The server still serves everyone else.
			other := e.create(api.CreateSandboxRequest{})
			if res := e.sh(other.ID, "echo ok"); res.Stdout != "ok\n" {
				t.Fatalf("another sandbox after the attack: %+v", res)
			}
			e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
			e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+other.ID, nil, nil)
		})
	}
}

// TestHostileFillMounts: root writes as much as it can into every mount it
// sees. Each write stops at its mount's cap (the disk for the root, /tmp's
// size, a few KiB for the agent's socket directory, nothing for read-only
// ones), and the host's data directory does not grow past the disk cap.
// Before the fix, the socket directory was a plain host directory: root
// wrote 300 MiB into the data directory past a 64 MiB disk limit.
func TestHostileFillMounts(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{DiskMiB: 64, MemoryMiB: 512})
	var before unix.Statfs_t
	if err := unix.Statfs(e.dataDir, &before); err != nil {
		t.Fatal(err)
	}
	// For every mount point: write up to 400 MiB, then print how much got in.
	script := `awk '{print $2}' /proc/self/mounts | sort -u | while read -r mp; do
  case "$mp" in /proc*|/sys*|/dev*) continue;; esac
  f="$mp/.fill-$$"
  head -c 400M /dev/zero > "$f" 2>/dev/null
  n=$(stat -c %s "$f" 2>/dev/null || echo 0)
  echo "$mp $n"
done`
	res := e.rootSh(sb.ID, script)
	if res.ExitCode != 0 {
		t.Fatalf("fill: %+v", res)
	}
	var after unix.Statfs_t
	if err := unix.Statfs(e.dataDir, &after); err != nil {
		t.Fatal(err)
	}
	caps := map[string]int64{
		"/":                64 << 20,
		"/tmp":             256 << 20,
		"/run/withruntime": 64 << 10,
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		var mp string
		var n int64
		if _, err := fmt.Sscan(line, &mp, &n); err != nil {
			t.Fatalf("fill output %q: %v", line, err)
		}
		seen[mp] = true
		limit, ok := caps[mp]
		if !ok {
			limit = 0 // every other mount is read-only
		}
		if n > limit {
			t.Errorf("root wrote %d bytes into %s (cap %d)", n, mp, limit)
		}
	}
	if !seen["/run/withruntime"] || !seen["/"] {
		t.Fatalf("the fill did not reach the socket directory or the root: %q", res.Stdout)
	}
	t.Logf("written per mount:\n%s", res.Stdout)
	grew := (int64(before.Bavail) - int64(after.Bavail)) * before.Bsize
	t.Logf("the data directory's filesystem lost %d MiB", grew>>20)
	// 64 MiB of disk, and room for what other processes on a shared host
	// write meanwhile (before the fix: 400 MiB into the socket directory).
	if grew > 320<<20 {
		t.Errorf("the host's disk lost %d MiB to a sandbox with a 64 MiB disk", grew>>20)
	}
	var sock unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(e.agentSocket(sb.ID)), &sock); err != nil {
		t.Fatal(err)
	}
	if used := int64(sock.Blocks-sock.Bfree) * sock.Bsize; used > 64<<10 {
		t.Errorf("the socket directory on the host holds %d bytes", used)
	}
	if res := e.sh(sb.ID, "echo ok"); res.Stdout != "ok\n" {
		t.Fatalf("the sandbox after the fill: %+v", res)
	}
}

// TestHostileMountOverSocketDir: root tries to mount over or move the socket
// directory. Mounts inside gVisor change only the sandbox's own view (and the
// agent's commands have no CAP_SYS_ADMIN): the host keeps reaching the agent.
func TestHostileMountOverSocketDir(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	res := e.rootSh(sb.ID, `mount -t tmpfs none /run/withruntime; echo "tmpfs:$?"
mount --bind /tmp /run/withruntime; echo "bind:$?"
mv /run/withruntime /run/moved; echo "mv:$?"
true`)
	t.Logf("attempts: %s %s", res.Stdout, res.Stderr)
	for _, got := range e.readMany(sb.ID, "/etc/hostname", 4) {
		if !strings.HasPrefix(got, "200 ") {
			t.Errorf("read after mounting over the socket directory: %s", got)
		}
	}
}

// TestHostileConsoleFlood: the agent's stdout and stderr were runsc's
// console.log, a host file in the data directory with no cap, which root
// inside reached through /proc/1/fd/1. Nothing inside may write there.
func TestHostileConsoleFlood(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	res := e.rootSh(sb.ID, `for fd in 0 1 2; do head -c 50M /dev/zero > /proc/1/fd/$fd 2>/dev/null; done
for f in /proc/1/fd/*; do readlink "$f"; done | sort -u; true`)
	t.Logf("PID 1's files: %s", res.Stdout)
	st, err := os.Stat(filepath.Join(e.dataDir, "gvisor", "sandboxes", sb.ID, "console.log"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 1<<20 {
		t.Fatalf("root inside wrote %d bytes into the host's console.log", st.Size())
	}
	if res := e.sh(sb.ID, "echo ok"); res.Stdout != "ok\n" {
		t.Fatalf("the sandbox after the flood: %+v", res)
	}
}

// TestHostileForgedAgent: root replaces the agent with a server of its own
// that answers with cookies, a redirect and an HTML page. The answer reaches
// only this sandbox's caller, and without anything a browser would act on.
func TestHostileForgedAgent(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	fake := `import os, socketserver
class H(socketserver.StreamRequestHandler):
    def handle(self):
        while self.rfile.readline() not in (b"\r\n", b""): pass
        body = b"<script>alert(document.cookie)</script>"
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nSet-Cookie: session=evil; Path=/\r\n"
            b"Location: http://evil.example/\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
os.rename("/run/withruntime/agent.sock", "/run/withruntime/real.sock")
socketserver.UnixStreamServer("/run/withruntime/agent.sock", H).serve_forever()
`
	e.must(200, "PUT", "/v1/sandboxes/"+sb.ID+"/files?path=/workspace/fake.py", fake, nil)
	e.must(201, "POST", "/v1/sandboxes/"+sb.ID+"/processes", agentapi.ExecRequest{Command: "python3 /workspace/fake.py", User: "root"}, nil)
	waitFor(t, 10*time.Second, "the forged agent", func() bool {
		st, err := os.Stat(filepath.Join(filepath.Dir(e.agentSocket(sb.ID)), "real.sock"))
		return err == nil && st.Mode()&os.ModeSocket != 0
	})
	time.Sleep(200 * time.Millisecond) // the forged agent listens
	var forged atomic.Int32
	var wg sync.WaitGroup
	for range 6 { // at once, so that new connections are dialed
		wg.Go(func() {
			req, _ := http.NewRequest("GET", e.http.URL+"/v1/sandboxes/"+sb.ID+"/files?path=/etc/hostname", nil)
			req.Header.Set("Authorization", "Bearer "+e.key)
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("Location") != "" {
				t.Errorf("a forged agent's headers reached the client: %v", resp.Header)
			}
			ct := resp.Header.Get("Content-Type")
			if strings.Contains(ct, "html") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("a forged agent's answer may render in a browser: %v", resp.Header)
			}
			if resp.StatusCode == 200 && resp.ContentLength == 39 {
				forged.Add(1)
			}
		})
	}
	wg.Wait()
	if forged.Load() == 0 {
		t.Fatalf("no request reached the forged agent; the test tested nothing")
	}
}

// TestHostileSocketAfterRestart: a sandbox adopted by a restarted server is
// dialed with the same checks as one it created.
func TestHostileSocketAfterRestart(t *testing.T) {
	dataDir, err := os.MkdirTemp("/tmp", "wr-hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	a := newEnv(t, withDataDir(dataDir))
	victim := a.create(api.CreateSandboxRequest{})
	a.must(200, "PUT", "/v1/sandboxes/"+victim.ID+"/files?path=/workspace/who", "victim", nil)
	attacker := a.create(api.CreateSandboxRequest{})
	a.detach()

	b := newEnv(t, withDataDir(dataDir))
	b.plant(attacker.ID, "ln -s "+b.agentSocket(victim.ID)+" agent.sock")
	for _, got := range b.readMany(attacker.ID, "/workspace/who", 6) {
		if strings.Contains(got, "victim") {
			t.Fatalf("after a restart, a read through the attacker's sandbox returned the victim's file: %s", got)
		}
	}
	if res := b.sh(victim.ID, "cat /workspace/who"); res.Stdout != "victim" {
		t.Fatalf("the victim after the attack: %+v", res)
	}
}

// TestHostileNoFilesAtLeaseEnd: a client can take every file descriptor of
// the server (idle keep-alive connections or waits on a process, which cost
// nothing; each wait holds two), and if it does when a lease ends the
// destroy fails. The sandbox must still end soon after, instead of running
// on past its lease, unbilled, with a record that says it stopped. (The test
// lowers the process's file limit instead of opening 20,000 connections.)
func TestHostileNoFilesAtLeaseEnd(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 3})
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
			t.Fatal(err)
		}
	}
	defer restore()
	time.Sleep(time.Until(sb.LeaseEndsAt.Add(-time.Second)))
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: uint64(len(fds)), Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(sb.LeaseEndsAt.Add(3 * time.Second)))
	restore()
	var got api.Sandbox
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID, nil, &got)
	if got.State != "stopped" || got.EndReason != "lease_ended" {
		t.Fatalf("after its lease: %s (%s), want stopped (lease_ended)", got.State, got.EndReason)
	}
	waitFor(t, 40*time.Second, "the sandbox destroyed after a failed destroy at its lease end", func() bool {
		return len(e.leftovers(sb.ID)) == 0
	})
}

// TestHostileForgedAgentSeesOnlyProtocol: a forged agent gets nothing of
// the caller's but what the agent protocol needs (no cookie, no header a
// front proxy added), and its informational answers (103 Early Hints, which
// net/http's reverse proxy relays with all their headers) never reach the
// caller.
func TestHostileForgedAgentSeesOnlyProtocol(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	fake := `import os, socketserver
class H(socketserver.StreamRequestHandler):
    def handle(self):
        head = b""
        while True:
            line = self.rfile.readline()
            head += line
            if line in (b"\r\n", b""): break
        with open("/run/withruntime/seen", "ab") as f: f.write(head)
        self.wfile.write(b"HTTP/1.1 103 Early Hints\r\nSet-Cookie: session=evil; Path=/\r\nLink: <http://evil.example/x.js>; rel=preload\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
os.rename("/run/withruntime/agent.sock", "/run/withruntime/real.sock")
socketserver.UnixStreamServer("/run/withruntime/agent.sock", H).serve_forever()
`
	e.must(200, "PUT", "/v1/sandboxes/"+sb.ID+"/files?path=/workspace/fake.py", fake, nil)
	e.must(201, "POST", "/v1/sandboxes/"+sb.ID+"/processes", agentapi.ExecRequest{Command: "python3 /workspace/fake.py", User: "root"}, nil)
	sockDir := filepath.Dir(e.agentSocket(sb.ID))
	waitFor(t, 10*time.Second, "the forged agent", func() bool {
		st, err := os.Stat(filepath.Join(sockDir, "real.sock"))
		return err == nil && st.Mode()&os.ModeSocket != 0
	})
	time.Sleep(200 * time.Millisecond) // the forged agent listens
	var reached atomic.Int32
	var wg sync.WaitGroup
	for range 6 { // at once, so that new agent connections are dialed
		wg.Go(func() {
			c, err := net.Dial("tcp", strings.TrimPrefix(e.http.URL, "http://"))
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "GET /v1/sandboxes/%s/files?path=/etc/hostname HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
				"Cookie: caller-cookie=c00kie\r\nX-Forwarded-For: 198.51.100.7\r\nX-Auth-User: alice\r\nConnection: close\r\n\r\n", sb.ID, e.key)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode < 200 || resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("Link") != "" {
				t.Errorf("the forged agent's informational answer reached the caller: %d %v", resp.StatusCode, resp.Header)
			}
			if resp.ContentLength == 2 || resp.StatusCode < 200 {
				reached.Add(1)
			}
		})
	}
	wg.Wait()
	if reached.Load() == 0 {
		t.Fatalf("no request reached the forged agent; the test tested nothing")
	}
	seen, err := os.ReadFile(filepath.Join(sockDir, "seen"))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"c00kie", "198.51.100.7", "alice", e.key} {
		if strings.Contains(string(seen), leak) {
			t.Errorf("the sandbox saw the caller's %q:\n%s", leak, seen)
		}
	}
}

// TestHostileProxyFlood: every connection a sandbox opens to its egress
// proxy is a file descriptor of the server, held while the proxy waits for
// the request (5 s), and a sandbox holds about 1,200 that way. A tenant's
// few sandboxes must not take them all (its destroys would then fail):
// the proxies of all sandboxes share a cap, past which new connections are
// reset, and the slots come back when the connections end.
func TestHostileProxyFlood(t *testing.T) {
	e := newEnv(t, func(c *server.Config) { c.Egress.MaxProxyConns = 64 })
	internet := &api.NetworkPolicy{Internet: true}
	flood := e.create(api.CreateSandboxRequest{Network: internet})
	other := e.create(api.CreateSandboxRequest{Network: internet})
	// A refused request gets the proxy's 403: an answer, not a reset.
	probe := `python3 -c '
import socket
s = socket.create_connection(("203.0.113.9", 80), timeout=5)
s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
try: print(s.recv(12).decode() or "reset")
except OSError: print("reset")'`
	if out := e.sh(other.ID, probe).Stdout; !strings.HasPrefix(out, "HTTP/1.1 403") {
		t.Fatalf("before the flood the proxy answered %q, want its 403", out)
	}
	e.must(201, "POST", "/v1/sandboxes/"+flood.ID+"/processes", agentapi.ExecRequest{Command: `python3 -c '
import socket, time
held = []
for _ in range(200):
    try: held.append(socket.create_connection(("203.0.113.9", 443), timeout=5))
    except OSError: pass
open("/tmp/held", "w").write(str(len(held)))
time.sleep(6)'`}, nil)
	waitFor(t, 10*time.Second, "the flood", func() bool { return e.sh(flood.ID, "cat /tmp/held").ExitCode == 0 })
	if out := e.sh(other.ID, probe).Stdout; strings.HasPrefix(out, "HTTP/1.1") {
		t.Fatalf("while another sandbox held the proxies' shared cap, a new connection was served: %q", out)
	}
	waitFor(t, 20*time.Second, "the proxy to serve again once the flood ended", func() bool {
		return strings.HasPrefix(e.sh(other.ID, probe).Stdout, "HTTP/1.1 403")
	})
}

// TestHostileDNSTCPFlood: each DNS-over-TCP connection a sandbox opens is a
// file descriptor of the server until it idles out; one sandbox opening
// them in a loop held 4,500. Only a few are served at once per sandbox;
// the rest wait in the kernel's listen queue, which costs the server none.
func TestHostileDNSTCPFlood(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{Network: &api.NetworkPolicy{Internet: true}})
	fds := func() int {
		ents, _ := os.ReadDir("/proc/self/fd")
		return len(ents)
	}
	before := fds()
	e.must(201, "POST", "/v1/sandboxes/"+sb.ID+"/processes", agentapi.ExecRequest{Command: `python3 -c '
import socket, time
gw = open("/etc/resolv.conf").read().split()[1]
held = []
for _ in range(1500):
    try: held.append(socket.create_connection((gw, 53), timeout=3))
    except OSError: pass
open("/tmp/held", "w").write(str(len(held)))
time.sleep(6)'`}, nil)
	most := 0
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && e.sh(sb.ID, "cat /tmp/held").ExitCode != 0 {
		most = max(most, fds())
		time.Sleep(100 * time.Millisecond)
	}
	most = max(most, fds())
	held := strings.TrimSpace(e.sh(sb.ID, "cat /tmp/held").Stdout)
	if held == "" || held == "0" {
		t.Fatalf("the flood opened no connection (%q); the test tested nothing", held)
	}
	if most-before > 300 {
		t.Fatalf("a sandbox's %s DNS connections took %d file descriptors of the server", held, most-before)
	}
}

// TestHostileBigBodiesAtOnce: exec bodies (stdin up to 64 MiB) are read
// whole by the server before they are checked. Twenty 60 MiB execs at once
// took 3.7 GiB of the server; a hundred and thirty would end it for every
// tenant. One key's requests hold at most 512 MiB of the server's memory at
// once, each body byte counted three times (two such bodies): the third of
// eight sent together is refused with 503 (the sandbox here is
// stopped, so the admitted ones answer 410 once read).
func TestHostileBigBodiesAtOnce(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	e.must(204, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
	const clients, most = 8, 59 << 20
	head := []byte(`{"command": "true", "stdin": "`)
	chunk := []byte(strings.Repeat("a", 1<<20))
	var ready sync.WaitGroup
	ready.Add(clients)
	barrier := make(chan struct{})
	statuses := make([]int, clients)
	var wg sync.WaitGroup
	for i := range clients {
		pr, pw := io.Pipe()
		wg.Go(func() {
			defer pw.Close()
			wrote := false
			defer func() {
				if !wrote {
					ready.Done()
				}
			}()
			if _, err := pw.Write(head); err != nil {
				return
			}
			for n := 0; n < most; n += len(chunk) {
				if _, err := pw.Write(chunk); err != nil {
					return
				}
			}
			wrote = true
			ready.Done()
			<-barrier
			_, _ = pw.Write([]byte(`"}`))
		})
		wg.Go(func() {
			req, _ := http.NewRequest("POST", e.http.URL+"/v1/sandboxes/"+sb.ID+"/exec", pr)
			req.Header.Set("Authorization", "Bearer "+e.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses[i] = -1 // the server stopped reading: refused
				pr.CloseWithError(err)
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
			pr.CloseWithError(io.ErrClosedPipe)
		})
	}
	ready.Wait()
	close(barrier)
	wg.Wait()
	admitted, refused := 0, 0
	for _, s := range statuses {
		switch s {
		case http.StatusGone:
			admitted++
		case http.StatusServiceUnavailable, -1:
			refused++
		default:
			t.Errorf("status %d", s)
		}
	}
	if admitted > 2 || refused < clients-2 {
		t.Fatalf("%d bodies of %d MiB were held at once by one key (%v); want at most 2", admitted, most>>20, statuses)
	}
	// The bytes were given back: the key can send a body again.
	if status, body := e.do("POST", "/v1/sandboxes/"+sb.ID+"/exec", `{"command": "true", "stdin": "`+strings.Repeat("a", 60<<20)+`"}`); status != http.StatusGone {
		t.Fatalf("after the burst: %d %s", status, body)
	}
}
