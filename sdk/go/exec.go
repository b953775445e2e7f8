package withruntime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
)

// maxEventBytes bounds one line of an exec stream.
const maxEventBytes = 64 << 20

// Exec runs a command and returns its collected result. A command that
// fails is a result, not an error: check ExecResult.ExitCode. The error is
// non-nil only when the command could not be run: ErrBadRequest (invalid
// request, such as a cwd that does not exist), ErrLeaseEnded,
// ErrSandboxStopped, a transport error, or ctx ending.
func (s *Sandbox) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return ExecResult{}, fmt.Errorf("withruntime: encoding request: %w", err)
	}
	resp, err := s.c.request(waitFor(ctx, execWait(req.TimeoutSeconds)), "POST", s.path("/exec"), bytes.NewReader(b), "application/json", "application/json")
	if err != nil {
		return ExecResult{}, err
	}
	defer resp.Body.Close()
	var res ExecResult
	if err := json.NewDecoder(newCapReader(resp.Body, maxAgentAnswerBytes)).Decode(&res); err != nil {
		return ExecResult{}, fmt.Errorf("withruntime: decoding exec result: %w", err)
	}
	return res, nil
}

// Run runs a shell command line (bash -c) with default settings; it is
// Exec(ctx, ExecRequest{Command: command}).
func (s *Sandbox) Run(ctx context.Context, command string) (ExecResult, error) {
	return s.Exec(ctx, ExecRequest{Command: command})
}

// ExecStream runs a command and yields its events as they happen: "start",
// then "stdout" and "stderr" chunks, then one "exit" event whose Result
// holds the exit code (its Stdout and Stderr are empty: the output went out
// as events). Output is not capped and the server waits for the reader, so
// a slow loop slows the command rather than losing output.
//
// When the command could not run, or the stream breaks, the last pair
// yielded has a non-nil error (an "error" event yields its event together
// with an *APIError). Breaking out of the loop closes the stream; the
// command keeps running to its end or timeout.
//
//	for ev, err := range sbx.ExecStream(ctx, req) {
//		if err != nil { return err }
//		switch ev.Type {
//		case "stdout": os.Stdout.Write(ev.Bytes())
//		case "exit": fmt.Println("exit code", ev.Result.ExitCode)
//		}
//	}
func (s *Sandbox) ExecStream(ctx context.Context, req ExecRequest) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		b, err := json.Marshal(req)
		if err != nil {
			yield(Event{}, fmt.Errorf("withruntime: encoding request: %w", err))
			return
		}
		resp, err := s.c.request(ctx, "POST", s.path("/exec"), bytes.NewReader(b), "application/json", contentTypeNDJSON)
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), maxEventBytes)
		for sc.Scan() {
			var ev Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				yield(Event{}, fmt.Errorf("withruntime: bad event in exec stream: %w", err))
				return
			}
			switch ev.Type {
			case "exit":
				if ev.Result == nil {
					yield(ev, errors.New("withruntime: exit event without a result"))
					return
				}
				yield(ev, nil)
				return
			case "error":
				e := ErrorInfo{Code: "internal", Message: "exec failed without a message"}
				if ev.Error != nil {
					e = *ev.Error
				}
				yield(ev, &APIError{Status: statusOfCode(e.Code), Code: e.Code, Message: e.Message})
				return
			case eventHeartbeat:
				continue // the server's sign of life on a quiet stream
			}
			if !yield(ev, nil) {
				return
			}
		}
		err = sc.Err()
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("withruntime: exec stream: %w", ctx.Err())
		case isTimeout(err):
			// The server went silent: its *TimeoutError says so.
		case err != nil:
			err = fmt.Errorf("withruntime: exec stream broke: %w", err)
		default:
			err = errors.New("withruntime: exec stream ended without an exit event (the sandbox may have been stopped)")
		}
		yield(Event{}, err)
	}
}

// ExecTo runs a command, copying its output to stdout and stderr (either
// may be nil to discard) as it arrives, byte for byte, and returns the
// result once it exits. Errors are those of Exec, plus a failed write.
func (s *Sandbox) ExecTo(ctx context.Context, req ExecRequest, stdout, stderr io.Writer) (ExecResult, error) {
	for ev, err := range s.ExecStream(ctx, req) {
		if err != nil {
			return ExecResult{}, err
		}
		var w io.Writer
		switch ev.Type {
		case "stdout":
			w = stdout
		case "stderr":
			w = stderr
		case "exit":
			return *ev.Result, nil
		}
		if w != nil {
			if _, err := w.Write(ev.Bytes()); err != nil {
				return ExecResult{}, fmt.Errorf("withruntime: writing %s: %w", ev.Type, err)
			}
		}
	}
	return ExecResult{}, errors.New("withruntime: exec stream ended without an exit event")
}
