package itest

// The field cases of /work/shared/cases/README.md (C01–C21), each against
// real gVisor sandboxes through the public HTTP API. Cases that leave a
// sandbox as they found it share one sandbox (subtests of TestCases, run in
// order); destructive ones (large files, fork bomb, memory, disk) get their
// own. docs/behaviour.md states the contract these tests hold the product to.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// box is one sandbox of a test env, with helpers bound to a (sub)test.
type box struct {
	e  *env
	id string
}

// newBox starts a server and one sandbox.
func newBox(t *testing.T, req api.CreateSandboxRequest, opts ...option) *box {
	t.Helper()
	e := newEnv(t, opts...)
	return &box{e: e, id: e.create(req).ID}
}

// on returns the box with its helpers reporting to t.
func (b *box) on(t *testing.T) *box {
	e := *b.e
	e.t = t
	return &box{e: &e, id: b.id}
}

func (b *box) path(rest string) string { return "/v1/sandboxes/" + b.id + "/" + rest }

func (b *box) exec(req agentapi.ExecRequest) agentapi.ExecResult {
	b.e.t.Helper()
	return b.e.exec(b.id, req)
}

func (b *box) sh(command string) agentapi.ExecResult {
	b.e.t.Helper()
	return b.e.sh(b.id, command)
}

// shT runs command with a timeout and returns the result and wall time.
func (b *box) shT(command string, timeout float64) (agentapi.ExecResult, time.Duration) {
	b.e.t.Helper()
	t0 := time.Now()
	res := b.exec(agentapi.ExecRequest{Command: command, TimeoutSeconds: timeout})
	return res, time.Since(t0)
}

// mustOK runs command and fails unless it exits 0.
func (b *box) mustOK(command string) agentapi.ExecResult {
	b.e.t.Helper()
	res := b.sh(command)
	if res.ExitCode != 0 {
		b.e.t.Fatalf("%q: exit %d, stdout %q, stderr %q", command, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res
}

// timedEvent is an NDJSON event and when it arrived after the request.
type timedEvent struct {
	at time.Duration
	agentapi.Event
}

// logOnFailure logs the tail of the sandbox's console (the agent's log) if
// t fails, to show what the agent did.
func (b *box) logOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		data, _ := os.ReadFile(filepath.Join(b.e.dataDir, "gvisor", "sandboxes", b.id, "console.log"))
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		t.Logf("agent log of %s (last lines):\n%s", b.id, strings.Join(lines[max(0, len(lines)-30):], "\n"))
	})
}

// stream runs req with Accept: application/x-ndjson and returns the events
// as they arrived.
func (b *box) stream(req agentapi.ExecRequest) []timedEvent {
	t := b.e.t
	t.Helper()
	body, _ := json.Marshal(req)
	hr, err := http.NewRequest("POST", b.e.http.URL+b.path("exec"), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+b.e.key)
	hr.Header.Set("Accept", agentapi.ContentTypeNDJSON)
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: status %d: %s", resp.StatusCode, data)
	}
	var evs []timedEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev agentapi.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("stream: bad line %q: %v", sc.Text(), err)
		}
		if ev.Type != agentapi.EventHeartbeat {
			evs = append(evs, timedEvent{time.Since(t0), ev})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != "exit" {
		t.Fatalf("stream did not end with an exit event: %+v", evs)
	}
	return evs
}

// joined concatenates the data of one stream's events; exact reassembles
// the bytes (from dataBase64 where a chunk was lossy).
func joined(evs []timedEvent, stream string) (text string, exact []byte) {
	var sb strings.Builder
	for _, ev := range evs {
		if ev.Type != stream {
			continue
		}
		sb.WriteString(ev.Data)
		if ev.Lossy {
			raw, _ := base64.StdEncoding.DecodeString(ev.DataBase64)
			exact = append(exact, raw...)
		} else {
			exact = append(exact, ev.Data...)
		}
	}
	return sb.String(), exact
}

func exitOf(evs []timedEvent) agentapi.ExecResult { return *evs[len(evs)-1].Result }

// heapWatch samples this process's heap (the server runs in it) until
// stopped and returns the peak.
func heapWatch() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(25 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		return peak.Load()
	}
}

// procsMatching lists the command lines of processes in the sandbox that
// start with one of prefixes.
func (b *box) procsMatching(prefixes ...string) []string {
	b.e.t.Helper()
	res := b.exec(agentapi.ExecRequest{Argv: []string{"ps", "-eo", "args="}, User: "root"})
	var out []string
	for line := range strings.SplitSeq(res.Stdout, "\n") {
		line = strings.TrimSpace(line)
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
			}
		}
	}
	return out
}

// TestCases runs the cases that can share one sandbox, in order.
func TestCases(t *testing.T) {
	// A long lease: on a loaded machine the cases may take minutes.
	b := newBox(t, api.CreateSandboxRequest{TimeoutSeconds: 1800})
	for _, c := range []struct {
		name string
		run  func(*testing.T, *box)
	}{
		{"C01NonUTF8", caseNonUTF8},
		{"C02SplitUTF8", caseSplitUTF8},
		{"C03FloodAndCap", caseFloodAndCap},
		{"C04Streaming", caseStreaming},
		{"C05TimeoutKillsTree", caseTimeoutKillsTree},
		{"C06PartialOutputOnTimeout", casePartialOutput},
		{"C07ExitCodes", caseExitCodes},
		{"C08StreamsApart", caseStreamsApart},
		{"C09Stdin", caseStdin},
		{"C10ShellSyntax", caseShellSyntax},
		{"C11Ownership", caseOwnership},
		{"C12BinaryRoundTrip", caseBinaryRoundTrip},
		{"C17Zombies", caseZombies},
		{"C18KillGroup", caseKillGroup},
		{"C19NetworkOff", caseNetworkOff},
		{"C20Pipelines", casePipelines},
		{"C21ParallelExecs", caseParallelExecs},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, b.on(t)) })
	}
}

// C01: output that is not UTF-8 never fails the call; the text is decoded
// lossily with a flag and the exact bytes travel in base64. NUL is kept.
func caseNonUTF8(t *testing.T, b *box) {
	want := "ok\uFFFD\uFFFD\ndone\n"
	wantRaw := []byte("ok\xff\xfe\ndone\n")
	res := b.sh(`printf 'ok\xff\xfe\n'; echo done`)
	raw, _ := base64.StdEncoding.DecodeString(res.StdoutBase64)
	if res.ExitCode != 0 || res.Stdout != want || !res.StdoutLossy || !bytes.Equal(raw, wantRaw) {
		t.Errorf("stdout: %+v", res)
	}
	res = b.sh(`{ printf 'ok\xff\xfe\n'; echo done; } >&2`)
	raw, _ = base64.StdEncoding.DecodeString(res.StderrBase64)
	if res.ExitCode != 0 || res.Stderr != want || !res.StderrLossy || !bytes.Equal(raw, wantRaw) || res.StdoutLossy {
		t.Errorf("stderr: %+v", res)
	}
	res = b.sh(`printf 'a\0b'`)
	if res.Stdout != "a\x00b" || res.StdoutBytes != 3 || res.StdoutLossy {
		t.Errorf("NUL: %+v", res)
	}
	evs := b.stream(agentapi.ExecRequest{Command: `printf 'ok\xff\xfe\n'; echo done; printf 'x\xc3' >&2`})
	text, exact := joined(evs, "stdout")
	if text != want || !bytes.Equal(exact, wantRaw) || exitOf(evs).ExitCode != 0 {
		t.Errorf("streamed stdout %q / %q", text, exact)
	}
	if text, exact := joined(evs, "stderr"); text != "x\uFFFD" || string(exact) != "x\xc3" {
		t.Errorf("streamed stderr ending in a cut sequence: %q / %q", text, exact)
	}
}

// C02: a character split across reads is never broken, in the result or
// in the stream.
func caseSplitUTF8(t *testing.T, b *box) {
	cmd := `printf 'caf\xc3'; sleep 0.3; printf '\xa9\xe2\x98\x95\n'`
	if res := b.sh(cmd); res.Stdout != "café☕\n" || res.StdoutLossy {
		t.Errorf("collected: %+v", res)
	}
	evs := b.stream(agentapi.ExecRequest{Command: cmd})
	if text, _ := joined(evs, "stdout"); text != "café☕\n" {
		t.Errorf("streamed: %q", text)
	}
	for _, ev := range evs {
		if ev.Lossy {
			t.Errorf("lossy event: %+v", ev.Event)
		}
	}
	py := `python3 -c "print('☕'*100000)"`
	res := b.sh(py)
	if n := utf8.RuneCountInString(res.Stdout); n != 100001 || strings.ContainsRune(res.Stdout, utf8.RuneError) || res.StdoutTruncated {
		t.Errorf("collected 100000 cups: %d runes, truncated %v", n, res.StdoutTruncated)
	}
	text, _ := joined(b.stream(agentapi.ExecRequest{Command: py}), "stdout")
	if n := utf8.RuneCountInString(text); n != 100001 || strings.ContainsRune(text, utf8.RuneError) {
		t.Errorf("streamed 100000 cups: %d runes", n)
	}
}

// C03: a flood ends at its timeout with exactly the cap kept, server memory
// stays bounded, and the cap is exact at its edge and per stream.
func caseFloodAndCap(t *testing.T, b *box) {
	stop := heapWatch()
	res, took := b.shT("yes", 10)
	peak := stop()
	if !res.TimedOut || res.ExitCode != agentapi.TimeoutExitCode || took > 12*time.Second || took < 10*time.Second {
		t.Errorf("yes: timedOut %v exit %d after %v", res.TimedOut, res.ExitCode, took)
	}
	if len(res.Stdout) != agentapi.DefaultMaxOutputBytes || !res.StdoutTruncated || res.StdoutBytes <= int64(len(res.Stdout)) {
		t.Errorf("yes: kept %d bytes of %d, truncated %v", len(res.Stdout), res.StdoutBytes, res.StdoutTruncated)
	}
	if !strings.HasPrefix(res.Stdout, "y\ny\n") || !strings.HasSuffix(res.Stdout, "y\n") || !strings.Contains(res.Stdout, "bytes omitted") {
		t.Errorf("yes: head %q tail %q", res.Stdout[:min(20, len(res.Stdout))], res.Stdout[max(0, len(res.Stdout)-20):])
	}
	t.Logf("yes wrote %d bytes in %v; server heap peak %d MiB", res.StdoutBytes, took, peak>>20)
	if peak > 200<<20 {
		t.Errorf("server heap peaked at %d MiB during the flood", peak>>20)
	}
	b.mustOK("echo ok")

	const c = 1000
	for _, n := range []int{c - 1, c, c + 1} {
		res := b.exec(agentapi.ExecRequest{MaxOutputBytes: c,
			Command: fmt.Sprintf(`head -c %d /dev/zero | tr '\0' a; head -c 10 /dev/zero | tr '\0' e >&2`, n)})
		if res.StdoutTruncated != (n > c) || res.StdoutBytes != int64(n) || len(res.Stdout) != min(n, c) {
			t.Errorf("%d bytes with cap %d: kept %d, truncated %v", n, c, len(res.Stdout), res.StdoutTruncated)
		}
		if res.StderrTruncated || res.Stderr != "eeeeeeeeee" {
			t.Errorf("stderr is capped on its own: %+v", res)
		}
	}
	res = b.exec(agentapi.ExecRequest{MaxOutputBytes: c, Command: `head -c 5000 /dev/zero | tr '\0' e >&2; echo out`})
	if !res.StderrTruncated || len(res.Stderr) != c || res.StdoutTruncated || res.Stdout != "out\n" {
		t.Errorf("stderr over the cap: %+v", res)
	}
}

// C04: streamed output arrives as it is written.
func caseStreaming(t *testing.T, b *box) {
	evs := b.stream(agentapi.ExecRequest{Command: `for i in 1 2 3 4 5; do echo $i; sleep 1; done`})
	var arrivals []time.Duration
	for _, ev := range evs {
		if ev.Type == "stdout" {
			arrivals = append(arrivals, ev.at)
		}
	}
	if len(arrivals) < 5 || arrivals[0] > 1500*time.Millisecond || arrivals[len(arrivals)-1] < 3500*time.Millisecond {
		t.Errorf("stdout events at %v, want the first within 1.5 s and one a second", arrivals)
	}
	if text, _ := joined(evs, "stdout"); text != "1\n2\n3\n4\n5\n" {
		t.Errorf("streamed %q", text)
	}
}

// C05: a timeout kills the command's whole tree, and nothing else.
func caseTimeoutKillsTree(t *testing.T, b *box) {
	res, took := b.shT("sleep 5; echo hello", 2)
	if !res.TimedOut || res.ExitCode != agentapi.TimeoutExitCode || strings.Contains(res.Stdout, "hello") || took < 2*time.Second || took > 3*time.Second {
		t.Errorf("sleep 5 with timeout 2: %+v after %v", res, took)
	}
	// A detached process from an earlier call, and a background child that
	// keeps the pipes: neither holds its call open, both survive.
	b.mustOK("setsid sleep 611 >/dev/null 2>&1 &")
	res, took = b.shT("sleep 612 & echo started", 0)
	if res.Stdout != "started\n" || took > time.Second {
		t.Errorf("background child kept the call open: %+v after %v", res, took)
	}
	res, took = b.shT(`sh -c 'sleep 300 & sleep 300 & wait'`, 2)
	if !res.TimedOut || took > 3*time.Second {
		t.Errorf("tree with timeout 2: %+v after %v", res, took)
	}
	if left := b.procsMatching("sleep 300"); len(left) > 0 {
		t.Errorf("left after the timeout: %q", left)
	}
	if left := b.procsMatching("sleep 611", "sleep 612"); len(left) != 2 {
		t.Errorf("detached processes of earlier calls: %q, want both alive", left)
	}
	b.exec(agentapi.ExecRequest{Command: "pkill -x sleep; true", User: "root"})
}

// C06: output written before a timeout is returned with it.
func casePartialOutput(t *testing.T, b *box) {
	res, _ := b.shT("printf partial; sleep 5", 1)
	if !res.TimedOut || res.Stdout != "partial" {
		t.Errorf("printf partial: %+v", res)
	}
	res, _ = b.shT("echo line1; echo err1 >&2; sleep 5", 1)
	if !res.TimedOut || res.Stdout != "line1\n" || res.Stderr != "err1\n" {
		t.Errorf("line1/err1: %+v", res)
	}
	evs := b.stream(agentapi.ExecRequest{Command: "printf partial; sleep 5", TimeoutSeconds: 1})
	if text, _ := joined(evs, "stdout"); text != "partial" || !exitOf(evs).TimedOut {
		t.Errorf("streamed: %q %+v", text, exitOf(evs))
	}
}

// C07: exit codes follow the shell's conventions.
func caseExitCodes(t *testing.T, b *box) {
	for _, c := range []struct {
		cmd    string
		code   int
		signal string
		stderr string
	}{
		{"kill -9 $$", 137, "SIGKILL", ""},
		{"kill -TERM $$", 143, "SIGTERM", ""},
		{"nonexistent-cmd-xyz", 127, "", "not found"},
		{"exit 3", 3, "", ""},
		{"exit 0", 0, "", ""},
		{"exit 255", 255, "", ""},
	} {
		res := b.sh(c.cmd)
		if res.ExitCode != c.code || res.Signal != c.signal || !strings.Contains(res.Stderr, c.stderr) || res.TimedOut || res.OOMKilled {
			t.Errorf("%q: %+v, want exit %d signal %q stderr containing %q", c.cmd, res, c.code, c.signal, c.stderr)
		}
	}
	// argv with a missing program is a request error, not an exit code.
	status, body := b.e.do("POST", b.path("exec"), agentapi.ExecRequest{Argv: []string{"nonexistent-cmd-xyz"}})
	if status != http.StatusBadRequest || errorCode(t, body) != agentapi.CodeBadRequest {
		t.Errorf("argv nonexistent: %d %s", status, body)
	}
}

// C08: stdout and stderr never mix and never go missing.
func caseStreamsApart(t *testing.T, b *box) {
	res := b.sh("printf out; printf err >&2; exit 7")
	if res.ExitCode != 7 || res.Stdout != "out" || res.Stderr != "err" {
		t.Errorf("out/err: %+v", res)
	}
	for i := range 20 {
		res := b.sh(`python3 -c "import nonexistent_mod_xyz"`)
		if res.ExitCode != 1 || !strings.Contains(res.Stderr, "ModuleNotFoundError") || res.Stdout != "" {
			t.Errorf("run %d: %+v", i, res)
		}
	}
}

// C09: without stdin a command reads end-of-file at once.
func caseStdin(t *testing.T, b *box) {
	for _, c := range []struct{ cmd, stdout, stderr string }{
		{`read x; echo "got:[$x]"`, "got:[]\n", ""},
		{"cat; echo after", "after\n", ""},
		{`python3 -c "input()"`, "", "EOFError"},
	} {
		res, took := b.shT(c.cmd, 10)
		if res.Stdout != c.stdout || !strings.Contains(res.Stderr, c.stderr) || took > time.Second || res.TimedOut {
			t.Errorf("%q: %+v after %v", c.cmd, res, took)
		}
	}
	res := b.exec(agentapi.ExecRequest{Command: `read x; echo "got:[$x]"; cat`, Stdin: "one\ntwo\n"})
	if res.Stdout != "got:[one]\ntwo\n" {
		t.Errorf("with stdin: %+v", res)
	}
}

// C10: shell syntax errors and odd input return at once with bash's codes.
func caseShellSyntax(t *testing.T, b *box) {
	for _, c := range []struct {
		cmd    string
		code   int
		stdout string
		stderr string
	}{
		{"exit 3", 3, "", ""},
		{"fi", 2, "", "syntax error"},
		{"if true; then echo x", 2, "", "syntax error"},
		{"python3 <<'EOF'\nimport sys\nfor i in range(3):\n    print(i)\nprint('end', file=sys.stderr)\nEOF", 0, "0\n1\n2\n", "end"},
		{"cat <<'EOF'\nunterminated", 0, "unterminated\n", "here-document"},
	} {
		res, took := b.shT(c.cmd, 10)
		if res.ExitCode != c.code || res.Stdout != c.stdout || !strings.Contains(res.Stderr, c.stderr) || took > time.Second {
			t.Errorf("%q: %+v after %v", c.cmd, res, took)
		}
		b.mustOK("true")
	}
}

// C11: directories the file API creates belong to the sandbox user.
func caseOwnership(t *testing.T, b *box) {
	var fi agentapi.FileInfo
	b.e.must(http.StatusOK, "PUT", b.path("files?path=/workspace/new/a/b/c.txt"), "hello\n", &fi)
	if fi.Uid != 1000 || fi.Gid != 1000 || fi.Size != 6 {
		t.Errorf("written file: %+v", fi)
	}
	res := b.mustOK("stat -c '%n %u %g' /workspace/new /workspace/new/a /workspace/new/a/b /workspace/new/a/b/c.txt")
	for line := range strings.SplitSeq(strings.TrimSpace(res.Stdout), "\n") {
		if !strings.HasSuffix(line, " 1000 1000") {
			t.Errorf("owner: %s", line)
		}
	}
	b.mustOK("rm -rf /workspace/new && test ! -e /workspace/new")
	// Relative paths resolve under /workspace, and the same holds there.
	b.e.must(http.StatusOK, "PUT", b.path("files?path=rel/x/y.txt"), "y", &fi)
	if fi.Path != "/workspace/rel/x/y.txt" || fi.Uid != 1000 {
		t.Errorf("relative: %+v", fi)
	}
	b.mustOK("rm -r rel")
}

// C12: bytes survive the file API exactly.
func caseBinaryRoundTrip(t *testing.T, b *box) {
	data := []byte{0x00, 0x01, 0x02, 0x03, 0xff, 0xfe, 0xfd, 0xaa, 0xbb, 0xcc}
	b.e.must(http.StatusOK, "PUT", b.path("files?path=bin.dat"), data, nil)
	res := b.mustOK("stat -c %s bin.dat; od -An -tx1 bin.dat")
	if f := strings.Fields(res.Stdout); strings.Join(f, " ") != "10 00 01 02 03 ff fe fd aa bb cc" {
		t.Errorf("inside: %q", res.Stdout)
	}
	status, got := b.e.do("GET", b.path("files?path=bin.dat"), nil)
	if status != http.StatusOK || !bytes.Equal(got, data) {
		t.Errorf("read back %d %x", status, got)
	}
	random := make([]byte, 64<<10)
	rand.NewChaCha8([32]byte{12}).Read(random)
	sum := sha256.Sum256(random)
	b.e.must(http.StatusOK, "PUT", b.path("files?path=random.bin"), random, nil)
	res = b.mustOK("sha256sum random.bin")
	if !strings.HasPrefix(res.Stdout, hex.EncodeToString(sum[:])) {
		t.Errorf("sha256 inside %q, want %x", res.Stdout, sum)
	}
	status, got = b.e.do("GET", b.path("files?path=random.bin"), nil)
	if status != http.StatusOK || sha256.Sum256(got) != sum {
		t.Errorf("read back %d, %d bytes", status, len(got))
	}
	b.mustOK("rm bin.dat random.bin")
}

// C17: orphans are reaped, so no zombie is left.
func caseZombies(t *testing.T, b *box) {
	res := b.sh(`for i in 1 2 3 4 5; do sh -c "sh -c 'sleep 1' &" & wait; done; sleep 3; ps -eo stat= | grep -c '^Z'`)
	if res.Stdout != "0\n" {
		t.Errorf("zombies: %+v", res)
	}
}

// C18: killing a background process kills its whole tree, even children
// that ignore SIGTERM or sit in a pipeline.
func caseKillGroup(t *testing.T, b *box) {
	var p agentapi.Process
	b.e.must(http.StatusCreated, "POST", b.path("processes"),
		agentapi.ExecRequest{Command: `bash -c 'sleep 1001 | cat & sleep 1002 & trap "" TERM; wait'`}, &p)
	waitFor(t, 3*time.Second, "the sleeps to start", func() bool { return len(b.procsMatching("sleep 100")) == 2 })
	t0 := time.Now()
	b.e.must(http.StatusOK, "POST", b.path(fmt.Sprintf("processes/%d/kill", p.Pid)), nil, &p)
	waitFor(t, 3*time.Second, "every sleep 100[12] to die", func() bool { return len(b.procsMatching("sleep 100")) == 0 })
	t.Logf("tree gone %v after the kill", time.Since(t0))
	var res agentapi.ExecResult
	b.e.must(http.StatusOK, "POST", b.path(fmt.Sprintf("processes/%d/wait?timeoutSeconds=5", p.Pid)), nil, &res)
	if res.ExitCode != 137 || res.Signal != "SIGKILL" {
		t.Errorf("killed process result: %+v", res)
	}
}

// C19: with the network off (the default), lookups and connections fail at
// once, and the metadata address cannot be reached. Depending on the
// server, a sandbox has loopback only or a link whose every packet the
// host's egress rejects (plain HTTP gets a 403 that explains why); either
// way nothing leaves the host, and curl -f fails.
func caseNetworkOff(t *testing.T, b *box) {
	for _, c := range []struct {
		cmd string
		max time.Duration
	}{
		{"getent hosts example.com", time.Second},
		{"curl -sS -m 20 https://example.com", 2 * time.Second},
		{"curl -fsS -m 20 http://example.com/", 2 * time.Second},
		{"curl -fsS -m 20 http://169.254.169.254/latest/meta-data/", 2 * time.Second},
		{"curl -sS -m 20 https://169.254.169.254/", 2 * time.Second},
		{"timeout 20 bash -c 'echo > /dev/tcp/169.254.169.254/8080'", 2 * time.Second},
		{"timeout 20 bash -c 'echo > /dev/tcp/93.184.215.14/22'", 2 * time.Second},
	} {
		res, took := b.shT(c.cmd, 30)
		if res.ExitCode == 0 || took > c.max {
			t.Errorf("%q: exit %d after %v (want failure within %v): %q %q", c.cmd, res.ExitCode, took, c.max, res.Stdout, res.Stderr)
		}
	}
	// Loopback works.
	res := b.mustOK(`python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & for i in $(seq 50); do curl -sf -o /dev/null http://127.0.0.1:8000/ && echo 200 && break; sleep 0.1; done; kill %1`)
	if res.Stdout != "200\n" {
		t.Errorf("loopback server: %+v", res)
	}
}

// C20: pipelines end by SIGPIPE as under Linux, and none hangs. gVisor
// can lose a pipe wakeup and leave `seq | grep >/dev/null` asleep for good
// (about one run in a few hundred under load); the agent kicks such a
// pipeline after 2 s, so 50 runs finish well within their timeout.
func casePipelines(t *testing.T, b *box) {
	res, took := b.shT("cat /dev/urandom | fold -w 32 | head -n 1 >/dev/null; echo done", 10)
	if res.Stdout != "done\n" || took > time.Second {
		t.Errorf("urandom pipeline: %+v after %v", res, took)
	}
	if res := b.sh("bash -c 'set -o pipefail; yes | head -n 0; echo rc=$?'"); res.Stdout != "rc=141\n" {
		t.Errorf("pipefail: %+v", res)
	}
	// The kicker stops and continues an idle pipeline too (sleep | cat,
	// after about 4 s). sudo, like a job-control shell, stops itself when
	// it sees its command stopped; were the pipeline's parents not stopped
	// and continued with it, sudo would stay stopped, and gVisor would
	// hang up its whole process group (orphaned, with a stopped member)
	// when a process in it exited: exit 129, as `sudo apt-get` once did.
	if res, took := b.shT("sudo sh -c 'sleep 7 | cat; echo piped'; echo rc=$?", 30); res.Stdout != "piped\nrc=0\n" || took > 15*time.Second {
		t.Errorf("an idle pipeline under sudo: %+v after %v", res, took)
	}
	for range 5 {
		res, took := b.shT("for i in $(seq 10); do seq 1 200000 | grep -x 5 >/dev/null || echo FAIL; done", 30)
		if res.ExitCode != 0 || res.Stdout != "" || took > 15*time.Second {
			t.Errorf("seq | grep: %+v after %v", res, took)
		}
	}
}

// C21: concurrent execs on one sandbox keep their own results.
func caseParallelExecs(t *testing.T, b *box) {
	const n = 20
	results := make([]agentapi.ExecResult, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		wg.Go(func() {
			results[i] = b.sh(fmt.Sprintf(`i=%d; echo start-$i; sleep 0.$((RANDOM%%5+4)); echo end-$i >&2; exit $((i%%5))`, i))
		})
	}
	wg.Wait()
	took := time.Since(t0)
	for i, res := range results {
		if res.Stdout != fmt.Sprintf("start-%d\n", i) || res.Stderr != fmt.Sprintf("end-%d\n", i) || res.ExitCode != i%5 {
			t.Errorf("exec %d: %+v", i, res)
		}
	}
	t.Logf("%d parallel execs in %v", n, took)
	// Each sleeps 0.4 to 0.8 s: run in parallel they take about 1 s on a
	// quiet host, one after another at least 8 s. Only the serialisation is
	// a failure; a loaded host may make them slow.
	if took > 6*time.Second {
		t.Errorf("%d parallel execs took %v: they ran one after another (about 1 s in parallel, at least 8 s serially)", n, took)
	}
}

// upload PUTs size bytes of a seeded stream to path without holding them,
// chunked unless withLength, and returns the status, body and sha256.
func (b *box) upload(path string, size int64, withLength bool) (int, []byte, string) {
	t := b.e.t
	t.Helper()
	h := sha256.New()
	src := io.TeeReader(io.LimitReader(rand.NewChaCha8([32]byte{byte(size)}), size), h)
	req, err := http.NewRequest("PUT", b.e.http.URL+b.path("files?path="+path), src)
	if err != nil {
		t.Fatal(err)
	}
	if withLength {
		req.ContentLength = size
	} else {
		req.ContentLength = -1
	}
	req.Header.Set("Authorization", "Bearer "+b.e.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("upload %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body, hex.EncodeToString(h.Sum(nil))
}

// C13: large files stream through the API; over the cap nothing is kept.
func TestC13LargeFiles(t *testing.T) {
	b := newBox(t, api.CreateSandboxRequest{DiskMiB: 3072})
	for _, mib := range []int64{31, 33, 100, 1024} {
		stop := heapWatch()
		t0 := time.Now()
		status, body, sum := b.upload("big.bin", mib<<20, mib != 33)
		took := time.Since(t0)
		peak := stop()
		if status != http.StatusOK {
			t.Fatalf("%d MiB: %d %s", mib, status, body)
		}
		res := b.exec(agentapi.ExecRequest{Command: "stat -c %s big.bin; sha256sum big.bin", TimeoutSeconds: 60})
		if want := fmt.Sprintf("%d\n%s  big.bin\n", mib<<20, sum); res.Stdout != want {
			t.Errorf("%d MiB inside: %q, want %q", mib, res.Stdout, want)
		}
		t.Logf("%d MiB uploaded in %v; server heap peak %d MiB", mib, took, peak>>20)
		if peak > 200<<20 {
			t.Errorf("%d MiB: server heap peaked at %d MiB; uploads must stream", mib, peak>>20)
		}
		if mib == 100 {
			// Downloads stream too and return the same bytes.
			req, _ := http.NewRequest("GET", b.e.http.URL+b.path("files?path=big.bin"), nil)
			req.Header.Set("Authorization", "Bearer "+b.e.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			n, _ := io.Copy(h, resp.Body)
			resp.Body.Close()
			if got := hex.EncodeToString(h.Sum(nil)); got != sum || n != mib<<20 {
				t.Errorf("download: %d bytes, sha256 %s, want %s", n, got, sum)
			}
		}
		b.mustOK("rm big.bin")
	}

	// Over the cap (a server with a small one): 413 both when the length is
	// declared and when a chunked body runs over, and no file or temporary
	// file is left.
	small := newBox(t, api.CreateSandboxRequest{}, withMaxUpload(4<<20))
	for _, withLength := range []bool{true, false} {
		status, body, _ := small.upload("over/cap.bin", 5<<20, withLength)
		if status != http.StatusRequestEntityTooLarge || errorCode(t, body) != "too_large" {
			t.Errorf("over the cap (length %v): %d %s", withLength, status, body)
		}
		if res := small.sh("ls -A /workspace"); res.Stdout != "" {
			t.Errorf("over the cap (length %v) left %q", withLength, res.Stdout)
		}
	}
	if status, body, _ := small.upload("at/cap.bin", 4<<20, false); status != http.StatusOK {
		t.Errorf("at the cap: %d %s", status, body)
	}
}

// C14: a fork bomb ends at its timeout, the sandbox recovers within
// seconds, and other sandboxes stay responsive meanwhile. Besides the
// shell's bomb (whose processes give up when fork fails) a bomb that retries
// forever checks that the agent kills it rather than waiting it out.
func TestC14ForkBomb(t *testing.T) {
	e := newEnv(t)
	bomb := &box{e: e, id: e.create(api.CreateSandboxRequest{}).ID}
	bomb.logOnFailure(t)
	other := &box{e: e, id: e.create(api.CreateSandboxRequest{}).ID}
	other.mustOK("echo warm")

	// The neighbour answers throughout.
	stop := make(chan struct{})
	done := make(chan struct{})
	var worst atomic.Int64
	var probes atomic.Int32
	var probeErr atomic.Value
	var stopOnce sync.Once
	t.Cleanup(func() { stopOnce.Do(func() { close(stop) }); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			t0 := time.Now()
			body, _ := json.Marshal(agentapi.ExecRequest{Command: "echo ok"})
			req, _ := http.NewRequest("POST", e.http.URL+other.path("exec"), bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+e.key)
			resp, err := http.DefaultClient.Do(req)
			var data []byte
			if err == nil {
				data, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			d := time.Since(t0)
			if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"stdout":"ok\n"`) {
				probeErr.Store(fmt.Sprintf("other sandbox during the bomb: %v %s", err, data))
			}
			if int64(d) > worst.Load() {
				worst.Store(int64(d))
			}
			probes.Add(1)
		}
	}()

	okWithin := func(d time.Duration) {
		t.Helper()
		var last string
		t0 := time.Now()
		for {
			status, body := e.do("POST", bomb.path("exec"), agentapi.ExecRequest{Command: "echo ok", TimeoutSeconds: 2})
			last = fmt.Sprintf("%d %s", status, body)
			if status == http.StatusOK && strings.Contains(string(body), `"stdout":"ok\n"`) {
				t.Logf("echo ok answered %v after the bomb's call returned", time.Since(t0))
				return
			}
			if time.Since(t0) > d {
				t.Fatalf("no echo ok in the bombed sandbox within %v; last answer: %s", d, last)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	gone := func(d time.Duration) {
		t.Helper()
		t0 := time.Now()
		waitFor(t, d, "the bomb's processes to be gone", func() bool {
			out := bomb.exec(agentapi.ExecRequest{Command: "ps -e --no-headers | wc -l", User: "root", TimeoutSeconds: 5}).Stdout
			n, _ := strconv.Atoi(strings.TrimSpace(out))
			return n > 0 && n <= 8
		})
		t.Logf("bomb gone %v later", time.Since(t0))
	}

	res, took := bomb.shT(":(){ :|:& };:", 10)
	t.Logf("shell bomb: exit %d timedOut %v after %v", res.ExitCode, res.TimedOut, took)
	if took > 13*time.Second {
		t.Errorf("bomb returned after %v, want by the 10 s timeout plus grace", took)
	}
	okWithin(5 * time.Second)
	gone(10 * time.Second)

	res, took = bomb.exec(agentapi.ExecRequest{TimeoutSeconds: 10, Command: `python3 -c "
import os, time
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.1)
"`}), 0
	t.Logf("retrying bomb: exit %d signal %q timedOut %v processLimitKilled %v", res.ExitCode, res.Signal, res.TimedOut, res.ProcessLimitKilled)
	// The guard kills it for the process limit, or for memory when the
	// interpreters' memory reaches the sandbox's size first.
	if !res.TimedOut && !((res.ProcessLimitKilled || res.OOMKilled) && res.ExitCode == 137) {
		t.Errorf("the retrying bomb ended neither by its timeout nor as killed by the guard: %+v", res)
	}
	okWithin(5 * time.Second)
	gone(10 * time.Second)

	stopOnce.Do(func() { close(stop) })
	<-done
	t.Logf("other sandbox: %d probes, worst %v", probes.Load(), time.Duration(worst.Load()))
	if err, _ := probeErr.Load().(string); err != "" {
		t.Error(err)
	}
	if w := time.Duration(worst.Load()); w > 2*time.Second {
		t.Errorf("other sandbox's echo took up to %v during the bombs", w)
	}
}

// C15: a command that outgrows the sandbox's memory is killed and reported
// as out of memory, with the reason on its stderr; the sandbox lives on. A
// modest command beside a hog is never the one killed (the guard kills the
// command that grew, and waits for gVisor to release a dead one's memory).
func TestC15Memory(t *testing.T) {
	b := newBox(t, api.CreateSandboxRequest{MemoryMiB: 1024})
	b.logOnFailure(t)
	res := b.mustOK("grep MemTotal /proc/meminfo; free -m | sed -n 2p")
	t.Logf("inside a 1 GiB sandbox:\n%s", res.Stdout)
	for _, cmd := range []string{
		`python3 -c "x=b'x'*(3*1024**3)"`,
		`python3 -c "
chunks = []
while True:
    chunks.append(bytearray(16 << 20))"`,
	} {
		res, took := b.shT(cmd, 60)
		t.Logf("%s: exit %d signal %q oomKilled %v after %v: %q", cmd, res.ExitCode, res.Signal, res.OOMKilled, took, res.Stderr)
		memoryError := res.ExitCode == 1 && strings.Contains(res.Stderr, "MemoryError")
		if !memoryError && !(res.OOMKilled && res.ExitCode == 137) {
			t.Errorf("%s: %+v, want MemoryError or an out-of-memory kill (137)", cmd, res)
		}
		if res.OOMKilled && !strings.Contains(res.Stderr, "withruntime: out of memory: ") {
			t.Errorf("%s: killed for memory, but its stderr does not say why: %q", cmd, res.Stderr)
		}
		t0 := time.Now()
		waitFor(t, 5*time.Second, "echo ok after the memory hog", func() bool {
			status, body := b.e.do("POST", b.path("exec"), agentapi.ExecRequest{Command: "echo ok", TimeoutSeconds: 2})
			return status == http.StatusOK && strings.Contains(string(body), `"stdout":"ok\n"`)
		})
		t.Logf("echo ok %v later", time.Since(t0))
	}
	// A background hog is killed too, and its result says why; a modest
	// command beside it is left alone.
	var p agentapi.Process
	b.e.must(http.StatusCreated, "POST", b.path("processes"),
		agentapi.ExecRequest{Command: `sleep 0.5; python3 -c "x=b'x'*(2*1024**3)"`}, &p)
	small := b.sh(`python3 -c "x=bytearray(100<<20); import time; time.sleep(3); print('small ok')"`)
	var bg agentapi.ExecResult
	b.e.must(http.StatusOK, "POST", b.path(fmt.Sprintf("processes/%d/wait?timeoutSeconds=30", p.Pid)), nil, &bg)
	if !bg.OOMKilled || bg.ExitCode != 137 || !strings.Contains(bg.Stderr, "withruntime: out of memory: ") {
		t.Errorf("background hog: %+v", bg)
	}
	if small.Stdout != "small ok\n" || small.OOMKilled {
		t.Errorf("modest neighbour: %+v", small)
	}
}

// C16: a full disk fails fast with ENOSPC, costs the host nothing, and
// frees up on rm.
func TestC16Disk(t *testing.T) {
	var before, after syscall.Statfs_t
	b := newBox(t, api.CreateSandboxRequest{DiskMiB: 256})
	if err := syscall.Statfs(b.e.dataDir, &before); err != nil {
		t.Fatal(err)
	}
	res, took := b.shT("fallocate -l 100G /workspace/big", 30)
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") || took > time.Second {
		t.Errorf("fallocate 100G: %+v after %v", res, took)
	}
	if err := syscall.Statfs(b.e.dataDir, &after); err != nil {
		t.Fatal(err)
	}
	if d := (int64(before.Bavail) - int64(after.Bavail)) * before.Bsize; d > 64<<20 {
		t.Errorf("host free space dropped by %d MiB after fallocate 100G", d>>20)
	}
	b.mustOK("echo ok")
	res, took = b.shT("head -c 300M /dev/zero > /workspace/fill", 60)
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") {
		t.Errorf("filling the disk: %+v after %v", res, took)
	}
	// The agent refuses before it has read the 8 MiB body, so the answer
	// must say Connection: close: a client reusing that connection for the
	// next request would otherwise get EOF (seen in CI).
	for range 3 {
		req, err := http.NewRequest("PUT", b.e.http.URL+b.path("files?path=more.bin"), bytes.NewReader(bytes.Repeat([]byte("x"), 8<<20)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+b.e.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInsufficientStorage || errorCode(t, body) != agentapi.CodeNoSpace {
			t.Errorf("upload onto a full disk: %d %s", resp.StatusCode, body)
		}
		if !resp.Close {
			t.Errorf("upload refused before its body was read did not answer Connection: close")
		}
		if res := b.sh("ls -A /workspace"); strings.Contains(res.Stdout, "more.bin") || strings.Contains(res.Stdout, ".upload-") {
			t.Errorf("a failed upload left %q", res.Stdout)
		}
	}
	b.mustOK("echo ok")
	b.mustOK("rm -f /workspace/big /workspace/fill; echo again > /workspace/small && cat /workspace/small")
	b.e.must(http.StatusOK, "PUT", b.path("files?path=more.bin"), bytes.Repeat([]byte("x"), 1<<20), nil)
}

// psLines lists `ps -eo pid,ppid,sid,args` lines of the sandbox whose args
// contain one of words (ps itself excluded).
func (b *box) psLines(words ...string) []string {
	b.e.t.Helper()
	res := b.exec(agentapi.ExecRequest{Argv: []string{"ps", "-eo", "pid,ppid,sid,args"}, User: "root"})
	var out []string
	for line := range strings.SplitSeq(res.Stdout, "\n") {
		for _, w := range words {
			if strings.Contains(line, w) && !strings.Contains(line, "ps -eo") {
				out = append(out, strings.TrimSpace(line))
				break
			}
		}
	}
	return out
}

// C22: a timeout or a kill ends everything the command started, daemons
// that called setsid and were re-parented to PID 1 included, whatever their
// environment; a daemon of an earlier call survives (C05).
func TestC22TimeoutKillsDaemons(t *testing.T) {
	b := newBox(t, api.CreateSandboxRequest{TimeoutSeconds: 600})
	b.logOnFailure(t)
	// A detached process of an earlier background process: it must survive
	// every unrelated timeout and kill below.
	var early agentapi.Process
	b.e.must(http.StatusCreated, "POST", b.path("processes"), agentapi.ExecRequest{Command: "setsid -f sleep 2201"}, &early)
	waitFor(t, 10*time.Second, "the earlier daemon to start", func() bool { return len(b.psLines("sleep 2201")) == 1 })

	const double = `import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(2205)
    os._exit(0)
os.wait()
time.sleep(5)`
	for _, c := range []struct {
		name  string
		req   agentapi.ExecRequest
		trace string
	}{
		{"setsid -f", agentapi.ExecRequest{Command: "setsid -f sleep 60; sleep 5"}, "sleep 60"},
		{"env -i", agentapi.ExecRequest{Command: "env -i /usr/bin/setsid -f /bin/sleep 2202; sleep 5"}, "sleep 2202"},
		{"as root", agentapi.ExecRequest{Command: "setsid -f sleep 2203; sleep 5", User: "root"}, "sleep 2203"},
		{"nohup and disown", agentapi.ExecRequest{Command: "nohup setsid sleep 2204 >/dev/null 2>&1 & disown; sleep 5"}, "sleep 2204"},
		{"python double fork", agentapi.ExecRequest{Argv: []string{"python3", "-c", double}}, "time.sleep(2205)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := b.on(t)
			c.req.TimeoutSeconds = 1
			t0 := time.Now()
			res := b.exec(c.req)
			took := time.Since(t0)
			if !res.TimedOut || res.ExitCode != agentapi.TimeoutExitCode || took > 2*time.Second {
				t.Errorf("result %+v after %v, want exit 124 after about 1 s", res, took)
			}
			if left := b.psLines(c.trace); len(left) > 0 {
				t.Errorf("left after the timeout (pid ppid sid args): %q", left)
			}
		})
	}

	t.Run("CLI exec --timeout 1s", func(t *testing.T) {
		b := b.on(t)
		buildWithruntime(t) // not timed
		t0 := time.Now()
		r := b.e.cli(nil, "sandbox", "exec", "--timeout", "1s", b.id, "--", "setsid -f sleep 2206; sleep 5")
		if took := time.Since(t0); r.code != agentapi.TimeoutExitCode || took > 3*time.Second {
			t.Errorf("CLI: exit %d after %v (stderr %q), want 124 after about 1 s", r.code, took, r.stderr)
		}
		if left := b.psLines("sleep 2206"); len(left) > 0 {
			t.Errorf("left after the CLI's timeout: %q", left)
		}
	})

	for _, c := range []struct{ name, command, trace string }{
		// The main process has exited at once; its daemon is still its.
		{"kill after exit", "setsid -f sleep 300", "sleep 300"},
		{"kill while running", "setsid -f sleep 2207; sleep 1000", "sleep 2207"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := b.on(t)
			var p agentapi.Process
			b.e.must(http.StatusCreated, "POST", b.path("processes"), agentapi.ExecRequest{Command: c.command}, &p)
			waitFor(t, 10*time.Second, "the daemon to start", func() bool { return len(b.psLines(c.trace)) == 1 })
			b.e.must(http.StatusOK, "POST", b.path(fmt.Sprintf("processes/%d/kill", p.Pid)), nil, &p)
			waitFor(t, 3*time.Second, "no "+c.trace+" left after the kill", func() bool { return len(b.psLines(c.trace)) == 0 })
		})
	}

	if left := b.psLines("sleep 2201"); len(left) != 1 {
		t.Errorf("the earlier call's daemon: %q, want it alive after the others' timeouts and kills", left)
	}
	b.e.must(http.StatusOK, "POST", b.path(fmt.Sprintf("processes/%d/kill", early.Pid)), nil, &early)
	waitFor(t, 3*time.Second, "the earlier daemon to die at its own kill", func() bool { return len(b.psLines("sleep 2201")) == 0 })
}

// C23: a 255-byte last component (NAME_MAX) is written, listed and read
// back exactly through the file API; temporary names take none of it. 256
// bytes is a 400 that names the limit.
func TestC23LongFileNames(t *testing.T) {
	b := newBox(t, api.CreateSandboxRequest{})
	for _, name := range []string{strings.Repeat("z", 255), strings.Repeat("é", 85)} {
		path := "/workspace/" + name
		data := []byte("long name " + strconv.Itoa(len(name)) + "\n")
		var fi agentapi.FileInfo
		b.e.must(http.StatusOK, "PUT", b.path("files?path="+url.QueryEscape(path)), data, &fi)
		if fi.Name != name || fi.Path != path || fi.Size != int64(len(data)) {
			t.Errorf("upload of a %d-byte name: %+v", len(name), fi)
		}
		var list agentapi.FileList
		b.e.must(http.StatusOK, "GET", b.path("files/list?path=/workspace"), nil, &list)
		listed := false
		for _, e := range list.Entries {
			listed = listed || (e.Name == name && e.Path == path)
		}
		if !listed {
			t.Errorf("the %d-byte name is not listed: %+v", len(name), list.Entries)
		}
		status, got := b.e.do("GET", b.path("files?path="+url.QueryEscape(path)), nil)
		if status != http.StatusOK || !bytes.Equal(got, data) {
			t.Errorf("read back of a %d-byte name: %d %q", len(name), status, got)
		}
		if res := b.sh("cat /workspace/" + name); res.Stdout != string(data) {
			t.Errorf("inside, the %d-byte name holds %+v", len(name), res)
		}
	}
	long := "/workspace/" + strings.Repeat("z", 256)
	status, body := b.e.do("PUT", b.path("files?path="+url.QueryEscape(long)), []byte("x"))
	if status != http.StatusBadRequest || errorCode(t, body) != agentapi.CodeBadRequest ||
		!strings.Contains(string(body), "255 bytes (NAME_MAX)") {
		t.Errorf("a 256-byte name: %d %s, want 400 naming the limit", status, body)
	}
	if res := b.sh("ls -A /workspace | grep -c upload"); res.Stdout != "0\n" {
		t.Errorf("temporary files left: %+v", res)
	}
}

// D5: file API writes never open, replace or write through a device, FIFO
// or socket (also behind a symlink): 400 at once, the node unchanged.
func TestD5FileWritesRefuseSpecialFiles(t *testing.T) {
	b := newBox(t, api.CreateSandboxRequest{})
	b.logOnFailure(t)
	res := b.exec(agentapi.ExecRequest{User: "root", Command: `mkfifo /workspace/fifo && ln -s /dev/null /workspace/to-null &&
		ln -s fifo /workspace/to-fifo && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("/workspace/sock")' &&
		echo plain > /workspace/plain`})
	if res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	const kinds = `stat -c '%n %F' /dev/null /workspace/fifo /workspace/to-null /workspace/to-fifo /workspace/sock`
	before := b.mustOK(kinds).Stdout
	for _, target := range []string{"/dev/null", "/dev/zero", "/workspace/fifo", "/workspace/to-null", "/workspace/to-fifo", "/workspace/sock"} {
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"PUT", "files?path=" + url.QueryEscape(target), []byte("data")},
			{"POST", "files/mkdir", agentapi.MkdirRequest{Path: target, Parents: true}},
			{"POST", "files/rename", agentapi.RenameRequest{From: "/workspace/plain", To: target}},
		} {
			t0 := time.Now()
			status, body := b.e.do(c.method, b.path(c.path), c.body)
			if took := time.Since(t0); status != http.StatusBadRequest || !strings.Contains(string(body), "not a regular file") || took > 2*time.Second {
				t.Errorf("%s %s onto %s: %d %s after %v, want 400 at once", c.method, c.path, target, status, body, took)
			}
		}
	}
	status, body := b.e.do("GET", b.path("files?path=/workspace/fifo"), nil)
	if status != http.StatusBadRequest {
		t.Errorf("reading a FIFO: %d %s, want 400", status, body)
	}
	if after := b.mustOK(kinds).Stdout; after != before {
		t.Errorf("special files changed:\n%s\nwas\n%s", after, before)
	}
	b.mustOK("echo x > /dev/null && cat /workspace/plain")
}

// D10: commands run only as the documented users, "user" (the default, uid
// 1000) and "root"; another account of the image is a 400 naming them.
func TestD10ExecUsers(t *testing.T) {
	b := newBox(t, api.CreateSandboxRequest{})
	for _, c := range []struct{ user, uid string }{{"", "1000"}, {"user", "1000"}, {"root", "0"}} {
		if res := b.exec(agentapi.ExecRequest{Command: "id -u", User: c.user}); res.Stdout != c.uid+"\n" {
			t.Errorf("user %q: %+v, want uid %s", c.user, res, c.uid)
		}
	}
	for _, name := range []string{"nobody", "daemon", "www-data", "Root"} {
		status, body := b.e.do("POST", b.path("exec"), agentapi.ExecRequest{Command: "id -u", User: name})
		if status != http.StatusBadRequest || errorCode(t, body) != agentapi.CodeBadRequest ||
			!strings.Contains(string(body), `\"user\"`) || !strings.Contains(string(body), `\"root\"`) {
			t.Errorf("user %q: %d %s, want 400 naming the allowed users", name, status, body)
		}
		status, body = b.e.do("POST", b.path("processes"), agentapi.ExecRequest{Command: "id -u", User: name})
		if status != http.StatusBadRequest {
			t.Errorf("background process as %q: %d %s, want 400", name, status, body)
		}
	}
}
