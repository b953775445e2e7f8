package api

// A create with a first command (POST /v1/sandboxes with "exec"): the
// sandbox is created as by a plain create (cold or from the warm pool),
// then the server sends the command to its agent at once (POST /exec) and
// the command's answer follows the sandbox in the same response: one
// request instead of two, and no client round trip between them.
//
// (Handing the command to the agent at boot, so that it started before the
// agent even answered, was built and measured: on a one-vCPU sandbox the
// command then ran while the sandbox was still settling and the first
// output came no sooner, 252 vs 285 ms median on a quiet host; see
// bench/README.md.)
//
// Everything the agent answers is untrusted (root inside the sandbox may
// have replaced the agent by the time the answer comes): a stream is read line by
// line, each line bounded, decoded as an agentapi.Event of a known type
// and written out re-encoded, so the client's stream holds only events the
// server wrote; a collected result is decoded, bounded, into an
// agentapi.ExecResult and re-encoded.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/httpwait"
	"withruntime.dev/runtime/internal/sandbox"
)

// maxEventLineBytes bounds one line of the agent's stream. The agent reads
// a command's output in chunks of at most 32 KiB, whose event is at most
// about 6 times that (JSON escapes, and base64 besides when not UTF-8).
const maxEventLineBytes = 1 << 20

// checkFirstExec checks a create's first command as POST .../exec checks
// its body, so that bad input is refused before anything boots.
func checkFirstExec(req *agentapi.ExecRequest) error {
	er := (*execRequest)(req)
	for _, b := range er.bounds() {
		b.field = "exec." + b.field
		if err := b.check(); err != nil {
			return err
		}
	}
	if err := er.check(); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	return nil
}

// createWithExec creates the sandbox of p and runs first in it, answering
// as SandboxEvent then events (Accept: application/x-ndjson) or as
// SandboxWithResult.
func (s *Server) createWithExec(w http.ResponseWriter, r *http.Request, p sandbox.CreateParams, first *agentapi.ExecRequest) error {
	stream := wantsNDJSON(r)
	sb, err := s.cfg.Manager.Create(r.Context(), p)
	if err != nil {
		return err
	}
	out := toSandbox(sb)
	if stream {
		// The sandbox event goes out first, before the agent is asked:
		// the caller has the sandbox's id while its command runs.
		emit, ok := startCreateStream(w, out)
		if !ok {
			return nil
		}
		resp, err := s.firstRoundTrip(r, sb.ID, first, stream)
		s.relayFirstStream(r, sb.ID, emit, resp, err)
		return nil
	}
	resp, err := s.firstRoundTrip(r, sb.ID, first, stream)
	answer := SandboxWithResult{Sandbox: out}
	if err == nil {
		answer.Result, err = readFirstResult(resp, first.MaxOutputBytes)
	}
	if err != nil {
		answer.Error = s.firstError(r.Context(), sb.ID, err)
	}
	writeJSON(w, http.StatusCreated, answer)
	return nil
}

// firstRoundTrip sends the first command to the sandbox's agent (POST
// /exec, streamed or collected). A non-2xx answer is returned as an
// agentError (or an error saying it was not one).
func (s *Server) firstRoundTrip(r *http.Request, id string, first *agentapi.ExecRequest, stream bool) (*http.Response, error) {
	tr, err := s.cfg.Manager.AgentTransport(r.Context(), id)
	if err != nil {
		return nil, err
	}
	tr = s.boundAgent(tr, id) // see agentwait.go
	body, err := json.Marshal(first)
	if err != nil {
		return nil, err
	}
	bounds := httpwait.Bounds{Headers: agentQuickWait, Idle: agentIdle}
	if !stream {
		bounds.Headers = execWait(first.TimeoutSeconds)
	}
	ctx := httpwait.WithBounds(r.Context(), bounds)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/exec", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", agentapi.ContentTypeNDJSON)
	} else {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := no1xx{tr}.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, agentAnswerError(resp)
	}
	return resp, nil
}

// agentError is a refusal the agent answered (a cwd that does not exist,
// an unknown program), as the agent put it.
type agentError struct{ e agentapi.Error }

func (a *agentError) Error() string { return a.e.Message }

// agentAnswerError reads a non-2xx answer of the agent (bounded) into an
// agentError; one that is not an ErrorBody says so.
func agentAnswerError(resp *http.Response) error {
	var body agentapi.ErrorBody
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxJSONBytes))
	if json.Unmarshal(data, &body) != nil || body.Error.Code == "" || !validCode(body.Error.Code) {
		return fmt.Errorf("the sandbox's agent answered %d without an error body", resp.StatusCode)
	}
	return &agentError{body.Error}
}

// validCode reports whether an error code from the agent looks like one
// (lower-case words joined by underscores, at most 64 bytes).
func validCode(c string) bool {
	if len(c) > 64 {
		return false
	}
	for _, ch := range c {
		if (ch < 'a' || ch > 'z') && ch != '_' {
			return false
		}
	}
	return true
}

// firstError is the error event or field for a first command that did not
// give an answer: the agent's own refusal, or why the round trip failed.
func (s *Server) firstError(ctx context.Context, id string, err error) *agentapi.Error {
	var ae *agentError
	if errors.As(err, &ae) {
		e := ae.e
		return &e
	}
	if !errors.Is(err, errBadAgentAnswer) {
		err = s.forwardError(ctx, id, err)
	}
	_, code := statusOf(err)
	if isInternal(err) {
		s.cfg.Log.Error("first command", "sandbox", id, "err", err)
	}
	return &agentapi.Error{Code: code, Message: err.Error()}
}

// errBadAgentAnswer marks an answer of the agent that is not what the
// protocol says.
var errBadAgentAnswer = errors.New("the sandbox's agent sent an answer that is not the protocol's")

// readFirstResult decodes the agent's collected result, bounded by what
// the cap maxOut (0: the default) allows.
func readFirstResult(resp *http.Response, maxOut int) (*agentapi.ExecResult, error) {
	defer resp.Body.Close()
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" {
		return nil, fmt.Errorf("%w: content type %q", errBadAgentAnswer, ct)
	}
	if maxOut == 0 {
		maxOut = agentapi.DefaultMaxOutputBytes
	}
	// Each stream's text may grow 6 times in JSON escapes, and has its
	// exact bytes in base64 besides when it is not UTF-8.
	limit := int64(16*maxOut) + maxJSONBytes
	var res agentapi.ExecResult
	dec := json.NewDecoder(io.LimitReader(resp.Body, limit))
	if err := dec.Decode(&res); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadAgentAnswer, err)
	}
	return &res, nil
}

// startCreateStream starts the NDJSON answer (201) with the sandbox event
// and returns the function that writes (and flushes) each next line; ok is
// false when the client is already gone.
func startCreateStream(w http.ResponseWriter, sb Sandbox) (emit func(any) bool, ok bool) {
	w.Header().Set("Content-Type", agentapi.ContentTypeNDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusCreated)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	emit = func(v any) bool {
		return enc.Encode(v) == nil && rc.Flush() == nil
	}
	return emit, emit(SandboxEvent{Type: "sandbox", Sandbox: sb})
}

// relayFirstStream writes the agent's events (resp) with emit, checked and
// re-encoded one by one, ending with exit or error. rtErr is the round
// trip's failure, told as an error event.
func (s *Server) relayFirstStream(r *http.Request, id string, emit func(any) bool, resp *http.Response, rtErr error) {
	if resp != nil {
		defer resp.Body.Close()
	}
	fail := func(err error) {
		emit(agentapi.Event{Type: "error", Error: s.firstError(r.Context(), id, err)})
	}
	if rtErr != nil {
		fail(rtErr)
		return
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != agentapi.ContentTypeNDJSON {
		fail(fmt.Errorf("%w: content type %q", errBadAgentAnswer, ct))
		return
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := readLine(br, maxEventLineBytes)
		if len(bytes.TrimSpace(line)) > 0 {
			ev, verr := checkEvent(line)
			if verr != nil {
				fail(verr)
				return
			}
			if !emit(ev) {
				return // the client is gone; the round trip's end kills the command
			}
			if ev.Type == "exit" || ev.Type == "error" {
				return
			}
		}
		if err != nil {
			// A stream that breaks or ends early (the sandbox stopped: its
			// lease, a delete, out of memory) ends here too, without an exit
			// event, as a streamed exec's does; the client asks for the
			// sandbox to learn why. A line that is not the protocol's is
			// told as an error event.
			if errors.Is(err, errBadAgentAnswer) {
				fail(err)
			}
			return
		}
	}
}

// readLine reads one line (without its newline) of at most max bytes; a
// longer line is an error, and so is the end of the stream (with no line).
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max {
			return nil, fmt.Errorf("%w: a line of the stream is over %d bytes", errBadAgentAnswer, max)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			// A line cut by the stream's end is dropped with it: the
			// stream was cut short, the line is not a forged one.
			return nil, err
		}
		return bytes.TrimSuffix(line, []byte("\n")), nil
	}
}

// checkEvent decodes one line of the agent's stream as an event of a
// type the exec stream has, with only that type's fields.
func checkEvent(line []byte) (agentapi.Event, error) {
	var ev agentapi.Event
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return ev, fmt.Errorf("%w: %v", errBadAgentAnswer, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return ev, fmt.Errorf("%w: more than one JSON value on a line", errBadAgentAnswer)
	}
	ok := false
	switch ev.Type {
	case "start":
		ok = ev.Pid > 0 && ev.Data == "" && ev.Result == nil && ev.Error == nil
	case "stdout", "stderr":
		ok = ev.Pid == 0 && ev.Result == nil && ev.Error == nil
	case "exit":
		ok = ev.Result != nil && ev.Error == nil && ev.Data == ""
	case "error":
		ok = ev.Error != nil && ev.Result == nil && ev.Data == "" && validCode(ev.Error.Code)
	case agentapi.EventHeartbeat:
		ok = ev == agentapi.Event{Type: agentapi.EventHeartbeat}
	}
	if !ok {
		return ev, fmt.Errorf("%w: an event of type %q with fields it does not have", errBadAgentAnswer, ev.Type)
	}
	return ev, nil
}
