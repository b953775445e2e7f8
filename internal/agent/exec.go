package agent

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/httpwait"
)

// buildSpec validates req and resolves it into a procSpec. background
// selects the timeout default (none instead of DefaultExecTimeoutSeconds).
// It also returns the per-stream output cap.
func (s *Server) buildSpec(req *agentapi.ExecRequest, background bool) (procSpec, int, error) {
	var spec procSpec
	if (req.Command == "") == (len(req.Argv) == 0) {
		return spec, 0, badRequest(`set exactly one of "command" (a shell command line, run with bash -c) or "argv" (a program and its arguments, run without a shell)`)
	}
	if len(req.Argv) > 0 && req.Argv[0] == "" {
		return spec, 0, badRequest(`argv[0] is empty; it must name the program to run`)
	}
	if strings.ContainsRune(req.Command, 0) {
		return spec, 0, badRequest(`command contains a NUL byte, which a command line cannot hold`)
	}
	for i, a := range req.Argv {
		if strings.ContainsRune(a, 0) {
			return spec, 0, badRequest("argv[%d] contains a NUL byte, which an argument cannot hold", i)
		}
	}
	t := req.TimeoutSeconds
	if t < 0 || math.IsNaN(t) || math.IsInf(t, 0) || t > 1e9 {
		return spec, 0, badRequest("timeoutSeconds must be a positive number of seconds (or 0 for the default), got %v", t)
	}
	if t == 0 && !background {
		t = agentapi.DefaultExecTimeoutSeconds
	}
	spec.timeout = time.Duration(t * float64(time.Second))
	maxOut := req.MaxOutputBytes
	if maxOut < 0 || maxOut > agentapi.MaxMaxOutputBytes {
		return spec, 0, badRequest("maxOutputBytes must be between 1 and %d (0 means the default, %d), got %d",
			agentapi.MaxMaxOutputBytes, agentapi.DefaultMaxOutputBytes, maxOut)
	}
	if maxOut == 0 {
		maxOut = agentapi.DefaultMaxOutputBytes
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return spec, 0, badRequest("env variable %q is invalid: names must be non-empty without '=' or NUL, values without NUL", k)
		}
	}
	acct, err := s.lookupAccount(req.User)
	if err != nil {
		return spec, 0, err
	}
	dir := s.cfg.Workspace
	if req.Cwd != "" {
		if dir, err = s.resolve(req.Cwd); err != nil {
			return spec, 0, err
		}
	}
	st, err := os.Stat(dir)
	switch {
	case os.IsNotExist(err):
		return spec, 0, badRequest("cwd %s does not exist; create it first (POST /files/mkdir) or omit cwd to run in %s", dir, s.cfg.Workspace)
	case err != nil:
		return spec, 0, badRequest("cwd %s cannot be used: %v", dir, err)
	case !st.IsDir():
		return spec, 0, badRequest("cwd %s is not a directory; give a directory", dir)
	case !canEnter(dir, acct):
		return spec, 0, badRequest("cwd %s is not a directory the user %q (uid %d) can enter; run the command as \"root\" (user) or choose another cwd", dir, acct.Name, acct.Uid)
	}
	spec.dir = dir
	spec.env = commandEnv(s.environ(), acct, req.Env)
	spec.cred = acct.credential()
	spec.stdin = req.Stdin
	if req.StdinOpen {
		if !background {
			return spec, 0, badRequest(`stdinOpen is only for background processes (POST /processes); give a foreground command its input in "stdin"`)
		}
		if req.Stdin != "" {
			return spec, 0, badRequest(`set at most one of "stdin" (input given at once) and "stdinOpen" (input written later with POST /processes/{pid}/stdin)`)
		}
		spec.stdinOpen = true
	}
	if req.Pty != nil {
		if !background {
			return spec, 0, badRequest(`pty is only for background processes (POST /processes), whose terminal is then reached at /processes/{pid}/terminal`)
		}
		if req.Stdin != "" || req.StdinOpen {
			return spec, 0, badRequest(`a process on a terminal (pty) takes its input from the terminal: leave out "stdin" and "stdinOpen"`)
		}
		if err := checkPtySize("pty", *req.Pty); err != nil {
			return spec, 0, err
		}
		size := *req.Pty
		spec.pty = &size
		spec.env = withTerm(spec.env)
	}
	if req.Command != "" {
		shell := "/bin/bash"
		if _, err := os.Stat(shell); err != nil {
			shell = "/bin/sh"
		}
		spec.path, spec.args = shell, []string{shell, "-c", req.Command}
	} else {
		if spec.path, err = lookPath(req.Argv[0], spec.env, dir); err != nil {
			return spec, 0, err
		}
		spec.args = req.Argv
	}
	return spec, maxOut, nil
}

// wantsNDJSON reports whether the client asked for a streamed answer.
func wantsNDJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), agentapi.ContentTypeNDJSON)
}

// handleExec runs a command in the foreground. If the client goes away the
// command's whole tree is killed.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.ExecRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	spec, maxOut, err := s.buildSpec(&req, false)
	if err != nil {
		return err
	}
	if wantsNDJSON(r) {
		return s.execStream(w, r, spec)
	}
	sk := newCollectSink(maxOut)
	p, err := s.start(spec, sk)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-r.Context().Done():
		p.signal(syscall.SIGKILL)
		return nil
	}
	res := p.result()
	fillOutput(&res, sk, maxOut)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// fillOutput puts the collected, capped output into res.
func fillOutput(res *agentapi.ExecResult, sk *collectSink, limit int) {
	res.StdoutTruncated = res.StdoutBytes > int64(limit)
	res.StderrTruncated = res.StderrBytes > int64(limit)
	res.Stdout, res.StdoutLossy, res.StdoutBase64 = sk.bufs[stdout].text()
	res.Stderr, res.StderrLossy, res.StderrBase64 = sk.bufs[stderr].text()
}

// eventSink turns output into NDJSON events for one streaming client,
// holding back split UTF-8 sequences. Sends block until the client has taken
// the previous event (back pressure) or the client is gone (quit).
type eventSink struct {
	ch   chan agentapi.Event
	quit chan struct{}
	hold [2]utf8Holder // each touched only by its stream's reader
}

func newEventSink() *eventSink {
	return &eventSink{ch: make(chan agentapi.Event), quit: make(chan struct{})}
}

func (e *eventSink) write(stream int, p []byte) { e.send(stream, e.hold[stream].feed(p)) }
func (e *eventSink) end(stream int)             { e.send(stream, e.hold[stream].flush()) }

func (e *eventSink) send(stream int, b []byte) {
	if len(b) == 0 {
		return
	}
	select {
	case e.ch <- chunkEvent(stream, b):
	case <-e.quit:
	}
}

// chunkEvent is the stdout/stderr event for b.
func chunkEvent(stream int, b []byte) agentapi.Event {
	text, lossy, b64 := decodeText(b)
	return agentapi.Event{Type: streamNames[stream], Data: text, Lossy: lossy, DataBase64: b64}
}

// ndjsonWriter writes one event per line and flushes it at once. While the
// stream is quiet it writes a heartbeat line every
// agentapi.HeartbeatSeconds (see agentapi.EventHeartbeat); close stops
// that, and must be called before the handler returns.
type ndjsonWriter struct {
	rc   *http.ResponseController
	stop func()

	mu   sync.Mutex // one line at a time, from the handler or the heartbeat
	w    io.Writer
	enc  *json.Encoder
	last time.Time // of the last line written
	err  error     // the first write error: the client is gone
}

func startNDJSON(w http.ResponseWriter) *ndjsonWriter {
	w.Header().Set("Content-Type", agentapi.ContentTypeNDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	n := &ndjsonWriter{w: w, enc: json.NewEncoder(w), rc: http.NewResponseController(w), last: time.Now()}
	// The head goes out now, not with the first event: a client's own
	// timeout (E2B's timeoutMs) runs only once it has the head.
	_ = n.rc.Flush()
	n.stop = httpwait.Heartbeat(agentapi.HeartbeatInterval/2, n.beat)
	return n
}

// emit writes ev (an agentapi.Event or CodeEvent) as one line.
func (n *ndjsonWriter) emit(ev any) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return n.err
	}
	n.err = n.enc.Encode(ev)
	if n.err == nil {
		n.err = n.rc.Flush()
	}
	n.last = time.Now()
	return n.err
}

// beat writes a heartbeat line when nothing was written for
// agentapi.HeartbeatInterval. A line being written holds the lock: then
// the stream is not quiet.
func (n *ndjsonWriter) beat() {
	if !n.mu.TryLock() {
		return
	}
	defer n.mu.Unlock()
	if n.err != nil || time.Since(n.last) < agentapi.HeartbeatInterval {
		return
	}
	if _, n.err = n.w.Write(agentapi.HeartbeatLine); n.err == nil {
		n.err = n.rc.Flush()
	}
	n.last = time.Now()
}

// close stops the heartbeats; the writer takes no line after it.
func (n *ndjsonWriter) close() { n.stop() }

// execStream runs spec, streaming events: start, output as it is read, exit.
func (s *Server) execStream(w http.ResponseWriter, r *http.Request, spec procSpec) error {
	sk := newEventSink()
	defer close(sk.quit)
	p, err := s.start(spec, sk)
	if err != nil {
		return err
	}
	out := startNDJSON(w)
	defer out.close()
	if err := out.emit(agentapi.Event{Type: "start", Pid: p.pid}); err != nil {
		p.signal(syscall.SIGKILL)
		return nil
	}
	for {
		select {
		case ev := <-sk.ch:
			if err := out.emit(ev); err != nil {
				p.signal(syscall.SIGKILL)
				return nil
			}
		case <-p.done:
			// Every event was handed over before done closed (the channel
			// is unbuffered and end() precedes done), so exit is last.
			res := p.result()
			_ = out.emit(agentapi.Event{Type: "exit", Result: &res})
			return nil
		case <-r.Context().Done():
			p.signal(syscall.SIGKILL)
			return nil
		}
	}
}
