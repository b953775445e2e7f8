package itest

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
	withruntime "withruntime.dev/runtime/sdk/go"
)

// Every client bounds its waits (issue 24, F11): a server that accepted the
// connection and stopped answering is an error that names it and the
// seconds waited, and a quiet command is not mistaken for one (heartbeats).

// TestCLIStoppedServer: with `withruntime serve` stopped by SIGSTOP (the
// kernel still accepts connections for it), `withruntime sandbox ls` fails
// within WITHRUNTIME_RESPONSE_TIMEOUT, naming the server and the seconds.
func TestCLIStoppedServer(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "wr-stopped-")
	if err != nil {
		t.Fatal(err)
	}
	var names server.EgressConfig
	server.EgressNames(&names, dir)
	t.Cleanup(func() { sweep(t, dir, names); os.RemoveAll(dir) })
	s := startServe(t, dir)
	if r := s.cli(nil, "sandbox", "ls"); r.code != 0 {
		t.Fatalf("sandbox ls on a live server: %d %s", r.code, r.stderr)
	}
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
		s.stop()
	}()

	cmd := s.cliCmd("sandbox", "ls")
	cmd.Env = append(cmd.Env, "WITHRUNTIME_RESPONSE_TIMEOUT=3")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	code := waitExit(t, cmd)
	took := time.Since(start)
	t.Logf("after %s, exit %d: %s", took.Round(time.Millisecond), code, stderr.String())
	if code == 0 {
		t.Fatal("sandbox ls succeeded against a stopped server")
	}
	if took < 3*time.Second || took > 15*time.Second {
		t.Errorf("failed after %s, want about 3 s", took)
	}
	for _, want := range []string{s.http.URL, "within 3 s", "WITHRUNTIME_RESPONSE_TIMEOUT"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
}

// TestCLIQuietCommand: a command silent for 20 s, streamed with an idle
// bound of 5 s, runs to its end: the heartbeats keep the stream alive.
func TestCLIQuietCommand(t *testing.T) {
	e := newEnv(t)
	cmd := e.cliCmd("sandbox", "run", "--", "sleep 20; echo done")
	cmd.Env = append(cmd.Env, "WITHRUNTIME_IDLE_TIMEOUT=5")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 || stdout.String() != "done\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout.String(), stderr.String())
	}
}

// TestStalledAgent: root inside a sandbox puts a listener of its own that
// never answers where the agent's socket was. An exec the server sends to
// it (on a new connection to the agent) is a 504 agent_timeout once the
// exec's own timeout and the server's grace (30 s) are over, not a
// request held until the lease ends.
func TestStalledAgent(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	e.plant(sb.ID, `setsid python3 -c 'import socket, time
s = socket.socket(socket.AF_UNIX); s.bind("agent.sock"); s.listen(64)
held = []
while True: held.append(s.accept())' </dev/null >/dev/null 2>&1 & sleep 0.5`)
	// Several at once: an idle pooled connection to the real agent may
	// take one; the others dial the silent listener.
	const n = 4
	outs := make(chan outcome, n)
	start := time.Now()
	for range n {
		go func() {
			outs <- e.try("POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Command: "true", TimeoutSeconds: 1})
		}()
	}
	stalled := 0
	for range n {
		o := <-outs
		if o.status == http.StatusOK {
			continue
		}
		stalled++
		if o.status != http.StatusGatewayTimeout || errorCode(t, o.body) != "agent_timeout" || !strings.Contains(string(o.body), "within 31 s") {
			t.Errorf("exec on the stalled channel: %s, want 504 agent_timeout", o)
		}
		if o.took > 45*time.Second {
			t.Errorf("the answer took %s", o.took)
		}
	}
	if stalled == 0 {
		t.Fatal("no exec reached the silent listener")
	}
	t.Logf("%d of %d execs reached the silent listener; answered after %s", stalled, n, time.Since(start).Round(time.Second))
}

// TestSDKQuietStream: the Go SDK with an idle bound of 5 s streams a
// command silent for 12 s to its end (heartbeats, which it never yields),
// and a collected exec longer than its response timeout gets its answer
// (the bound adds the exec's own timeout).
func TestSDKQuietStream(t *testing.T) {
	e := newEnv(t)
	c, err := withruntime.NewClient(withruntime.WithBaseURL(e.http.URL), withruntime.WithAPIKey(e.key),
		withruntime.WithIdleTimeout(5*time.Second), withruntime.WithResponseTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sbx, err := c.Create(ctx, withruntime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Close()
	var out strings.Builder
	res, err := sbx.ExecTo(ctx, withruntime.ExecRequest{Command: "sleep 12; echo done"}, &out, nil)
	if err != nil || res.ExitCode != 0 || out.String() != "done\n" {
		t.Fatalf("quiet stream: %+v %v %q", res, err, out.String())
	}
	res, err = sbx.Exec(ctx, withruntime.ExecRequest{Command: "sleep 8; echo late", TimeoutSeconds: 30})
	if err != nil || res.Stdout != "late\n" {
		t.Fatalf("collected exec longer than the response timeout: %+v %v", res, err)
	}
}
