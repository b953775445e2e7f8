package agent

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sync"
	"syscall"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// The first command of a create (POST /v1/sandboxes with "exec") is handed
// to the agent on its command line when it fits, so that it starts as the
// agent boots, while the host is still waiting for the agent to answer,
// rather than one round trip after. Its output waits in the sink until the
// host attaches with POST /first and takes it exactly as POST /exec would
// have given it (a stream: blocked pipes, nothing lost; collected: capped
// as usual).

// firstAttachWait bounds how long the first command waits for the host to
// attach. A host that never does (it died during the create) is a client
// gone: the command's tree is killed, as for an exec whose client left.
const firstAttachWait = 60 * time.Second

// firstExec is the first command started at boot.
type firstExec struct {
	stream bool
	maxOut int
	p      *proc        // nil when it failed to start
	err    error        // why it failed to start
	events *eventSink   // stream: events wait here until attached
	output *collectSink // collected
	// attached is closed by the first POST /first; later ones get 409.
	mu       sync.Mutex
	attached bool
	taken    chan struct{}
}

// StartFirst starts req at boot, before the agent listens. stream selects
// how POST /first answers: NDJSON events (true) or a collected ExecResult.
// A request that cannot run (bad cwd, unknown program) is kept as the
// answer POST /first gives, as POST /exec would have given it.
func (s *Server) StartFirst(req agentapi.ExecRequest, stream bool) {
	fe := &firstExec{stream: stream, taken: make(chan struct{})}
	s.first = fe
	spec, maxOut, err := s.buildSpec(&req, false)
	if err != nil {
		fe.err = err
		return
	}
	fe.maxOut = maxOut
	var sk sink
	if stream {
		fe.events = newEventSink()
		sk = fe.events
	} else {
		fe.output = newCollectSink(maxOut)
		sk = fe.output
	}
	p, err := s.start(spec, sk)
	if err != nil {
		fe.err = err
		if fe.events != nil {
			close(fe.events.quit)
		}
		return
	}
	fe.p = p
	go func() {
		select {
		case <-fe.taken:
		case <-time.After(firstAttachWait):
			if fe.take() {
				s.log.Warn("the host never attached to the first command; killing it")
				p.signal(syscall.SIGKILL)
				if fe.events != nil {
					close(fe.events.quit)
				}
			}
		}
	}()
}

// StartFirstEncoded starts the first command given on the agent's command
// line (agentapi.FirstExec, JSON in standard base64). One that cannot be
// read is kept as the error POST /first answers.
func (s *Server) StartFirstEncoded(arg string) {
	var fe agentapi.FirstExec
	data, err := base64.StdEncoding.DecodeString(arg)
	if err == nil {
		err = json.Unmarshal(data, &fe)
	}
	if err != nil {
		s.first = &firstExec{err: badRequest("the first command given at boot cannot be read: %v", err), taken: make(chan struct{})}
		return
	}
	s.StartFirst(fe.Exec, fe.Stream)
}

// take marks the first command as attached; false when it already was.
func (fe *firstExec) take() bool {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	if fe.attached {
		return false
	}
	fe.attached = true
	close(fe.taken)
	return true
}

// handleFirst answers for the command started at boot, once: its events
// or its result, as POST /exec would have answered. 404 when the agent
// booted without one, 409 when it was already taken.
func (s *Server) handleFirst(w http.ResponseWriter, r *http.Request) error {
	fe := s.first
	if fe == nil {
		return notFound("this sandbox booted without a first command")
	}
	if !fe.take() {
		return conflict("the first command was already taken")
	}
	if fe.err != nil {
		return fe.err
	}
	if fe.stream {
		defer close(fe.events.quit)
		return s.streamProc(w, r, fe.p, fe.events)
	}
	select {
	case <-fe.p.done:
	case <-r.Context().Done():
		fe.p.signal(syscall.SIGKILL)
		return nil
	}
	res := fe.p.result()
	fillOutput(&res, fe.output, fe.maxOut)
	writeJSON(w, http.StatusOK, res)
	return nil
}
