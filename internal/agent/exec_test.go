package agent

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"withruntime.dev/runtime/internal/agentapi"
)

func TestHealth(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	var h agentapi.Health
	a.call("GET", "/health", nil, 200, &h)
	if !h.OK || h.Version != "test" {
		t.Fatalf("health = %+v", h)
	}
	a.apiErr("GET", "/nope", nil, 404, agentapi.CodeNotFound)
	a.apiErr("DELETE", "/exec", nil, 405, agentapi.CodeBadRequest)
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	cases := []struct {
		req    agentapi.ExecRequest
		code   int
		signal string
		stderr string
	}{
		{agentapi.ExecRequest{Command: "exit 3"}, 3, "", ""},
		{agentapi.ExecRequest{Command: "true"}, 0, "", ""},
		{agentapi.ExecRequest{Command: "kill -9 $$"}, 137, "SIGKILL", ""},
		{agentapi.ExecRequest{Command: "kill -TERM $$"}, 143, "SIGTERM", ""},
		{agentapi.ExecRequest{Command: "no_such_command_xyz"}, 127, "", "not found"},
		{agentapi.ExecRequest{Argv: []string{"sh", "-c", "exit 5"}}, 5, "", ""},
	}
	for _, c := range cases {
		res := a.exec(c.req)
		if res.ExitCode != c.code || res.Signal != c.signal || !strings.Contains(res.Stderr, c.stderr) || res.TimedOut {
			t.Errorf("%+v: got %+v, want exit %d signal %q stderr ~%q", c.req, res, c.code, c.signal, c.stderr)
		}
	}
}

func TestBadExecRequests(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	a.apiErr("POST", "/exec", agentapi.ExecRequest{}, 400, agentapi.CodeBadRequest)
	a.apiErr("POST", "/exec", agentapi.ExecRequest{Command: "x", Argv: []string{"x"}}, 400, agentapi.CodeBadRequest)
	a.apiErr("POST", "/exec", map[string]any{"cmd": "ls"}, 400, agentapi.CodeBadRequest)
	a.apiErr("POST", "/exec", agentapi.ExecRequest{Command: "true", Cwd: "missing"}, 400, agentapi.CodeBadRequest)
	a.apiErr("POST", "/exec", agentapi.ExecRequest{Argv: []string{"no_such_program_xyz"}}, 400, agentapi.CodeBadRequest)
	a.apiErr("POST", "/exec", agentapi.ExecRequest{Command: "true", MaxOutputBytes: agentapi.MaxMaxOutputBytes + 1}, 400, agentapi.CodeBadRequest)
	a.apiErr("POST", "/exec", agentapi.ExecRequest{Command: "true", TimeoutSeconds: -1}, 400, agentapi.CodeBadRequest)
	a.apiErr("POST", "/exec", agentapi.ExecRequest{Command: "true", User: "no_such_user_xyz"}, 400, agentapi.CodeBadRequest)
}

// Commands run as the documented users only ("user", the default, and
// "root"), not as whatever other account the image has.
func TestOnlyDocumentedUsers(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	for _, name := range []string{"nobody", "daemon", "bin", "Root", "root ", "0", "1000"} {
		e := a.apiErr("POST", "/exec", agentapi.ExecRequest{Command: "true", User: name}, 400, agentapi.CodeBadRequest)
		if !strings.Contains(e.Message, `"user"`) || !strings.Contains(e.Message, `"root"`) {
			t.Errorf("user %q: %q, want the allowed users named", name, e.Message)
		}
	}
	for _, name := range []string{"", "user", "root"} {
		if os.Geteuid() != 0 && name == "root" {
			continue // a non-root agent cannot switch to root
		}
		if res := a.exec(agentapi.ExecRequest{Command: "true", User: name}); res.ExitCode != 0 {
			t.Errorf("user %q: %+v", name, res)
		}
	}
}

func TestEnvAndCwd(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	if err := os.Mkdir(filepath.Join(a.workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := a.exec(agentapi.ExecRequest{
		Command: `echo "$PWD|$FOO|$PYTHONUNBUFFERED|$LANG|$USER|$LOGNAME"`,
		Env:     map[string]string{"FOO": "bar"},
	})
	u := currentUser(t)
	if want := fmt.Sprintf("%s|bar|1|C.UTF-8|%s|%s\n", a.workspace, u, u); res.Stdout != want {
		t.Fatalf("stdout %q, want %q", res.Stdout, want)
	}
	res = a.exec(agentapi.ExecRequest{Argv: []string{"pwd"}, Cwd: "sub"})
	if res.Stdout != filepath.Join(a.workspace, "sub")+"\n" {
		t.Fatalf("pwd = %q", res.Stdout)
	}
	// Own session: the command is its session and group leader.
	res = a.exec(agentapi.ExecRequest{Command: `ps -o sid=,pgid= -p $$`})
	f := strings.Fields(res.Stdout)
	if len(f) != 2 || f[0] != f[1] {
		t.Fatalf("sid/pgid = %q", res.Stdout)
	}
}

func TestStdin(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	start := time.Now()
	for _, cmd := range []string{`read x; echo "rc=$?"`, `cat; echo rc=$?`, `python3 -c "input()" 2>/dev/null; echo rc=$?`} {
		res := a.exec(agentapi.ExecRequest{Command: cmd, TimeoutSeconds: 5})
		if res.TimedOut || !strings.HasPrefix(res.Stdout, "rc=") || res.Stdout == "rc=0\n" && cmd != `cat; echo rc=$?` {
			t.Errorf("%s: %+v", cmd, res)
		}
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("reads did not see EOF at once")
	}
	res := a.exec(agentapi.ExecRequest{Command: "cat", Stdin: "hello\x00 wörld"})
	if res.Stdout != "hello\x00 wörld" {
		t.Fatalf("stdin round trip: %q", res.Stdout)
	}
}

func TestTimeoutPartialOutput(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	start := time.Now()
	res := a.exec(agentapi.ExecRequest{Command: "printf partial; sleep 5", TimeoutSeconds: 1})
	took := time.Since(start)
	if !res.TimedOut || res.ExitCode != agentapi.TimeoutExitCode || res.Stdout != "partial" {
		t.Fatalf("result %+v", res)
	}
	if took > 1200*time.Millisecond {
		t.Fatalf("timed-out exec took %v", took)
	}
}

func TestTimeoutKillsTree(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	// A child in the group, one in a new session (found via PPid), and a
	// grandchild that the main shell waits on.
	res := a.exec(agentapi.ExecRequest{
		Command:        "sleep 1101 & setsid sleep 1102 & sh -c 'sleep 1103' ; wait",
		TimeoutSeconds: 0.5,
	})
	if !res.TimedOut {
		t.Fatalf("result %+v", res)
	}
	for _, s := range []string{"sleep 1101", "sleep 1102", "sleep 1103"} {
		noProcs(t, time.Second, s)
	}
}

func TestClientDisconnectKills(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	for _, ndjson := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		hdr := []string{"Accept", "application/json"}
		if ndjson {
			hdr = []string{"Accept", agentapi.ContentTypeNDJSON}
		}
		go func() {
			for end := time.Now().Add(2 * time.Second); time.Now().Before(end) && len(procsMatching("sleep 1104")) == 0; {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
		}()
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://agent/exec", strings.NewReader(`{"command":"sleep 1104; true"}`))
		req.Header.Set(hdr[0], hdr[1])
		if resp, err := a.client.Do(req); err == nil {
			// The stream may start before the cancel; read until it breaks.
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		noProcs(t, 2*time.Second, "sleep 1104")
	}
}

func TestOutputCap(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	const c = 1000
	for _, n := range []int{c - 1, c, c + 1} {
		res := a.exec(agentapi.ExecRequest{
			Command:        fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a; head -c %d /dev/zero | tr '\\0' b >&2", n, n),
			MaxOutputBytes: c,
		})
		want := n > c
		if res.StdoutTruncated != want || res.StderrTruncated != want || res.StdoutBytes != int64(n) ||
			len(res.Stdout) != min(n, c) || len(res.Stderr) != min(n, c) {
			t.Errorf("n=%d: truncated %v/%v bytes %d len %d", n, res.StdoutTruncated, res.StderrTruncated, res.StdoutBytes, len(res.Stdout))
		}
	}
	// The cap never splits a character, and reading continues past it.
	res := a.exec(agentapi.ExecRequest{Command: `printf 'aaaa\xe2\x98\x95'; head -c 3000000 /dev/zero`, MaxOutputBytes: 5})
	if res.Stdout != "aaaa" || !res.StdoutTruncated || res.StdoutLossy || res.StdoutBytes != 3000007 {
		t.Fatalf("cut at boundary: %+v", res)
	}
	// Default cap is 1 MiB.
	res = a.exec(agentapi.ExecRequest{Command: `head -c 2000000 /dev/zero`})
	if len(res.Stdout) != agentapi.DefaultMaxOutputBytes || !res.StdoutTruncated {
		t.Fatalf("default cap: %d bytes kept", len(res.Stdout))
	}
}

func TestUTF8(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	split := agentapi.ExecRequest{Command: `printf 'caf\xc3'; sleep 0.3; printf '\xa9\xe2\x98\x95\n'`}
	if res := a.exec(split); res.Stdout != "café☕\n" || res.StdoutLossy {
		t.Fatalf("collected split: %+v", res)
	}
	evs := a.stream("POST", "/exec", split)
	if got := joined(evs, "stdout"); got != "café☕\n" {
		t.Fatalf("streamed split: %q", got)
	}
	for _, e := range evs {
		if e.Lossy {
			t.Fatalf("lossy event %+v", e)
		}
	}

	res := a.exec(agentapi.ExecRequest{Command: `printf '\xff\x00ab'`})
	raw, _ := base64.StdEncoding.DecodeString(res.StdoutBase64)
	if res.Stdout != "\uFFFD\x00ab" || !res.StdoutLossy || string(raw) != "\xff\x00ab" {
		t.Fatalf("lossy: %+v", res)
	}
	evs = a.stream("POST", "/exec", agentapi.ExecRequest{Command: `printf '\xfe'`})
	if len(evs) != 3 || !evs[1].Lossy || evs[1].Data != "\uFFFD" || evs[1].DataBase64 != "/g==" {
		t.Fatalf("lossy stream: %+v", evs)
	}
	if res := a.exec(agentapi.ExecRequest{Command: `printf 'a\0b'`}); res.Stdout != "a\x00b" || res.StdoutLossy {
		t.Fatalf("NUL: %+v", res)
	}

	big := agentapi.ExecRequest{Command: `python3 -c "print('☕'*100000)"`}
	check := func(mode, s string) {
		if n := utf8.RuneCountInString(s); n != 100001 || strings.ContainsRune(s, utf8.RuneError) {
			t.Fatalf("%s: %d runes, replacement present: %v", mode, n, strings.ContainsRune(s, utf8.RuneError))
		}
	}
	check("collected", a.exec(big).Stdout)
	check("streamed", joined(a.stream("POST", "/exec", big), "stdout"))
}

func TestStreamingOrderAndTiming(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	evs := a.stream("POST", "/exec", agentapi.ExecRequest{Command: `for i in 1 2 3; do echo $i; sleep 1; done; echo e >&2; exit 2`})
	if len(evs) < 3 || evs[0].Type != "start" || evs[0].Pid <= 0 {
		t.Fatalf("events %+v", evs)
	}
	if evs[1].Type != "stdout" || evs[1].Data != "1\n" || evs[1].at > 1500*time.Millisecond {
		t.Fatalf("first chunk %+v", evs[1])
	}
	last := evs[len(evs)-1]
	if last.Type != "exit" || last.Result == nil || last.Result.ExitCode != 2 || last.Result.Stdout != "" ||
		last.Result.StdoutBytes != 6 || last.Result.StderrBytes != 2 {
		t.Fatalf("exit event %+v", last)
	}
	if joined(evs, "stdout") != "1\n2\n3\n" || joined(evs, "stderr") != "e\n" {
		t.Fatalf("data %+v", evs)
	}
}

func TestLingeringChild(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	marker := filepath.Join(a.workspace, "marker")
	start := time.Now()
	// The child keeps the pipes and writes 1 MB after the exec returned:
	// it must neither block on a full pipe nor die of SIGPIPE.
	res := a.exec(agentapi.ExecRequest{Command: fmt.Sprintf(
		`(sleep 0.5; head -c 1000000 /dev/zero; echo done > %s) & echo hi`, marker)})
	if took := time.Since(start); res.Stdout != "hi\n" || res.ExitCode != 0 || took > time.Second {
		t.Fatalf("result %+v after %v", res, took)
	}
	eventually(t, 3*time.Second, "lingering child finished writing", func() bool {
		data, _ := os.ReadFile(marker)
		return string(data) == "done\n"
	})
}

func TestChattyLingeringChild(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	// A background child that never stops writing must not hold the answer.
	req := agentapi.ExecRequest{Command: "timeout 3 yes & echo hi"}
	start := time.Now()
	// yes may write before echo does: "hi" is a line of the output.
	if res := a.exec(req); !strings.Contains("\n"+res.Stdout, "\nhi\n") || time.Since(start) > time.Second {
		t.Fatalf("collected: %d bytes after %v", len(res.Stdout), time.Since(start))
	}
	start = time.Now()
	evs := a.stream("POST", "/exec", req)
	if evs[len(evs)-1].Type != "exit" || time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("streamed: %d events after %v", len(evs), time.Since(start))
	}
}

func TestParallelExecs(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			res := a.exec(agentapi.ExecRequest{Command: fmt.Sprintf("echo out%d; echo err%d >&2; sleep 1; exit %d", i, i, i)})
			if res.Stdout != fmt.Sprintf("out%d\n", i) || res.Stderr != fmt.Sprintf("err%d\n", i) || res.ExitCode != i {
				t.Errorf("exec %d: %+v", i, res)
			}
		})
	}
	wg.Wait()
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("20 execs of 1 s took %v: not parallel", took)
	}
}
