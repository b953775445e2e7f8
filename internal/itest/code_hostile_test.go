package itest

// Attacks on the code interpreter from inside the sandbox. Root there can
// replace the kernel with a program of its own that speaks ZeroMQ to the
// agent (it can read the connection file and its key), and the user's own
// code can write raw bytes into the kernel's sockets. The agent is inside
// the sandbox: it keeps working and keeps the user's answers honest; the
// host gets bounded, well-formed answers whatever happens, and another
// sandbox is not affected.

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// fakeKernel is installed by root in place of ipykernel: it binds the
// shell and IOPub sockets the connection file names and speaks ZMTP 3.0 by
// hand, so it can send what no ZeroMQ library would. /opt/fake_mode picks
// the attack.
const fakeKernel = `
import hashlib, hmac, json, os, socket, struct, sys, threading, time, uuid
conn = json.load(open(sys.argv[-1]))
key = conn["key"].encode()
mode = open("/opt/fake_mode").read().strip()

def frame(body, more=False, cmd=False):
    fl = (1 if more else 0) | (4 if cmd else 0)
    if len(body) > 255:
        return bytes([fl | 2]) + struct.pack(">Q", len(body)) + body
    return bytes([fl, len(body)]) + body

def send(c, frames):
    c.sendall(b"".join(frame(f, i < len(frames) - 1) for i, f in enumerate(frames)))

def readn(c, n):
    b = b""
    while len(b) < n:
        x = c.recv(n - len(b))
        if not x:
            raise EOFError
        b += x
    return b

def recv(c):
    out = []
    while True:
        fl = readn(c, 1)[0]
        n = struct.unpack(">Q", readn(c, 8))[0] if fl & 2 else readn(c, 1)[0]
        body = readn(c, n)
        if fl & 4:
            return [body]
        out.append(body)
        if not fl & 1:
            return out

def accept(port, kind):
    path = conn["ip"] + "-" + str(port)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(1)
    c, _ = s.accept()
    c.sendall(b"\xff" + b"\0" * 8 + b"\x7f\x03\x00" + b"NULL".ljust(20, b"\0") + b"\x01" + b"\0" * 31)
    readn(c, 64)
    recv(c)  # READY
    ready = b"\x05READY" + bytes([11]) + b"Socket-Type" + struct.pack(">I", len(kind)) + kind.encode()
    c.sendall(frame(ready, cmd=True))
    return c

def message(msg_type, parent, content, good=True):
    h = json.dumps({"msg_id": uuid.uuid4().hex, "session": "fake", "username": "root", "date": "",
                    "msg_type": msg_type, "version": "5.3"}).encode()
    p, m, c = json.dumps(parent).encode(), b"{}", json.dumps(content).encode()
    sig = hmac.new(key if good else b"not the key", h + p + m + c, hashlib.sha256).hexdigest().encode()
    return [b"<IDS|MSG>", sig, h, p, m, c]

shells = {}
threading.Thread(target=lambda: shells.setdefault("c", accept(conn["shell_port"], "ROUTER")), daemon=True).start()
iopub = accept(conn["iopub_port"], "PUB")
recv(iopub)  # the subscription
while "c" not in shells:
    time.sleep(0.01)
shell = shells["c"]

if mode == "bigframe":
    # A frame that says it is 2^62 bytes long: a reader that believes it
    # allocates (or panics) before reading a byte.
    iopub.sendall(b"\x02" + struct.pack(">Q", 1 << 62) + b"x" * 64)
    time.sleep(30)
    sys.exit(0)

while True:
    req = recv(shell)
    h = json.loads(req[2])
    t = h["msg_type"]
    pub = lambda m: send(iopub, [b"kernel"] + m)
    pub(message("status", h, {"execution_state": "busy"}))
    if t == "execute_request" and mode == "flood":
        for i in range(12):
            pub(message("display_data", h, {"data": {"text/plain": "x" * (8 << 20)}, "metadata": {}}))
    if t == "execute_request" and mode == "forged":
        pub(message("execute_result", h, {"data": {"text/plain": "'forged'"}, "metadata": {}, "execution_count": 7}, good=False))
        pub(message("stream", h, {"name": "stdout", "text": "real\n"}))
    pub(message("status", h, {"execution_state": "idle"}))
    reply = "kernel_info_reply" if t == "kernel_info_request" else "execute_reply"
    send(shell, message(reply, h, {"status": "ok", "execution_count": 1}))
`

// installFakeKernel makes, as root, every new kernel the fake one.
func installFakeKernel(e *env, id string) {
	e.t.Helper()
	e.must(http.StatusOK, "PUT", "/v1/sandboxes/"+id+"/files?path=/opt/fake_kernel.py", fakeKernel, nil)
	r := e.exec(id, agentapi.ExecRequest{User: "root", Command: `cat > /usr/local/bin/python3 <<'EOF'
#!/bin/sh
case "$*" in *ipykernel_launcher*) exec /usr/bin/python3 /opt/fake_kernel.py "$@";; esac
exec /usr/bin/python3 "$@"
EOF
chmod 755 /usr/local/bin/python3`})
	if r.ExitCode != 0 {
		e.t.Fatalf("installing the fake kernel: %+v", r)
	}
}

func setFakeMode(e *env, id, mode string) {
	e.t.Helper()
	e.must(http.StatusOK, "PUT", "/v1/sandboxes/"+id+"/files?path=/opt/fake_mode", mode, nil)
}

func TestCodeHostileKernel(t *testing.T) {
	e := newEnv(t)
	id := e.ciSandbox(api.CreateSandboxRequest{}).ID
	other := e.ciSandbox(api.CreateSandboxRequest{}).ID
	base := "/v1/sandboxes/" + id
	installFakeKernel(e, id)

	// Every answer the host relays stays JSON, whatever the kernel sent.
	post := func(req agentapi.RunCodeRequest) (int, []byte) {
		t.Helper()
		st, body := e.do("POST", base+"/code", req)
		return st, body
	}

	t.Run("a frame of 2^62 bytes", func(t *testing.T) {
		setFakeMode(e, id, "bigframe")
		var c agentapi.Context
		status, body := e.do("POST", base+"/contexts", agentapi.CreateContextRequest{})
		if status != http.StatusInternalServerError || !strings.Contains(string(body), "kernel") {
			t.Fatalf("status %d: %s", status, body)
		}
		_ = c
		if r := e.sh(id, "echo ok"); r.Stdout != "ok\n" {
			t.Fatalf("the agent did not survive: %+v", r)
		}
	})

	t.Run("forged signatures are not results", func(t *testing.T) {
		setFakeMode(e, id, "forged")
		// The default context's kernel runs from the template's warm
		// image; a restart starts the fake one.
		e.must(http.StatusOK, "POST", base+"/contexts/default/restart", nil, nil)
		status, body := post(agentapi.RunCodeRequest{Code: "anything"})
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		if strings.Contains(string(body), "forged") || !strings.Contains(string(body), "real") {
			t.Fatalf("a message signed with another key was taken as the kernel's: %s", body)
		}
	})

	t.Run("a flood of results is capped", func(t *testing.T) {
		setFakeMode(e, id, "flood")
		e.must(http.StatusOK, "POST", base+"/contexts/default/restart", nil, nil)
		status, body := post(agentapi.RunCodeRequest{Code: "anything"})
		if status != 200 || len(body) > agentapi.MaxResultBytes+(1<<20) {
			t.Fatalf("status %d, %d bytes", status, len(body))
		}
		if !strings.Contains(string(body), `"resultsTruncated":true`) {
			t.Fatalf("no resultsTruncated in a %d-byte answer", len(body))
		}
	})

	t.Run("user code writes a forged frame into its own sockets", func(t *testing.T) {
		// The real kernel again; the user's code (not root) attacks.
		e.exec(id, agentapi.ExecRequest{User: "root", Command: "rm /usr/local/bin/python3"})
		e.must(http.StatusOK, "POST", base+"/contexts/default/restart", nil, nil)
		ex := e.code(id, agentapi.RunCodeRequest{Code: "x = 1"})
		if ex.Error != nil {
			t.Fatalf("the real kernel: %+v", ex.Error)
		}
		start := time.Now()
		status, body := post(agentapi.RunCodeRequest{Code: `import os, struct
for fd in map(int, os.listdir('/proc/self/fd')):
    try:
        if os.readlink(f'/proc/self/fd/{fd}').startswith('socket:'):
            os.write(fd, b'\x02' + struct.pack('>Q', 1 << 62))
    except OSError:
        pass
import time; time.sleep(3)`, TimeoutSeconds: 20})
		if status != 200 || time.Since(start) > 15*time.Second {
			t.Fatalf("status %d after %v: %s", status, time.Since(start), body)
		}
		if r := e.sh(id, "echo ok"); r.Stdout != "ok\n" {
			t.Fatalf("the agent did not survive: %+v", r)
		}
		ex = e.code(id, agentapi.RunCodeRequest{Code: "1+1"})
		if got := mainText(t, ex); got != "2" {
			t.Fatalf("the next call: %q %+v", got, ex.Error)
		}
		t.Logf("after the forged frame: restarted=%v notice=%q", ex.Restarted, ex.Notice)
	})

	if got := mainText(t, e.code(other, agentapi.RunCodeRequest{Code: "6*7"})); got != "42" {
		t.Fatalf("another sandbox: %q", got)
	}
}
