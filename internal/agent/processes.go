package agent

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// Bounds on what the agent remembers of finished background processes.
const (
	// maxFinished is how many finished processes stay listable.
	maxFinished = 100
	// finishedOutputBudget bounds the replay buffers kept for finished
	// processes (bytes); the oldest are released first.
	finishedOutputBudget = 32 << 20
	// killSettle is how long a kill waits for the process to end so that
	// its answer can already carry the result.
	killSettle = 500 * time.Millisecond
)

// bgProc is a background process and its replay buffers.
type bgProc struct {
	info agentapi.Process // Pid, Command, Argv, Cwd, StartedAt
	p    *proc
	out  *replaySink
	term *terminal // nil: no terminal (terminal.go)
}

// snapshot is the public view: running, or the result without output (the
// output is fetched with wait).
func (b *bgProc) snapshot() agentapi.Process {
	v := b.info
	if b.term != nil {
		size := b.term.getSize()
		v.Pty = &size
	}
	select {
	case <-b.p.done:
		res := b.p.result()
		v.Result = &res
	default:
		v.Running = true
	}
	return v
}

// registry holds background processes by pid.
type registry struct {
	mu       sync.Mutex
	procs    map[int]*bgProc
	finished []*bgProc // oldest first
}

func newRegistry() *registry { return &registry{procs: map[int]*bgProc{}} }

// add registers b and retires it to the finished list when it ends. A
// finished entry whose pid was reused is replaced by the new process.
func (r *registry) add(b *bgProc) {
	r.mu.Lock()
	if old := r.procs[b.info.Pid]; old != nil {
		r.finished = slices.DeleteFunc(r.finished, func(x *bgProc) bool { return x == old })
	}
	r.procs[b.info.Pid] = b
	r.mu.Unlock()
	go func() {
		<-b.p.done
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.procs[b.info.Pid] != b {
			return
		}
		r.finished = append(r.finished, b)
		for len(r.finished) > maxFinished {
			delete(r.procs, r.finished[0].info.Pid)
			r.finished = r.finished[1:]
		}
		kept := 0
		for i := len(r.finished) - 1; i >= 0; i-- {
			kept += r.finished[i].out.retained()
			if kept > finishedOutputBudget {
				r.finished[i].out.release()
			}
		}
	}()
}

func (r *registry) get(pid int) *bgProc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.procs[pid]
}

func (r *registry) list() []*bgProc {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*bgProc, 0, len(r.procs))
	for _, b := range r.procs {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *bgProc) int {
		return cmp.Or(a.info.StartedAt.Compare(b.info.StartedAt), cmp.Compare(a.info.Pid, b.info.Pid))
	})
	return out
}

func (r *registry) killAll() {
	for _, b := range r.list() {
		select {
		case <-b.p.exited:
		default:
			b.p.signal(syscall.SIGKILL)
		}
	}
}

func (s *Server) handleStartProcess(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.ExecRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	spec, _, err := s.buildSpec(&req, true)
	if err != nil {
		return err
	}
	out := newReplaySink(agentapi.ReplayBufferBytes)
	p, err := s.start(spec, out)
	if err != nil {
		return err
	}
	b := &bgProc{p: p, out: out, info: agentapi.Process{
		Pid: p.pid, Command: req.Command, Argv: req.Argv, Cwd: spec.dir, StartedAt: p.started.UTC(),
	}}
	if spec.pty != nil {
		b.term = &terminal{size: *spec.pty}
	}
	s.procs.add(b)
	writeJSON(w, http.StatusCreated, b.snapshot())
	return nil
}

func (s *Server) handleListProcesses(w http.ResponseWriter, r *http.Request) error {
	list := agentapi.ProcessList{Processes: []agentapi.Process{}}
	for _, b := range s.procs.list() {
		list.Processes = append(list.Processes, b.snapshot())
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// lookupProc finds the process named by the {pid} path value.
func (s *Server) lookupProc(r *http.Request) (*bgProc, error) {
	raw := r.PathValue("pid")
	pid, err := strconv.Atoi(raw)
	if err != nil || pid <= 0 {
		return nil, badRequest("process id %q is not a positive integer; use the pid returned by POST /processes", raw)
	}
	b := s.procs.get(pid)
	if b == nil {
		return nil, notFound("no background process with pid %d; GET /processes lists them (only the last %d finished ones are kept)", pid, maxFinished)
	}
	return b, nil
}

func (s *Server) handleGetProcess(w http.ResponseWriter, r *http.Request) error {
	b, err := s.lookupProc(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, b.snapshot())
	return nil
}

// handleWaitProcess waits for a background process to end, up to the
// optional timeoutSeconds query parameter (absent or 0: as long as the
// client stays). Collected answers carry the replay buffers; NDJSON replays
// them as events and then follows live output.
func (s *Server) handleWaitProcess(w http.ResponseWriter, r *http.Request) error {
	b, err := s.lookupProc(r)
	if err != nil {
		return err
	}
	var deadline <-chan time.Time
	timeout := 0.0
	if v := r.URL.Query().Get("timeoutSeconds"); v != "" {
		timeout, err = strconv.ParseFloat(v, 64)
		if err != nil || timeout < 0 || math.IsNaN(timeout) || math.IsInf(timeout, 0) {
			return badRequest("timeoutSeconds=%q is not a non-negative number of seconds", v)
		}
		if timeout > 0 {
			t := time.NewTimer(time.Duration(timeout * float64(time.Second)))
			defer t.Stop()
			deadline = t.C
		}
	}
	stillRunning := &apiError{status: http.StatusRequestTimeout, code: agentapi.CodeTimeout,
		msg: fmt.Sprintf("process %d is still running after %gs; wait again, or stop it with POST /processes/%d/kill", b.info.Pid, timeout, b.info.Pid)}
	if wantsNDJSON(r) {
		return s.followStream(w, r, b, deadline, stillRunning)
	}
	select {
	case <-b.p.done:
	case <-deadline:
		return stillRunning
	case <-r.Context().Done():
		return nil
	}
	res := b.p.result()
	b.out.fill(&res)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// followStream sends start, the replay buffers, live output and exit as
// NDJSON. Within the replay each stream is in order, but stdout comes before
// stderr. A deadline ends the stream with an error event (code timeout).
func (s *Server) followStream(w http.ResponseWriter, r *http.Request, b *bgProc, deadline <-chan time.Time, stillRunning *apiError) error {
	out := startNDJSON(w)
	defer out.close()
	if out.emit(agentapi.Event{Type: "start", Pid: b.info.Pid}) != nil {
		return nil
	}
	var offs [2]int64
	var holds [2]utf8Holder
	send := func(stream int, p []byte) error {
		for len(p) > 0 {
			n := min(len(p), 64<<10)
			if chunk := holds[stream].feed(p[:n]); len(chunk) > 0 {
				if err := out.emit(chunkEvent(stream, chunk)); err != nil {
					return err
				}
			}
			p = p[n:]
		}
		return nil
	}
	for {
		// Checked before reading so the last read sees everything.
		finished := false
		select {
		case <-b.p.done:
			finished = true
		default:
		}
		data, changed := b.out.read(&offs)
		for i := range data {
			if send(i, data[i]) != nil {
				return nil
			}
		}
		if finished {
			for i := range holds {
				if rest := holds[i].flush(); len(rest) > 0 && out.emit(chunkEvent(i, rest)) != nil {
					return nil
				}
			}
			res := b.p.result()
			_ = out.emit(agentapi.Event{Type: "exit", Result: &res})
			return nil
		}
		select {
		case <-changed:
		case <-b.p.done:
		case <-deadline:
			_ = out.emit(agentapi.Event{Type: "error", Error: &agentapi.Error{Code: stillRunning.code, Message: stillRunning.msg}})
			return nil
		case <-r.Context().Done():
			return nil
		}
	}
}

func (s *Server) handleKillProcess(w http.ResponseWriter, r *http.Request) error {
	b, err := s.lookupProc(r)
	if err != nil {
		return err
	}
	var req agentapi.KillRequest
	if err := decodeJSON(r, &req, true); err != nil {
		return err
	}
	sig, err := parseSignal(req.Signal)
	if err != nil {
		return err
	}
	b.p.signal(sig)
	t := time.NewTimer(killSettle)
	defer t.Stop()
	select {
	case <-b.p.done:
	case <-t.C:
	}
	writeJSON(w, http.StatusOK, b.snapshot())
	return nil
}

// handleWriteStdin writes the body (raw bytes, at most
// agentapi.MaxStdinWriteBytes) to the standard input of a background
// process started with stdinOpen.
func (s *Server) handleWriteStdin(w http.ResponseWriter, r *http.Request) error {
	b, err := s.lookupProc(r)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, agentapi.MaxStdinWriteBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{status: http.StatusRequestEntityTooLarge, code: agentapi.CodeTooLarge,
				msg: fmt.Sprintf("one stdin write is at most %d bytes; send the input in several writes", agentapi.MaxStdinWriteBytes)}
		}
		return badRequest("reading the request body failed: %v", err)
	}
	var werr error
	if b.term != nil {
		stop := make(chan struct{})
		t := time.AfterFunc(stdinWriteWait, func() { close(stop) })
		werr = b.p.writeTerminal(data, stop)
		t.Stop()
	} else {
		werr = b.p.writeStdin(data)
	}
	switch err := werr; {
	case errors.Is(err, errStdinClosed):
		return conflict("the standard input of process %d is closed (it was started without stdinOpen or pty, its stdin was closed, or it ended)", b.info.Pid)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &apiError{status: http.StatusRequestTimeout, code: agentapi.CodeTimeout,
			msg: fmt.Sprintf("process %d read none of its input for %s; part of it may have been written", b.info.Pid, stdinWriteWait)}
	case err != nil:
		return fmt.Errorf("write to the stdin of process %d: %w", b.info.Pid, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleCloseStdin closes a background process's open standard input: it
// reads end-of-file. Closing a closed stdin is not an error.
func (s *Server) handleCloseStdin(w http.ResponseWriter, r *http.Request) error {
	b, err := s.lookupProc(r)
	if err != nil {
		return err
	}
	if b.term != nil {
		return conflict("process %d reads a terminal, which has no end of file to close; send Ctrl-D (the byte 0x04) as input, which a program reading a line takes as end of file", b.info.Pid)
	}
	b.p.closeStdin()
	w.WriteHeader(http.StatusNoContent)
	return nil
}
