package agent

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/sdk/go/wire"
)

// termConn is one viewer of a terminal, as the host speaks to the agent.
type termConn struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
	buf  []byte
}

func attachTerminal(t *testing.T, a *testAgent, pid int) *termConn {
	t.Helper()
	conn, err := net.Dial("unix", a.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /processes/%d/terminal HTTP/1.1\r\nHost: agent\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", pid, agentapi.TerminalUpgrade)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("terminal: %d %s", resp.StatusCode, body)
	}
	return &termConn{t: t, conn: conn, br: br, buf: make([]byte, agentapi.MaxTerminalFrameBytes)}
}

func (c *termConn) input(s string) {
	c.t.Helper()
	if err := agentapi.WriteTerminalFrame(c.conn, agentapi.TerminalInput, []byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *termConn) control(ctl wire.TerminalControl) {
	c.t.Helper()
	data, _ := json.Marshal(ctl)
	if err := agentapi.WriteTerminalFrame(c.conn, agentapi.TerminalControl, data); err != nil {
		c.t.Fatal(err)
	}
}

// until reads frames until the output holds want (or an exit event comes
// when want is ""), and returns the output and the events read.
func (c *termConn) until(want string, d time.Duration) (string, []wire.TerminalEvent) {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(d))
	var out strings.Builder
	var evs []wire.TerminalEvent
	for {
		kind, p, err := agentapi.ReadTerminalFrame(c.br, c.buf)
		if err != nil {
			c.t.Fatalf("reading the terminal (waiting for %q): %v; output so far %q, events %+v", want, err, out.String(), evs)
		}
		switch kind {
		case agentapi.TerminalOutput:
			out.Write(p)
		case agentapi.TerminalEvent:
			var ev wire.TerminalEvent
			if err := json.Unmarshal(p, &ev); err != nil {
				c.t.Fatal(err)
			}
			evs = append(evs, ev)
			if ev.Type == wire.EventExit && want == "" {
				return out.String(), evs
			}
		default:
			c.t.Fatalf("frame kind %q", kind)
		}
		if want != "" && strings.Contains(out.String(), want) {
			return out.String(), evs
		}
	}
}

func TestTerminalBasics(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	p := startBackground(t, a, agentapi.ExecRequest{
		Command: `stty size; tty; echo "term=$TERM"; read -r x; echo "got $x"; read -r y; stty size; exit 3`,
		Pty:     &wire.PtySize{Cols: 100, Rows: 30},
	})
	if p.Pty == nil || *p.Pty != (wire.PtySize{Cols: 100, Rows: 30}) {
		t.Fatalf("process %+v", p)
	}
	c := attachTerminal(t, a, p.Pid)
	out, _ := c.until("term=", 10*time.Second)
	c.input("hello\r")
	out2, _ := c.until("got hello", 10*time.Second)
	c.control(wire.TerminalControl{Type: wire.ControlResize, Cols: 132, Rows: 50})
	var got agentapi.Process
	eventually(t, 5*time.Second, "the new size", func() bool {
		a.call("GET", fmt.Sprintf("/processes/%d", p.Pid), nil, 200, &got)
		return got.Pty != nil && got.Pty.Cols == 132
	})
	c.input("\r")
	out3, evs := c.until("", 10*time.Second)
	all := out + out2 + out3
	term := cmp.Or(os.Getenv("TERM"), wire.DefaultTerm) // the agent's own, else the default
	for _, want := range []string{"30 100", "/dev/pts/", "term=" + term + "\r\n", "got hello", "50 132"} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q: %q", want, all)
		}
	}
	last := evs[len(evs)-1]
	if last.ExitCode == nil || *last.ExitCode != 3 {
		t.Fatalf("exit %+v", evs)
	}
	// A viewer that comes later gets the replay and the exit.
	c2 := attachTerminal(t, a, p.Pid)
	replay, evs := c2.until("", 5*time.Second)
	if !strings.Contains(replay, "got hello") || *evs[len(evs)-1].ExitCode != 3 {
		t.Fatalf("replay %q %+v", replay, evs)
	}
	// The wait answer holds the terminal's output as stdout.
	var res agentapi.ExecResult
	a.call("POST", fmt.Sprintf("/processes/%d/wait", p.Pid), nil, 200, &res)
	if res.ExitCode != 3 || !strings.Contains(res.Stdout, "got hello") || res.StderrBytes != 0 {
		t.Fatalf("wait %+v", res)
	}
}

func TestTerminalRefusals(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	a.apiErr("POST", "/exec", agentapi.ExecRequest{Command: "true", Pty: &wire.PtySize{Cols: 80, Rows: 24}}, 400, agentapi.CodeBadRequest)
	a.apiErr("POST", "/processes", agentapi.ExecRequest{Command: "true", Pty: &wire.PtySize{Cols: 0, Rows: 24}}, 400, agentapi.CodeBadRequest)
	a.apiErr("POST", "/processes", agentapi.ExecRequest{Command: "true", StdinOpen: true, Pty: &wire.PtySize{Cols: 80, Rows: 24}}, 400, agentapi.CodeBadRequest)
	p := startBackground(t, a, agentapi.ExecRequest{Command: "sleep 1200"})
	a.apiErr("GET", fmt.Sprintf("/processes/%d/terminal", p.Pid), nil, 409, agentapi.CodeConflict)
	a.call("POST", fmt.Sprintf("/processes/%d/kill", p.Pid), nil, 200, nil)
}

// POST /processes/{pid}/resize sets the size without a viewer; the program
// sees it (and gets SIGWINCH).
func TestTerminalResizeRoute(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	p := startBackground(t, a, agentapi.ExecRequest{
		Command: `trap 'stty size' WINCH; echo ready; while :; do sleep 0.05; done`,
		Pty:     &wire.PtySize{Cols: 80, Rows: 24},
	})
	c := attachTerminal(t, a, p.Pid)
	c.until("ready", 10*time.Second)
	var got agentapi.Process
	a.call("POST", fmt.Sprintf("/processes/%d/resize", p.Pid), wire.PtySize{Cols: 120, Rows: 40}, 200, &got)
	if got.Pty == nil || *got.Pty != (wire.PtySize{Cols: 120, Rows: 40}) {
		t.Fatalf("resize answered %+v", got)
	}
	c.until("40 120", 10*time.Second)
	a.apiErr("POST", fmt.Sprintf("/processes/%d/resize", p.Pid), wire.PtySize{Cols: 0, Rows: 40}, 400, agentapi.CodeBadRequest)
	a.apiErr("POST", fmt.Sprintf("/processes/%d/resize", p.Pid), map[string]any{"cols": 10, "rows": 10, "x": 1}, 400, agentapi.CodeBadRequest)
	a.call("POST", fmt.Sprintf("/processes/%d/kill", p.Pid), nil, 200, nil)
	c.until("", 10*time.Second)
	a.apiErr("POST", fmt.Sprintf("/processes/%d/resize", p.Pid), wire.PtySize{Cols: 90, Rows: 30}, 409, agentapi.CodeConflict)
	plain := startBackground(t, a, agentapi.ExecRequest{Command: "sleep 1200"})
	a.apiErr("POST", fmt.Sprintf("/processes/%d/resize", plain.Pid), wire.PtySize{Cols: 90, Rows: 30}, 409, agentapi.CodeConflict)
	a.apiErr("POST", "/processes/99999/resize", wire.PtySize{Cols: 90, Rows: 30}, 404, agentapi.CodeNotFound)
	a.call("POST", fmt.Sprintf("/processes/%d/kill", plain.Pid), nil, 200, nil)
}

// A viewer that never reads costs the program nothing: it writes far more
// than the buffers hold and ends; a later viewer is told what it missed.
func TestTerminalSlowViewer(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	p := startBackground(t, a, agentapi.ExecRequest{
		Command: `read -r go; head -c 8000000 /dev/zero | tr '\0' x; echo; echo END`,
		Pty:     &wire.PtySize{Cols: 80, Rows: 24},
	})
	c := attachTerminal(t, a, p.Pid) // never read
	c.input("go\r")
	var res agentapi.ExecResult
	a.call("POST", fmt.Sprintf("/processes/%d/wait?timeoutSeconds=60", p.Pid), nil, 200, &res)
	if res.ExitCode != 0 || res.StdoutBytes < 8000000 || !res.StdoutTruncated {
		t.Fatalf("wait %+v", res.ExitCode)
	}
	// Now the stalled viewer reads: it skipped what the ring lost.
	_, evs := c.until("", 30*time.Second)
	var dropped int64
	for _, ev := range evs {
		if ev.Type == wire.EventDropped {
			dropped = ev.Dropped
		}
	}
	if dropped < 4000000 {
		t.Fatalf("dropped %d, events %+v", dropped, evs)
	}
}
