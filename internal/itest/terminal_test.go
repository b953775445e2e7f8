package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/sdk/go/wire"
)

// termClient is one WebSocket client of a terminal, reading in the
// background (unless started paused) into out and evs.
type termClient struct {
	t   *testing.T
	ws  *websocket.Conn
	ctx context.Context

	mu     sync.Mutex
	out    bytes.Buffer
	evs    []wire.TerminalEvent
	closed error // why reading ended
	done   chan struct{}
}

// dialTerminal connects to pid's terminal in sandbox id with key.
func (e *env) dialTerminal(id string, pid int, key string) (*websocket.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	url := strings.Replace(e.http.URL, "http://", "ws://", 1) + fmt.Sprintf("/v1/sandboxes/%s/processes/%d/terminal", id, pid)
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if ws != nil {
		ws.SetReadLimit(1 << 20)
	}
	return ws, resp, err
}

// attach connects with the local key and starts reading.
func (e *env) attach(id string, pid int) *termClient {
	e.t.Helper()
	ws, _, err := e.dialTerminal(id, pid, e.key)
	if err != nil {
		e.t.Fatalf("terminal of %s/%d: %v", id, pid, err)
	}
	c := &termClient{t: e.t, ws: ws, ctx: context.Background(), done: make(chan struct{})}
	e.t.Cleanup(func() { ws.CloseNow() })
	go c.read()
	return c
}

func (c *termClient) read() {
	defer close(c.done)
	for {
		typ, data, err := c.ws.Read(c.ctx)
		c.mu.Lock()
		if err != nil {
			c.closed = err
			c.mu.Unlock()
			return
		}
		if typ == websocket.MessageBinary {
			c.out.Write(data)
		} else {
			var ev wire.TerminalEvent
			if err := json.Unmarshal(data, &ev); err != nil {
				c.closed = fmt.Errorf("bad event %q: %v", data, err)
				c.mu.Unlock()
				return
			}
			c.evs = append(c.evs, ev)
		}
		c.mu.Unlock()
	}
}

func (c *termClient) send(s string) {
	c.t.Helper()
	if err := c.ws.Write(c.ctx, websocket.MessageBinary, []byte(s)); err != nil {
		c.t.Fatalf("input %q: %v", s, err)
	}
}

func (c *termClient) control(ctl wire.TerminalControl) {
	c.t.Helper()
	data, _ := json.Marshal(ctl)
	if err := c.ws.Write(c.ctx, websocket.MessageText, data); err != nil {
		c.t.Fatalf("control %+v: %v", ctl, err)
	}
}

// output is what was read so far.
func (c *termClient) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// waitOutput waits until the output after mark (a length of output()) holds
// want, and returns the output's new length.
func (c *termClient) waitOutput(mark int, want string, d time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		out := c.output()
		if i := strings.Index(out[min(mark, len(out)):], want); i >= 0 {
			return mark + i + len(want)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("terminal output never showed %q; after the mark: %q", want, out[min(mark, len(out)):])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exit waits for the end of the stream and returns the exit event and the
// close status.
func (c *termClient) exit(d time.Duration) (wire.TerminalEvent, websocket.StatusCode) {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(d):
		c.t.Fatalf("the terminal did not end within %s; output %q", d, tail(c.output(), 500))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var exit wire.TerminalEvent
	for _, ev := range c.evs {
		if ev.Type == wire.EventExit {
			exit = ev
		}
	}
	return exit, websocket.CloseStatus(c.closed)
}

// startTerminal starts a background process on a terminal of size.
func (e *env) startTerminal(id string, req agentapi.ExecRequest, size wire.PtySize) agentapi.Process {
	e.t.Helper()
	req.Pty = &size
	var p agentapi.Process
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+id+"/processes", req, &p)
	return p
}

// shell is an interactive bash without startup files, prompt "$ ".
var shell = agentapi.ExecRequest{Argv: []string{"bash", "--norc", "--noprofile", "-i"}, Env: map[string]string{"PS1": "$ "}}

func TestTerminal(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	p := e.startTerminal(sb.ID, shell, wire.PtySize{Cols: 100, Rows: 30})
	c := e.attach(sb.ID, p.Pid)
	m := c.waitOutput(0, "$ ", 20*time.Second)

	c.send("stty size; tty; echo term=$TERM; echo sid=$(ps -o sid= -p $$) pid=$$\r")
	m = c.waitOutput(m, "30 100", 10*time.Second)
	m = c.waitOutput(m, "/dev/pts/", 10*time.Second)
	m = c.waitOutput(m, "term=xterm-256color", 10*time.Second)
	out := c.output()[m:]
	m = c.waitOutput(m, "pid=", 10*time.Second)
	var sid, pid int
	if _, err := fmt.Sscanf(strings.TrimSpace(c.output()[strings.LastIndex(c.output(), "sid="):]), "sid=%d pid=%d", &sid, &pid); err != nil || sid != pid || pid != p.Pid {
		t.Errorf("the shell leads its session: sid %d pid %d (process %d): %v, %q", sid, pid, p.Pid, err, out)
	}

	// A resize shows in stty, and in the process's record.
	c.control(wire.TerminalControl{Type: wire.ControlResize, Cols: 132, Rows: 50})
	waitFor(t, 10*time.Second, "the new size", func() bool {
		var got agentapi.Process
		e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/sandboxes/%s/processes/%d", sb.ID, p.Pid), nil, &got)
		return got.Pty != nil && *got.Pty == wire.PtySize{Cols: 132, Rows: 50}
	})
	c.send("stty size\r")
	m = c.waitOutput(m, "50 132", 10*time.Second)

	// Ctrl-C (the byte 0x03) interrupts a running sleep; the prompt comes back.
	c.send("sleep 100\r")
	m = c.waitOutput(m, "sleep 100", 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	c.send("\x03")
	c.send("echo rc=$?\r")
	m = c.waitOutput(m, "rc=130", 10*time.Second)
	t.Logf("Ctrl-C to the prompt back: %s", time.Since(start).Round(time.Millisecond))

	// A bad control message is answered with an error event; the stream goes on.
	if err := c.ws.Write(c.ctx, websocket.MessageText, []byte(`{"type":"resize","cols":0,"rows":5}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "an error event", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.evs) > 0 && c.evs[len(c.evs)-1].Type == wire.EventError
	})

	// Another key's client: 404, as for every route of another key's sandbox.
	var tenant api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "tenant", DailyLimitMicros: 5_000_000}, &tenant)
	if ws, resp, err := e.dialTerminal(sb.ID, p.Pid, tenant.Secret); err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		if ws != nil {
			ws.CloseNow()
		}
		t.Errorf("another key's terminal: %v %v, want 404", resp, err)
	}
	// No key: 401. No such process: 404.
	if _, resp, _ := e.dialTerminal(sb.ID, p.Pid, "wr_notakey"); resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("bad key: %v, want 401", resp)
	}
	if _, resp, _ := e.dialTerminal(sb.ID, 99999, e.key); resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("no such process: %v, want 404", resp)
	}

	// A second client: the replay, then live output, both clients alike.
	c2 := e.attach(sb.ID, p.Pid)
	c2.waitOutput(0, "rc=130", 10*time.Second)
	m2 := len(c2.output())
	c2.send("echo from-second\r")
	m = c.waitOutput(m, "from-second", 10*time.Second)
	c2.waitOutput(m2, "from-second", 10*time.Second)

	// A client that goes away leaves the program running.
	c2.ws.Close(websocket.StatusNormalClosure, "")
	c.send("echo still-here\r")
	m = c.waitOutput(m, "still-here", 10*time.Second)

	// exit 3 ends the terminal with 3, for every client.
	c.send("exit 3\r")
	ev, status := c.exit(20 * time.Second)
	if ev.ExitCode == nil || *ev.ExitCode != 3 || status != websocket.StatusNormalClosure {
		t.Fatalf("exit %+v, close status %v", ev, status)
	}
	// A client of a process that ended gets the replay and the exit.
	c3 := e.attach(sb.ID, p.Pid)
	ev, _ = c3.exit(20 * time.Second)
	if ev.ExitCode == nil || *ev.ExitCode != 3 || !strings.Contains(c3.output(), "still-here") {
		t.Fatalf("late client: %+v %q", ev, tail(c3.output(), 200))
	}
}

// heapInUse is the test process's (the server's) heap after a GC.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// A client that never reads does not hold up the program: 8 MB (8 replay
// rings) go to the terminal, the program ends, and the server and the agent
// stay small. The client is then told how much it missed, and gets the exit.
// The server closes a client that reads nothing for terminalPing +
// terminalPongWait (50 s; its pong never comes), so the stall here must end
// well inside that: 50 MB once took 56 s on a CI host (gVisor's terminal
// carries about 1 MB/s) and the client was rightly closed before it read.
func TestTerminalSlowViewer(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	before := heapInUse()
	p := e.startTerminal(sb.ID, agentapi.ExecRequest{Command: `read -r go; head -c 6000000 /dev/urandom | base64; echo END`}, wire.PtySize{Cols: 80, Rows: 24})
	ws, _, err := e.dialTerminal(sb.ID, p.Pid, e.key)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ctx := context.Background()
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("go\r")); err != nil {
		t.Fatal(err)
	}
	// Not reading: the wait still ends, with all 8 MB counted.
	start := time.Now()
	var res agentapi.ExecResult
	e.must(http.StatusOK, "POST", fmt.Sprintf("/v1/sandboxes/%s/processes/%d/wait?timeoutSeconds=300", sb.ID, p.Pid), nil, &res)
	t.Logf("8 MB to a terminal whose client does not read: the program ended after %s", time.Since(start).Round(time.Millisecond))
	if res.ExitCode != 0 || res.StdoutBytes < 8_000_000 || !strings.Contains(res.Stdout, "END") {
		t.Fatalf("wait: exit %d, %d bytes, tail %q", res.ExitCode, res.StdoutBytes, tail(res.Stdout, 100))
	}
	grown := int64(heapInUse()) - int64(before)
	t.Logf("server heap grew %d KiB", grown>>10)
	if grown > 64<<20 {
		t.Errorf("the server's heap grew %d MiB while a client did not read", grown>>20)
	}
	rss := e.sh(sb.ID, `awk '/VmRSS/ {print $2}' /proc/1/status`)
	var kib int
	fmt.Sscan(rss.Stdout, &kib)
	t.Logf("agent RSS %d KiB", kib)
	if kib == 0 || kib > 100<<10 {
		t.Errorf("agent RSS %d KiB", kib)
	}
	// Now it reads: what it missed is counted, and the exit comes.
	ws.SetReadLimit(1 << 20)
	var dropped int64
	var got int
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("reading after the end: %v (dropped %d, got %d)", err, dropped, got)
		}
		if typ == websocket.MessageBinary {
			got += len(data)
			continue
		}
		var ev wire.TerminalEvent
		_ = json.Unmarshal(data, &ev)
		if ev.Type == wire.EventDropped {
			dropped = ev.Dropped
		}
		if ev.Type == wire.EventExit {
			break
		}
	}
	t.Logf("the slow client got %d bytes and was told it missed %d", got, dropped)
	if dropped < 2_000_000 || int64(got)+dropped < 8_000_000 {
		t.Errorf("dropped %d, got %d", dropped, got)
	}
}

// A client that reads, but slowly (one frame every 100 ms, far below what
// the program writes), while 50 MB go to the terminal: the program finishes
// at its own pace, the server's heap and the agent's memory stay bounded, and
// the client is told how much it missed before it gets the exit. Unlike the
// test above, the client keeps reading, so it answers the server's pings and
// stays connected however long the 50 MB take.
func TestTerminalSlowReader50MB(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 600})
	before := heapInUse()
	p := e.startTerminal(sb.ID, agentapi.ExecRequest{Command: `read -r go; head -c 37500000 /dev/urandom | base64 -w 0; echo; echo END`}, wire.PtySize{Cols: 80, Rows: 24})
	ws, _, err := e.dialTerminal(sb.ID, p.Pid, e.key)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("go\r")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var got, frames int
	var dropped int64
	var exit *wire.TerminalEvent
	var peakHeap uint64
	// agentRSS is the agent's resident memory in KiB (gVisor's /proc has no
	// VmHWM, so it is sampled while the output flows).
	peakRSS := 0
	agentRSS := func() int {
		var kib int
		fmt.Sscan(e.sh(sb.ID, `awk '/VmRSS/ {print $2}' /proc/1/status`).Stdout, &kib)
		return kib
	}
	for exit == nil {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("after %s, %d bytes in %d frames (told of %d dropped): %v", time.Since(start).Round(time.Second), got, frames, dropped, err)
		}
		if typ == websocket.MessageBinary {
			got += len(data)
			frames++
			if frames%50 == 0 {
				peakHeap = max(peakHeap, heapInUse())
				peakRSS = max(peakRSS, agentRSS())
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var ev wire.TerminalEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("control message %q: %v", data, err)
		}
		switch ev.Type {
		case wire.EventDropped:
			dropped = ev.Dropped
		case wire.EventExit:
			exit = &ev
		}
	}
	code := -1
	if exit.ExitCode != nil {
		code = *exit.ExitCode
	}
	t.Logf("50 MB to a terminal read one frame per 100 ms: exit %d after %s; the client read %d bytes in %d frames and was told it missed %d",
		code, time.Since(start).Round(time.Second), got, frames, dropped)
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if int64(got)+dropped < 50_000_000 {
		t.Errorf("read %d + dropped %d < the 50 MB written", got, dropped)
	}
	if grown := int64(peakHeap) - int64(before); grown > 64<<20 {
		t.Errorf("the server's heap grew %d MiB while the client read slowly", grown>>20)
	}
	peakRSS = max(peakRSS, agentRSS())
	t.Logf("agent RSS at most %d KiB (sampled every 50 frames); server heap grew at most %d KiB", peakRSS, (int64(peakHeap)-int64(before))>>10)
	if peakRSS == 0 || peakRSS > 100<<10 {
		t.Errorf("agent RSS reached %d KiB", peakRSS)
	}
}

// Root inside the sandbox gets nothing out of the terminal but its own
// bytes: output floods of random bytes (escape sequences included), a
// program that closes the terminal while it runs, floods of input and
// control messages, and more clients than a terminal takes leave the server
// healthy and its memory bounded.
func TestTerminalHostile(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	before := heapInUse()
	root := func(cmd string) agentapi.ExecRequest { return agentapi.ExecRequest{Command: cmd, User: "root"} }

	// Random bytes (every escape sequence there is) as fast as they come,
	// read by a client, for a few seconds.
	flood := e.startTerminal(sb.ID, root(`timeout 5 cat /dev/urandom; printf '\033]0;title\007\033[6n\033P+q\033\\'; exit 7`), wire.PtySize{Cols: 80, Rows: 24})
	c := e.attach(sb.ID, flood.Pid)
	ev, status := c.exit(60 * time.Second)
	if ev.ExitCode == nil || *ev.ExitCode != 7 || status != websocket.StatusNormalClosure {
		t.Errorf("flood: exit %+v, status %v", ev, status)
	}
	t.Logf("random flood: the client read %d bytes", len(c.output()))

	// The program closes its terminal (every descriptor of it) and runs on:
	// the output ends, the exit still comes.
	closer := e.startTerminal(sb.ID, root(`echo before; exec 0<&- 1>&- 2>&-; sleep 2; exit 5`), wire.PtySize{Cols: 80, Rows: 24})
	c = e.attach(sb.ID, closer.Pid)
	c.waitOutput(0, "before", 10*time.Second)
	ev, _ = c.exit(30 * time.Second)
	if ev.ExitCode == nil || *ev.ExitCode != 5 {
		t.Errorf("closer: exit %+v", ev)
	}

	// A client floods input and control messages at a program that reads
	// nothing; its writes slow down, nothing grows, the program is killed.
	deaf := e.startTerminal(sb.ID, root(`sleep 600`), wire.PtySize{Cols: 80, Rows: 24})
	ws, _, err := e.dialTerminal(sb.ID, deaf.Pid, e.key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	chunk := bytes.Repeat([]byte("y"), wire.MaxTerminalMessageBytes)
	sent := 0
	var resizes atomic.Int64
	go func() {
		for ctx.Err() == nil {
			if ws.Write(ctx, websocket.MessageText, []byte(`{"type":"resize","cols":90,"rows":30}`)) != nil {
				return
			}
			resizes.Add(1)
		}
	}()
	for ctx.Err() == nil {
		if ws.Write(ctx, websocket.MessageBinary, chunk) != nil {
			break
		}
		sent += len(chunk)
	}
	cancel()
	// The terminal's line discipline discards input past its line buffer
	// when nothing reads, as Linux's does, so writes need not block.
	t.Logf("input flood: %d KiB accepted in 10 s (the program reads none), %d resizes", sent>>10, resizes.Load())
	// One message over the cap closes the WebSocket with 1009.
	big, _, err := e.dialTerminal(sb.ID, deaf.Pid, e.key)
	if err != nil {
		t.Fatal(err)
	}
	big.SetReadLimit(1 << 20)
	_ = big.Write(context.Background(), websocket.MessageBinary, make([]byte, wire.MaxTerminalMessageBytes+1))
	for err == nil { // the replay (the echo of the flood) first
		_, _, err = big.Read(context.Background())
	}
	if st := websocket.CloseStatus(err); st != websocket.StatusMessageTooBig {
		t.Errorf("an input message over the cap: %v (status %v), want 1009", err, st)
	}

	// At most MaxTerminalViewers clients at once; one more is 429.
	var viewers []*websocket.Conn
	for i := 0; i < wire.MaxTerminalViewers+1; i++ {
		v, resp, err := e.dialTerminal(sb.ID, deaf.Pid, e.key)
		if err != nil {
			if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
				t.Errorf("viewer %d: %v %v", i, resp, err)
			}
			break
		}
		viewers = append(viewers, v)
	}
	// ws and big may still count for a moment as their ends are closed.
	if len(viewers) > wire.MaxTerminalViewers {
		t.Errorf("%d viewers at once", len(viewers))
	}
	for _, v := range viewers {
		v.CloseNow()
	}
	ws.CloseNow()
	e.must(http.StatusOK, "POST", fmt.Sprintf("/v1/sandboxes/%s/processes/%d/kill", sb.ID, deaf.Pid), nil, nil)

	// The server is healthy and small, the sandbox answers.
	e.must(http.StatusOK, "GET", "/v1/health", nil, nil)
	if r := e.sh(sb.ID, "echo ok"); r.Stdout != "ok\n" {
		t.Errorf("exec after the terminals: %+v", r)
	}
	grown := int64(heapInUse()) - int64(before)
	t.Logf("server heap grew %d KiB", grown>>10)
	if grown > 64<<20 {
		t.Errorf("the server's heap grew %d MiB", grown>>20)
	}
}

// A pause ends the terminal's connections (gVisor saves the sandbox
// whole); after the resume the program is where it was, and a new
// connection replays its output and goes on.
func TestTerminalPause(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	p := e.startTerminal(sb.ID, shell, wire.PtySize{Cols: 80, Rows: 24})
	c := e.attach(sb.ID, p.Pid)
	m := c.waitOutput(0, "$ ", 20*time.Second)
	c.send("x=kept; echo before-pause\r")
	c.waitOutput(m, "before-pause", 10*time.Second)
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+sb.ID+"/pause", nil, nil)
	ev, status := c.exit(30 * time.Second)
	if ev.ExitCode != nil || status != websocket.StatusGoingAway {
		t.Errorf("at the pause: exit %+v, close status %v", ev, status)
	}
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+sb.ID+"/resume", nil, nil)
	c = e.attach(sb.ID, p.Pid)
	m = c.waitOutput(0, "before-pause", 20*time.Second)
	c.send("echo after-resume-$x\r")
	c.waitOutput(m, "after-resume-kept", 10*time.Second)
	c.send("exit 0\r")
	if ev, _ := c.exit(20 * time.Second); ev.ExitCode == nil || *ev.ExitCode != 0 {
		t.Errorf("exit after the resume: %+v", ev)
	}
}
