package withruntime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
)

// The code interpreter: notebook-style contexts (Jupyter kernels) in
// sandboxes of the "code-interpreter" template, which keep variables from
// one RunCode to the next and return charts as images.

// CodeInterpreterTemplate is the template whose sandboxes run code in
// contexts: Options{Template: CodeInterpreterTemplate}.
const CodeInterpreterTemplate = "code-interpreter"

// RunCodeOptions are RunCode's optional settings. The callbacks, when any
// is set, are called as the kernel sends output (the answer is streamed),
// from the calling goroutine.
type RunCodeOptions struct {
	// ContextID runs the code in that context; "" is the default one.
	ContextID string
	// Language is "python" (default), "javascript" ("js"), "typescript"
	// ("ts"), "r", "bash" or "java" (wire.LanguagePython...); without a ContextID
	// the cell runs in that language's default context. A language the
	// sandbox has no kernel for is ErrBadRequest.
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
