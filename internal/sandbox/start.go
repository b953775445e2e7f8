package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/template"
)

// A template's start (template.Start), run by the manager in a sandbox
// through its agent: the warm image's sandbox (warm.go), or a create of a
// warm template that cannot restore the image. Everything the agent says
// comes from inside a sandbox: answers are read with a cap and what they
// print is cut before it goes into a message.

const (
	// readyPollFirst and readyPollMax are the first and the longest
	// pause between two runs of the ready check.
	readyPollFirst = 50 * time.Millisecond
	readyPollMax   = 500 * time.Millisecond
	// maxAgentAnswer caps an agent answer the manager reads whole.
	maxAgentAnswer = 1 << 20
	// startOutputTail is how much of what a start or a ready check
	// printed an error quotes (bytes, the end kept).
	startOutputTail = 2 << 10
)

// runStart runs st in the sandbox whose agent tr reaches: the default code
// context's kernel, the start command in the background, then the ready
// check until it exits 0 or st's ready timeout passes. inPlace says the
// sandbox is a create's own (not a warm image's): its kernel is then left
// to start at the first call, as in any sandbox with kernels (waiting for
// it and its imports here would only make the create slower). Errors
// wrapping errStartFailed are the template's (with the output that says
// why); others are the sandbox's or ctx's.
func runStart(ctx context.Context, tr http.RoundTripper, st *template.Start, inPlace bool) error {
	if st.Kernel && !inPlace {
		if err := configureVia(ctx, tr, agentapi.ConfigureRequest{WarmKernel: true}); err != nil {
			return err
		}
		var c agentapi.Context
		status, err := agentJSON(ctx, tr, http.MethodGet, "/contexts/"+agentapi.DefaultContextID, nil, &c)
		if err != nil {
			return err
		}
		if status != http.StatusOK || c.State != "idle" {
			return fmt.Errorf("%w: the default code context's kernel did not start (state %q, status %d); a template with kernel needs python3 with ipykernel", errStartFailed, c.State, status)
		}
	}
	pid := 0
	if st.Command != "" {
		var p agentapi.Process
		status, err := agentJSON(ctx, tr, http.MethodPost, "/processes", agentapi.ExecRequest{Command: st.Command}, &p)
		if err != nil {
			return err
		}
		if status != http.StatusCreated || p.Pid <= 0 {
			return fmt.Errorf("%w: the start command %q did not start (status %d)", errStartFailed, st.Command, status)
		}
		pid = p.Pid
	}
	if st.ReadyCommand == "" {
		return nil
	}
	return waitReady(ctx, tr, st, pid)
}

// waitReady runs st's ready check until it exits 0, the start command
// (pid, 0: none) exits with a failure, or st's ready timeout passes.
func waitReady(ctx context.Context, tr http.RoundTripper, st *template.Start, pid int) error {
	deadline := time.Now().Add(st.ReadyTimeout())
	pause := readyPollFirst
	runs := 0
	for {
		left := time.Until(deadline)
		// A run may take what is left of the timeout: a check that waits
		// (E2B's wait_for_timeout is `sleep N`) must be able to finish.
		attempt := max(left, time.Second)
		var res agentapi.ExecResult
		status, err := agentJSON(ctx, tr, http.MethodPost, "/exec",
			agentapi.ExecRequest{Command: st.ReadyCommand, TimeoutSeconds: attempt.Seconds()}, &res)
		if err != nil {
			return err
		}
		runs++
		if status == http.StatusOK && res.ExitCode == 0 {
			return nil
		}
		last := fmt.Sprintf("its last run (of %d) exited %d and printed:\n%s", runs, res.ExitCode, printed(res))
		if status != http.StatusOK {
			last = fmt.Sprintf("the sandbox refused to run it (status %d)", status)
		}
		if pid > 0 {
			var p agentapi.Process
			// A start command that exits 0 may have left a daemon behind
			// (`service x start`, a program that forks): only a failure
			// ends the wait early, as in E2B's builds.
			if status, err := agentJSON(ctx, tr, http.MethodGet, "/processes/"+strconv.Itoa(pid), nil, &p); err == nil && status == http.StatusOK && !p.Running && p.Result != nil && p.Result.ExitCode != 0 {
				return fmt.Errorf("%w: the start command %q exited %d before the ready check %q passed; it printed:\n%s\nThe ready check: %s",
					errStartFailed, st.Command, p.Result.ExitCode, st.ReadyCommand, printed(*p.Result), last)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: the ready check %q did not pass within %s (readyTimeoutSeconds); %s",
				errStartFailed, st.ReadyCommand, st.ReadyTimeout(), last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(pause, time.Until(deadline)+time.Millisecond)):
		}
		pause = min(pause*2, readyPollMax)
	}
}

// printed is the end of what a command printed, stdout then stderr, for a
// message.
func printed(r agentapi.ExecResult) string {
	out := strings.TrimSpace(r.Stdout + "\n" + r.Stderr)
	if len(out) > startOutputTail {
		out = "[...]" + strings.ToValidUTF8(out[len(out)-startOutputTail:], "")
	}
	if out == "" {
		return "(nothing)"
	}
	return out
}

// agentJSON sends one request (in as JSON, nil: no body) to an agent over
// tr and decodes a JSON answer of at most maxAgentAnswer bytes into out
// (only when it is a 2xx). It returns the answer's status.
func agentJSON(ctx context.Context, tr http.RoundTripper, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+path, body)
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAgentAnswer+1))
	if err != nil {
		return 0, err
	}
	if len(data) > maxAgentAnswer {
		return 0, fmt.Errorf("agent %s %s: the answer is over %d bytes", method, path, maxAgentAnswer)
	}
	if resp.StatusCode/100 == 2 && out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return 0, fmt.Errorf("agent %s %s: bad answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}
