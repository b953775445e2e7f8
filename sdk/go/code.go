package withruntime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// The code interpreter: notebook-style contexts (Jupyter kernels) in
// sandboxes of the "code-interpreter" template, which keep variables from
// one RunCode to the next and return charts as images.

// CodeInterpreterTemplate is the template whose sandboxes run code in
// contexts: Options{Template: CodeInterpreterTemplate}.
const CodeInterpreterTemplate = "code-interpreter"

// DefaultCodeTimeoutSeconds applies to RunCode when no timeout is given.
const DefaultCodeTimeoutSeconds = 300

// CreateContextRequest is the body of POST /contexts.
type CreateContextRequest struct {
	// Language of the kernel: "python" (default).
	Language string `json:"language,omitempty"`
	// Cwd is the kernel's working directory (default /workspace).
	Cwd string `json:"cwd,omitempty"`
	// Env adds to the sandbox's environment for the kernel's whole life.
	Env map[string]string `json:"env,omitempty"`
}

// CodeContext is a context: one kernel and the state it keeps.
type CodeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
	// State is "starting", "idle", "busy" or "dead".
	State     string    `json:"state"`
	CreatedAt time.Time `json:"createdAt"`
	// Restarts counts the kernels the context lost, with their variables.
	Restarts int `json:"restarts"`
}

// ContextList is the answer of GET /contexts.
type ContextList struct {
	Contexts []CodeContext `json:"contexts"`
}

// RunCodeRequest is the body of POST /code.
type RunCodeRequest struct {
	Code           string            `json:"code"`
	ContextID      string            `json:"contextId,omitempty"`
	Language       string            `json:"language,omitempty"`
	TimeoutSeconds float64           `json:"timeoutSeconds,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
}

// Execution is what a cell produced.
type Execution struct {
	// ContextID is the context the code ran in.
	ContextID string `json:"contextId"`
	// Results are the rich outputs, in order: the cell's value
	// (IsMainResult) and everything it displayed (charts included).
	Results []Result `json:"results"`
	// Logs are stdout and stderr, chunk by chunk.
	Logs Logs `json:"logs"`
	// Error is the exception the code raised (or TimeoutError,
	// OutOfMemoryError, KernelDied), nil if none.
	Error *ExecutionError `json:"error,omitempty"`
	// ExecutionCount is the cell's number in its kernel (In [N]).
	ExecutionCount int `json:"executionCount"`
	// TimedOut says the timeout interrupted the code.
	TimedOut bool `json:"timedOut,omitempty"`
	// OutOfMemory says the kernel was killed for the sandbox's memory.
	OutOfMemory bool `json:"outOfMemory,omitempty"`
	// StateLost says the kernel was lost during this call: the context's
	// variables are gone.
	StateLost bool `json:"stateLost,omitempty"`
	// Restarted says this call ran in a new kernel because the previous one
	// was lost: variables from earlier calls are gone (see Notice).
	Restarted bool `json:"restarted,omitempty"`
	// Notice is a plain sentence about a lost or restarted kernel.
	Notice string `json:"notice,omitempty"`
	// LogsTruncated and ResultsTruncated say a cap cut the collected output.
	LogsTruncated    bool `json:"logsTruncated,omitempty"`
	ResultsTruncated bool `json:"resultsTruncated,omitempty"`
	// DurationMs is the call's wall time in milliseconds.
	DurationMs int64 `json:"durationMs"`
}

// Text is the text/plain of the main result (the cell's value), "" if the
// cell had none.
func (e *Execution) Text() string {
	for _, r := range e.Results {
		if r.IsMainResult {
			return r.Text()
		}
	}
	return ""
}

// Stdout is the stdout chunks joined.
func (e *Execution) Stdout() string { return strings.Join(e.Logs.Stdout, "") }

// Stderr is the stderr chunks joined.
func (e *Execution) Stderr() string { return strings.Join(e.Logs.Stderr, "") }

// Logs are the text a cell printed.
type Logs struct {
	Stdout []string `json:"stdout"`
	Stderr []string `json:"stderr"`
}

// Result is one rich output, a MIME bundle.
type Result struct {
	// Data maps a MIME type to the output: text as JSON strings, images as
	// base64 strings, application/json as JSON.
	Data         map[string]json.RawMessage `json:"data"`
	Metadata     map[string]json.RawMessage `json:"metadata,omitempty"`
	IsMainResult bool                       `json:"isMainResult"`
}

// String is the MIME type's text ("" if absent or not a string).
func (r Result) String(mime string) string {
	var s string
	if raw, ok := r.Data[mime]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// Text is the text/plain representation.
func (r Result) Text() string { return r.String("text/plain") }

// HTML is the text/html representation.
func (r Result) HTML() string { return r.String("text/html") }

// Markdown is the text/markdown representation.
func (r Result) Markdown() string { return r.String("text/markdown") }

// SVG is the image/svg+xml representation.
func (r Result) SVG() string { return r.String("image/svg+xml") }

// PNG is the image/png representation, decoded (nil if absent or not
// base64).
func (r Result) PNG() []byte { return r.image("image/png") }

// JPEG is the image/jpeg representation, decoded.
func (r Result) JPEG() []byte { return r.image("image/jpeg") }

func (r Result) image(mime string) []byte {
	s := strings.Map(func(c rune) rune {
		if c == '\n' || c == '\r' || c == ' ' {
			return -1
		}
		return c
	}, r.String(mime))
	if s == "" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

// JSON is the application/json representation, raw.
func (r Result) JSON() json.RawMessage { return r.Data["application/json"] }

// Formats lists the result's MIME types.
func (r Result) Formats() []string {
	out := make([]string, 0, len(r.Data))
	for k := range r.Data {
		out = append(out, k)
	}
	return out
}

// ExecutionError is an exception the code raised, or why the call failed.
type ExecutionError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

func (e *ExecutionError) Error() string { return e.Name + ": " + e.Value }

// CodeEvent is one line of a streamed /code answer.
type CodeEvent struct {
	Type      string          `json:"type"`
	ContextID string          `json:"contextId,omitempty"`
	Text      string          `json:"text,omitempty"`
	Result    *Result         `json:"result,omitempty"`
	Error     *ExecutionError `json:"error,omitempty"`
	Execution *Execution      `json:"execution,omitempty"`
}

// RunCodeOptions are RunCode's optional settings. The callbacks, when any
// is set, are called as the kernel sends output (the answer is streamed),
// from the calling goroutine.
type RunCodeOptions struct {
	// ContextID runs the code in that context; "" is the default one.
	ContextID string
	// Language is "python" (default).
	Language string
	// TimeoutSeconds interrupts the code (keeping the context); 0 is
	// DefaultCodeTimeoutSeconds.
	TimeoutSeconds float64
	// Env is set in the kernel for this call only.
	Env map[string]string

	OnStdout func(text string)
	OnStderr func(text string)
	OnResult func(Result)
	OnError  func(ExecutionError)
}

// RunCode runs code in a context of the sandbox (a "code-interpreter"
// sandbox; others answer ErrNotImplemented) and returns what it produced.
// An exception in the code is not an error: it is in Execution.Error. The
// error is for a call that could not run: ErrNotFound (no such context),
// ErrBadRequest, ErrNotImplemented, ErrLeaseEnded, a transport error, or
// ctx ending (which interrupts the code).
//
//	ex, err := sbx.RunCode(ctx, "import pandas as pd; pd.DataFrame({'a': [1, 2]})", nil)
//	fmt.Println(ex.Text())
func (s *Sandbox) RunCode(ctx context.Context, code string, opts *RunCodeOptions) (*Execution, error) {
	var o RunCodeOptions
	if opts != nil {
		o = *opts
	}
	req := RunCodeRequest{Code: code, ContextID: o.ContextID, Language: o.Language, TimeoutSeconds: o.TimeoutSeconds, Env: o.Env}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("withruntime: encoding request: %w", err)
	}
	streamed := o.OnStdout != nil || o.OnStderr != nil || o.OnResult != nil || o.OnError != nil
	accept := "application/json"
	if streamed {
		accept = contentTypeNDJSON
	}
	timeout := o.TimeoutSeconds
	if timeout <= 0 {
		timeout = DefaultCodeTimeoutSeconds
	}
	// The answer's headers come once a kernel has started (and, collected,
	// once the cell has run).
	wait := kernelWait
	if !streamed {
		wait += seconds(timeout)
	}
	resp, err := s.c.request(waitFor(ctx, wait), "POST", s.path("/code"), bytes.NewReader(b), "application/json", accept)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if !streamed {
		var ex Execution
		if err := json.NewDecoder(resp.Body).Decode(&ex); err != nil {
			return nil, fmt.Errorf("withruntime: decoding the execution: %w", err)
		}
		return &ex, nil
	}
	ex := &Execution{Results: []Result{}, Logs: Logs{Stdout: []string{}, Stderr: []string{}}}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEventBytes)
	for sc.Scan() {
		var ev CodeEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("withruntime: bad event in code stream: %w", err)
		}
		switch ev.Type {
		case "start":
			ex.ContextID = ev.ContextID
		case "stdout":
			ex.Logs.Stdout = append(ex.Logs.Stdout, ev.Text)
			if o.OnStdout != nil {
				o.OnStdout(ev.Text)
			}
		case "stderr":
			ex.Logs.Stderr = append(ex.Logs.Stderr, ev.Text)
			if o.OnStderr != nil {
				o.OnStderr(ev.Text)
			}
		case "result":
			if ev.Result != nil {
				ex.Results = append(ex.Results, *ev.Result)
				if o.OnResult != nil {
					o.OnResult(*ev.Result)
				}
			}
		case "error":
			if ev.Error != nil {
				ex.Error = ev.Error
				if o.OnError != nil {
					o.OnError(*ev.Error)
				}
			}
		case "end":
			if ev.Execution == nil {
				return nil, errors.New("withruntime: end event without an execution")
			}
			end := *ev.Execution
			end.Results, end.Logs = ex.Results, ex.Logs
			if end.Error == nil {
				end.Error = ex.Error
			}
			return &end, nil
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("withruntime: code stream: %w", ctx.Err())
	}
	if err := sc.Err(); err != nil {
		if isTimeout(err) {
			return nil, err
		}
		return nil, fmt.Errorf("withruntime: code stream broke: %w", err)
	}
	return nil, errors.New("withruntime: code stream ended without an end event (the sandbox may have been stopped)")
}

// CreateContext starts a new context (a kernel with its own variables) and
// returns it once it is ready.
func (s *Sandbox) CreateContext(ctx context.Context, req CreateContextRequest) (CodeContext, error) {
	var c CodeContext
	err := s.c.doJSON(waitFor(ctx, kernelWait), "POST", s.path("/contexts"), req, &c)
	return c, err
}

// ListContexts lists the sandbox's contexts, oldest first.
func (s *Sandbox) ListContexts(ctx context.Context) ([]CodeContext, error) {
	var l ContextList
	if err := s.c.doJSON(ctx, "GET", s.path("/contexts"), nil, &l); err != nil {
		return nil, err
	}
	return l.Contexts, nil
}

// RestartContext gives the context a new kernel (its variables are lost).
func (s *Sandbox) RestartContext(ctx context.Context, id string) (CodeContext, error) {
	var c CodeContext
	err := s.c.doJSON(waitFor(ctx, kernelWait), "POST", s.path("/contexts/"+url.PathEscape(id)+"/restart"), nil, &c)
	return c, err
}

// DeleteContext stops the context's kernel and forgets it.
func (s *Sandbox) DeleteContext(ctx context.Context, id string) error {
	return s.c.doJSON(ctx, "DELETE", s.path("/contexts/"+url.PathEscape(id)), nil, nil)
}
