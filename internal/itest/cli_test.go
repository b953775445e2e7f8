package itest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/api"
)

// The CLI tests run the withruntime binary against a test server
// (WITHRUNTIME_URL), as a user at a shell would.

// cliCmd is a withruntime command talking to e's server. Its stdin is
// /dev/null unless the test sets it.
func (e *env) cliCmd(args ...string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(buildWithruntime(e.t), args...)
	cmd.Env = append(os.Environ(), "WITHRUNTIME_URL="+e.http.URL, "WITHRUNTIME_API_KEY="+e.key)
	return cmd
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// cli runs a withruntime command to its end with stdin as its stdin (nil:
// /dev/null).
func (e *env) cli(stdin io.Reader, args ...string) cliResult {
	e.t.Helper()
	cmd := e.cliCmd(args...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		e.t.Fatalf("withruntime %v: %v", args, err)
	}
	return cliResult{cmd.ProcessState.ExitCode(), out.String(), errb.String()}
}

// allSandboxes lists the server's sandboxes, stopped ones too.
func (e *env) allSandboxes() []api.Sandbox {
	e.t.Helper()
	var list api.SandboxList
	e.must(http.StatusOK, "GET", "/v1/sandboxes", nil, &list)
	return list.Sandboxes
}

// startCLI starts a withruntime command whose first line of stdout is
// awaited (the command in the sandbox is running then). It returns the
// process and its stderr so far, collected until exit.
func (e *env) startCLI(firstLine string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	e.t.Helper()
	cmd := e.cliCmd(args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
		io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		if strings.TrimSpace(l) != firstLine {
			cmd.Process.Kill()
			cmd.Wait()
			e.t.Fatalf("withruntime %v: first line %q, want %q; stderr: %s", args, l, firstLine, errb.String())
		}
	case <-time.After(60 * time.Second):
		e.t.Fatalf("withruntime %v: no output after 60s; stderr: %s", args, errb.String())
	}
	return cmd, &errb
}

// waitExit waits for cmd to exit and returns its exit code.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("withruntime did not exit within 60s")
	}
	return cmd.ProcessState.ExitCode()
}

// TestCLIRunSignals: `sandbox run` destroys its sandbox when a signal stops
// it, and exits 128+N as a program killed by signal N.
func TestCLIRunSignals(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		sig  syscall.Signal
		code int
		msg  string
	}{
		{syscall.SIGINT, 130, "withruntime: interrupted; sandbox destroyed"},
		{syscall.SIGTERM, 143, "withruntime: terminated (SIGTERM); sandbox destroyed"},
		{syscall.SIGHUP, 129, "withruntime: hung up (SIGHUP); sandbox destroyed"},
	} {
		cmd, stderr := e.startCLI("started", "sandbox", "run", "--", "echo started; sleep 100")
		if n := len(e.running()); n != 1 {
			t.Fatalf("%d sandboxes running, want 1", n)
		}
		cmd.Process.Signal(c.sig)
		if code := waitExit(t, cmd); code != c.code {
			t.Errorf("%v: exit %d, want %d; stderr: %s", c.sig, code, c.code, stderr)
		}
		if strings.TrimSpace(stderr.String()) != c.msg {
			t.Errorf("%v: stderr %q, want %q", c.sig, stderr, c.msg)
		}
		if sbs := e.running(); len(sbs) != 0 {
			t.Fatalf("%v: sandbox %s left running", c.sig, sbs[0].ID)
		}
	}
	for _, sb := range e.allSandboxes() {
		if sb.EndReason != "deleted" {
			t.Errorf("sandbox %s ended %q, want deleted", sb.ID, sb.EndReason)
		}
	}
}

// TestCLIRunClosedStdout: when the reader of `sandbox run`'s stdout goes
// away (`withruntime sandbox run -- yes | head -2`), run destroys the
// sandbox and exits 141, silently, as a program killed by SIGPIPE.
func TestCLIRunClosedStdout(t *testing.T) {
	e := newEnv(t)
	cmd := e.cliCmd("sandbox", "run", "--", "yes")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	br := bufio.NewReader(r)
	for i := 0; i < 2; i++ {
		if l, err := br.ReadString('\n'); l != "y\n" {
			t.Fatalf("line %d: %q, %v; stderr: %s", i, l, err, stderr.String())
		}
	}
	r.Close()
	if code := waitExit(t, cmd); code != 141 {
		t.Errorf("exit %d, want 141; stderr: %s", code, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr %q, want none", stderr.String())
	}
	if sbs := e.running(); len(sbs) != 0 {
		t.Fatalf("sandbox %s left running", sbs[0].ID)
	}
	if sbs := e.allSandboxes(); len(sbs) != 1 || sbs[0].EndReason != "deleted" {
		t.Fatalf("sandboxes: %+v", sbs)
	}
}

// TestCLIStdin: run and exec give the command the CLI's stdin when it is a
// pipe or a file, and refuse what the API cannot carry before creating a
// sandbox.
func TestCLIStdin(t *testing.T) {
	e := newEnv(t)
	if r := e.cli(strings.NewReader("hello\nworld\n"), "sandbox", "run", "--", "cat"); r.code != 0 || r.stdout != "hello\nworld\n" {
		t.Fatalf("run cat: %+v", r)
	}
	// A few MiB of text with the characters JSON may escape, from a file.
	text := strings.Repeat("<a href=\"x\">&amp;</a>\t\\ é\n", 100_000)
	f, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(text)
	f.Seek(0, io.SeekStart)
	defer f.Close()
	if r := e.cli(f, "sandbox", "run", "--", "sha256sum"); r.code != 0 || !strings.HasPrefix(r.stdout, sha256hex(text)) {
		t.Fatalf("run sha256sum of %d bytes: %+v (want %s)", len(text), r, sha256hex(text))
	}
	// No stdin (/dev/null), and --no-stdin: the command reads end-of-file.
	if r := e.cli(nil, "sandbox", "run", "--", "wc -c"); r.code != 0 || strings.TrimSpace(r.stdout) != "0" {
		t.Fatalf("run with /dev/null stdin: %+v", r)
	}
	if r := e.cli(strings.NewReader("ignored"), "sandbox", "run", "--no-stdin", "--", "wc -c"); r.code != 0 || strings.TrimSpace(r.stdout) != "0" {
		t.Fatalf("run --no-stdin: %+v", r)
	}

	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 300})
	if r := e.cli(strings.NewReader("6*7\n"), "sandbox", "exec", sb.ID, "--", "python3", "-c", "print(eval(input()))"); r.code != 0 || r.stdout != "42\n" {
		t.Fatalf("exec: %+v", r)
	}

	before := len(e.allSandboxes())
	if r := e.cli(strings.NewReader("a\xffb"), "sandbox", "run", "--", "cat"); r.code != 125 || !strings.Contains(r.stderr, "stdin is not UTF-8 text") || r.stdout != "" {
		t.Errorf("run with non-UTF-8 stdin: %+v", r)
	}
	if r := e.cli(strings.NewReader("a\xffb"), "sandbox", "exec", sb.ID, "--", "cat"); r.code != 125 || !strings.Contains(r.stderr, "stdin is not UTF-8 text") {
		t.Errorf("exec with non-UTF-8 stdin: %+v", r)
	}
	big := io.LimitReader(neverEnding('x'), 16<<20+1)
	if r := e.cli(big, "sandbox", "run", "--", "wc -c"); r.code != 125 || !strings.Contains(r.stderr, "stdin is more than 16 MiB") {
		t.Errorf("run with 16 MiB + 1 of stdin: %+v", r)
	}
	if n := len(e.allSandboxes()); n != before {
		t.Errorf("refused stdin created %d sandboxes", n-before)
	}
	if sbs := e.running(); len(sbs) != 1 || sbs[0].ID != sb.ID {
		t.Errorf("running: %+v", sbs)
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// TestCLILeaseEnd: when the lease ends while run or exec streams a command,
// the CLI says so and exits 124.
func TestCLILeaseEnd(t *testing.T) {
	e := newEnv(t)
	r := e.cli(nil, "sandbox", "run", "--timeout", "3s", "--", "echo start; sleep 100")
	if r.code != 124 || r.stdout != "start\n" ||
		strings.TrimSpace(r.stderr) != "withruntime: the sandbox's lease ended after 3s (--timeout); give a longer --timeout" {
		t.Errorf("run: %+v", r)
	}
	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 3})
	r = e.cli(nil, "sandbox", "exec", sb.ID, "--", "sleep 100")
	if want := "withruntime: sandbox " + sb.ID + "'s lease ended and it was stopped; create one with a longer --timeout"; r.code != 124 || strings.TrimSpace(r.stderr) != want {
		t.Errorf("exec: %+v", r)
	}
	if sbs := e.running(); len(sbs) != 0 {
		t.Errorf("running: %+v", sbs)
	}
}

// TestCLIExecInterrupt: Ctrl-C on `sandbox exec` kills the command, leaves
// the sandbox running and exits 130.
func TestCLIExecInterrupt(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 300})
	cmd, stderr := e.startCLI("started", "sandbox", "exec", sb.ID, "--", "echo started; exec sleep 100")
	cmd.Process.Signal(os.Interrupt)
	if code := waitExit(t, cmd); code != 130 {
		t.Errorf("exit %d, want 130; stderr: %s", code, stderr)
	}
	if want := "withruntime: interrupted; the command was killed (sandbox " + sb.ID + " keeps running)"; strings.TrimSpace(stderr.String()) != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	if sbs := e.running(); len(sbs) != 1 {
		t.Fatalf("running: %+v", sbs)
	}
	waitFor(t, 10*time.Second, "the command to be killed", func() bool {
		return strings.TrimSpace(e.sh(sb.ID, "ps -eo comm | grep -c '^sleep$' || true").Stdout) == "0"
	})
}

// TestCLIMessages: errors the CLI words itself.
func TestCLIMessages(t *testing.T) {
	e := newEnv(t)
	cmd := e.cliCmd("sandbox", "ls")
	cmd.Env = append(cmd.Env, "WITHRUNTIME_API_KEY=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != 125 || !strings.Contains(stderr.String(), "withruntime: missing API key: set WITHRUNTIME_API_KEY") {
		t.Errorf("no API key: %v: %s", err, stderr.String())
	}
	if r := e.cli(nil, "sandbox", "exec", "sbx_any", "--", ""); r.code != 125 || !strings.Contains(r.stderr, "the command after -- is empty") {
		t.Errorf("exec of an empty command: %+v", r)
	}
	if r := e.cli(nil, "sandbox", "run", "--", ""); r.code != 125 || !strings.Contains(r.stderr, "the command after -- is empty") {
		t.Errorf("run of an empty command: %+v", r)
	}
	if n := len(e.allSandboxes()); n != 0 {
		t.Errorf("%d sandboxes created", n)
	}
}

// TestCLIRunInterruptedCreate: a Ctrl-C while run's (or create's) sandbox
// is being created still destroys it (the create finishes on the server
// regardless), since nobody will have its id.
func TestCLIRunInterruptedCreate(t *testing.T) {
	for _, args := range [][]string{{"sandbox", "run", "--", "sleep 100"}, {"sandbox", "create"}} {
		t.Run(args[1], func(t *testing.T) { interruptCreate(t, args...) })
	}
}

func interruptCreate(t *testing.T, args ...string) {
	e := newEnv(t)
	cmd := e.cliCmd(args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var state string
	waitFor(t, 30*time.Second, "the create to reach the server", func() bool {
		if sbs := e.allSandboxes(); len(sbs) > 0 {
			state = sbs[0].State
			return true
		}
		return false
	})
	cmd.Process.Signal(os.Interrupt)
	if code := waitExit(t, cmd); code != 130 {
		t.Errorf("exit %d, want 130; stderr: %s", code, stderr.String())
	}
	sbs := e.allSandboxes()
	if len(sbs) != 1 || sbs[0].State != "stopped" || sbs[0].EndReason != "deleted" {
		t.Fatalf("interrupted in state %s; sandboxes now: %+v", state, sbs)
	}
	t.Logf("interrupted while the sandbox was %s; stderr: %s", state, stderr.String())
}
