package e2b

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/compat/e2b/envd/processpb"
	"withruntime.dev/runtime/sdk/go/wire"
)

// processService is envd's process.Process over Runtime's background
// processes: Start is POST .../processes (argv as given, the SDKs' /bin/bash
// -l -c CMD) followed by its NDJSON wait stream, so a command outlives the
// stream that started it and Connect can follow it again; the lease (or
// the Connect-Timeout-Ms of Start, as in envd) ends it. A Connect replays
// the bounded buffer of output the process wrote before it (envd sends only
// what comes after).
//
// Pseudo-terminals (the SDKs' sandbox.pty): a Start with a pty is a
// background process started with "pty" (Runtime's terminals); its output
// is the same wait stream, sent as envd's pty data events, byte for byte.
// Input (SendInput, StreamInput: pty or stdin alike) is POST .../stdin,
// which writes to the terminal; Update is POST .../resize; the kill is the
// kill of any process. The terminal WebSocket is not used here: every step
// is one request to the API, as the rest of the facade.
type processService struct{ s *Server }

var _ interface {
	Start(context.Context, *connect.Request[processpb.StartRequest], *connect.ServerStream[processpb.StartResponse]) error
} = (*processService)(nil)

// maxEventLine caps one NDJSON line of a process stream (the agent sends
// at most 64 KiB of output per event; base64 makes it larger).
const maxEventLine = 1 << 20

// keepAliveEvery is how often a quiet stream sends a keepalive event.
const keepAliveEvery = 30 * time.Second

func (p *processService) Start(ctx context.Context, req *connect.Request[processpb.StartRequest], stream *connect.ServerStream[processpb.StartResponse]) error {
	t := targetFrom(ctx)
	in := req.Msg
	cfg := in.GetProcess()
	if cfg.GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is empty; name the program to run"))
	}
	ex := agentapi.ExecRequest{Argv: append([]string{cfg.GetCmd()}, cfg.GetArgs()...), Env: cfg.GetEnvs(),
		Cwd: t.home(), User: t.user, StdinOpen: in.GetStdin()}
	if in.Pty != nil {
		size, err := ptySize(in.GetPty())
		if err != nil {
			return err
		}
		// The terminal is its input: "stdin" has nothing to add.
		ex.Pty, ex.StdinOpen = &size, false
	}
	if cfg.Cwd != nil {
		ex.Cwd = t.abs(cfg.GetCwd())
	}
	if dl, ok := ctx.Deadline(); ok {
		ex.TimeoutSeconds = max(time.Until(dl).Seconds(), 0.001)
	}
	var proc agentapi.Process
	if err := p.s.api.json(ctx, t.as, "POST", t.base()+"/processes", ex, &proc); err != nil {
		return rpcError(err)
	}
	p.s.procs.add(t.id, proc.Pid, in.Tag, cfg)
	send := func(ev *processpb.ProcessEvent) error { return stream.Send(&processpb.StartResponse{Event: ev}) }
	return p.s.follow(ctx, t, proc.Pid, ex.Pty != nil, send)
}

// ptySize is the size a Start or Update asks for, checked as the API
// would (so that the error names envd's fields).
func ptySize(pty *processpb.PTY) (wire.PtySize, error) {
	sz := pty.GetSize()
	size := wire.PtySize{Cols: int(sz.GetCols()), Rows: int(sz.GetRows())}
	if sz == nil || size.Cols < 1 || size.Cols > wire.MaxPtyCols || size.Rows < 1 || size.Rows > wire.MaxPtyRows {
		return size, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("pty.size must have cols from 1 to %d and rows from 1 to %d, got cols %d, rows %d",
			wire.MaxPtyCols, wire.MaxPtyRows, sz.GetCols(), sz.GetRows()))
	}
	return size, nil
}

func (p *processService) Connect(ctx context.Context, req *connect.Request[processpb.ConnectRequest], stream *connect.ServerStream[processpb.ConnectResponse]) error {
	t := targetFrom(ctx)
	pid, err := p.s.procs.pid(t.id, req.Msg.GetProcess())
	if err != nil {
		return err
	}
	// Whether it runs on a terminal decides how its output is sent.
	var pr agentapi.Process
	if err := p.s.api.json(ctx, t.as, "GET", fmt.Sprintf("%s/processes/%d", t.base(), pid), nil, &pr); err != nil {
		return rpcError(err)
	}
	send := func(ev *processpb.ProcessEvent) error { return stream.Send(&processpb.ConnectResponse{Event: ev}) }
	return p.s.follow(ctx, t, pid, pr.Pty != nil, send)
}

// follow streams process pid's NDJSON wait stream as envd's events: start
// with its pid, data (raw bytes: pty data for a process on a terminal,
// whose output is all on stdout), keepalives while quiet, and end.
func (s *Server) follow(ctx context.Context, t target, pid int, pty bool, send func(*processpb.ProcessEvent) error) error {
	resp, err := s.api.do(ctx, t.as, "POST", fmt.Sprintf("%s/processes/%d/wait", t.base(), pid), nil,
		http.Header{"Accept": {agentapi.ContentTypeNDJSON}})
	if err != nil {
		return rpcError(err)
	}
	defer resp.Body.Close()
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), maxEventLine)
		for sc.Scan() {
			select {
			case lines <- bytes.Clone(sc.Bytes()):
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	if err := send(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_Start{Start: &processpb.ProcessEvent_StartEvent{Pid: uint32(pid)}}}); err != nil {
		return err
	}
	tick := time.NewTicker(keepAliveEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if err := send(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_Keepalive{Keepalive: &processpb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case err := <-readErr:
			return s.streamBroke(ctx, t, fmt.Sprintf("the stream of process %d", pid), err)
		case line := <-lines:
			var ev agentapi.Event
			if err := json.Unmarshal(line, &ev); err != nil {
				return connect.NewError(connect.CodeInternal, fmt.Errorf("process %d: the sandbox sent an event that is not one: %v", pid, err))
			}
			out, done, err := toProcessEvent(ev)
			if err != nil {
				return err
			}
			if d := out.GetData(); pty && d != nil {
				d.Output = &processpb.ProcessEvent_DataEvent_Pty{Pty: append(d.GetStdout(), d.GetStderr()...)}
			}
			if out != nil {
				if err := send(out); err != nil {
					return err
				}
			}
			if done {
				return nil
			}
		}
	}
}

// toProcessEvent turns one agent event into envd's; done says it ended
// the stream.
func toProcessEvent(ev agentapi.Event) (out *processpb.ProcessEvent, done bool, err error) {
	switch ev.Type {
	case "start", agentapi.EventHeartbeat:
		return nil, false, nil
	case "stdout", "stderr":
		data := []byte(ev.Data)
		if ev.Lossy {
			if data, err = base64.StdEncoding.DecodeString(ev.DataBase64); err != nil {
				return nil, true, connect.NewError(connect.CodeInternal, errors.New("the sandbox sent output that is not base64"))
			}
		}
		d := &processpb.ProcessEvent_DataEvent{Output: &processpb.ProcessEvent_DataEvent_Stdout{Stdout: data}}
		if ev.Type == "stderr" {
			d.Output = &processpb.ProcessEvent_DataEvent_Stderr{Stderr: data}
		}
		return &processpb.ProcessEvent{Event: &processpb.ProcessEvent_Data{Data: d}}, false, nil
	case "exit":
		if ev.Result == nil {
			return nil, true, connect.NewError(connect.CodeInternal, errors.New("the sandbox sent an exit event without a result"))
		}
		return &processpb.ProcessEvent{Event: &processpb.ProcessEvent_End{End: endEvent(*ev.Result)}}, true, nil
	case "error":
		msg := "the process stream failed"
		code := ""
		if ev.Error != nil {
			msg, code = ev.Error.Message, ev.Error.Code
		}
		if code == "sandbox_paused" {
			return nil, true, connect.NewError(connect.CodeUnavailable, fmt.Errorf("the sandbox was not found running: %s", msg))
		}
		return nil, true, connect.NewError(connect.CodeUnavailable, errors.New(msg))
	}
	return nil, true, connect.NewError(connect.CodeInternal, fmt.Errorf("the sandbox sent an event of unknown type %q", ev.Type))
}

// endEvent is envd's end event: a process ended by a signal has exit code
// -1 and status "signal: killed", as Go's os.ProcessState says.
func endEvent(r agentapi.ExecResult) *processpb.ProcessEvent_EndEvent {
	end := &processpb.ProcessEvent_EndEvent{ExitCode: int32(r.ExitCode), Exited: true, Status: "exit status " + strconv.Itoa(r.ExitCode)}
	if r.Signal != "" {
		end.ExitCode, end.Exited = -1, false
		end.Status = "signal: " + unix.SignalNum(r.Signal).String()
	}
	var why string
	switch {
	case r.TimedOut:
		why = "the command's timeout killed it"
	case r.OOMKilled:
		why = "killed for using the sandbox's memory"
	case r.ProcessLimitKilled:
		why = "killed at the sandbox's process limit"
	}
	if why != "" {
		end.Error = &why
	}
	return end
}

func (p *processService) List(ctx context.Context, _ *connect.Request[processpb.ListRequest]) (*connect.Response[processpb.ListResponse], error) {
	t := targetFrom(ctx)
	var list agentapi.ProcessList
	if err := p.s.api.json(ctx, t.as, "GET", t.base()+"/processes", nil, &list); err != nil {
		return nil, rpcError(err)
	}
	out := &processpb.ListResponse{}
	for _, pr := range list.Processes {
		if !pr.Running || pr.Pid <= 0 {
			continue
		}
		info := &processpb.ProcessInfo{Pid: uint32(pr.Pid)}
		tag, cfg := p.s.procs.get(t.id, pr.Pid)
		switch {
		case cfg != nil:
			info.Config = cfg
		case len(pr.Argv) > 0:
			info.Config = &processpb.ProcessConfig{Cmd: pr.Argv[0], Args: pr.Argv[1:], Cwd: &pr.Cwd}
		default:
			info.Config = &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", pr.Command}, Cwd: &pr.Cwd}
		}
		info.Tag = tag
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

// Update resizes a process's terminal (the SDKs' pty.resize): POST
// .../resize. A process without a terminal is FailedPrecondition, as the
// API's 409.
func (p *processService) Update(ctx context.Context, req *connect.Request[processpb.UpdateRequest]) (*connect.Response[processpb.UpdateResponse], error) {
	t := targetFrom(ctx)
	pid, err := p.s.procs.pid(t.id, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.Pty == nil {
		// Nothing else of a process can be updated.
		return connect.NewResponse(&processpb.UpdateResponse{}), nil
	}
	size, err := ptySize(req.Msg.GetPty())
	if err != nil {
		return nil, err
	}
	if err := p.s.api.json(ctx, t.as, "POST", fmt.Sprintf("%s/processes/%d/resize", t.base(), pid), size, nil); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&processpb.UpdateResponse{}), nil
}

func (p *processService) SendInput(ctx context.Context, req *connect.Request[processpb.SendInputRequest]) (*connect.Response[processpb.SendInputResponse], error) {
	t := targetFrom(ctx)
	pid, err := p.s.procs.pid(t.id, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.s.writeStdin(ctx, t, pid, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&processpb.SendInputResponse{}), nil
}

// writeStdin writes input to process pid: to its standard input, or to its
// terminal (the agent writes to whichever the process has, so pty and
// stdin input go the same way).
func (s *Server) writeStdin(ctx context.Context, t target, pid int, in *processpb.ProcessInput) error {
	data := in.GetStdin()
	if _, ok := in.GetInput().(*processpb.ProcessInput_Pty); ok {
		data = in.GetPty()
	}
	for len(data) > 0 {
		n := min(len(data), agentapi.MaxStdinWriteBytes)
		resp, err := s.api.do(ctx, t.as, "POST", fmt.Sprintf("%s/processes/%d/stdin", t.base(), pid), bytes.NewReader(data[:n]),
			http.Header{"Content-Type": {"application/octet-stream"}})
		if err != nil {
			return rpcError(err)
		}
		resp.Body.Close()
		data = data[n:]
	}
	return nil
}

func (p *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[processpb.StreamInputRequest]) (*connect.Response[processpb.StreamInputResponse], error) {
	t := targetFrom(ctx)
	pid := 0
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *processpb.StreamInputRequest_Start:
			var err error
			if pid, err = p.s.procs.pid(t.id, ev.Start.GetProcess()); err != nil {
				return nil, err
			}
		case *processpb.StreamInputRequest_Data:
			if pid == 0 {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the input stream must begin with a start event naming the process"))
			}
			if err := p.s.writeStdin(ctx, t, pid, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&processpb.StreamInputResponse{}), nil
}

func (p *processService) SendSignal(ctx context.Context, req *connect.Request[processpb.SendSignalRequest]) (*connect.Response[processpb.SendSignalResponse], error) {
	t := targetFrom(ctx)
	pid, err := p.s.procs.pid(t.id, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	var sig string
	switch req.Msg.GetSignal() {
	case processpb.Signal_SIGNAL_SIGKILL:
		sig = "SIGKILL"
	case processpb.Signal_SIGNAL_SIGTERM:
		sig = "SIGTERM"
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM"))
	}
	var pr agentapi.Process
	if err := p.s.api.json(ctx, t.as, "GET", fmt.Sprintf("%s/processes/%d", t.base(), pid), nil, &pr); err != nil {
		return nil, rpcError(err)
	}
	if !pr.Running {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process %d has already ended", pid))
	}
	if err := p.s.api.json(ctx, t.as, "POST", fmt.Sprintf("%s/processes/%d/kill", t.base(), pid), agentapi.KillRequest{Signal: sig}, nil); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&processpb.SendSignalResponse{}), nil
}

func (p *processService) CloseStdin(ctx context.Context, req *connect.Request[processpb.CloseStdinRequest]) (*connect.Response[processpb.CloseStdinResponse], error) {
	t := targetFrom(ctx)
	pid, err := p.s.procs.pid(t.id, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.s.api.json(ctx, t.as, "POST", fmt.Sprintf("%s/processes/%d/stdin/close", t.base(), pid), nil, nil); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&processpb.CloseStdinResponse{}), nil
}

// procTags remembers, per sandbox, the tag and configuration each process
// was started with (the agent keeps neither), for List and for selecting a
// process by tag. In memory and bounded: a restarted server lists
// processes by their argv, without tags.
type procTags struct {
	mu sync.Mutex
	m  map[string]map[int]procTag
}

type procTag struct {
	tag *string
	cfg *processpb.ProcessConfig
	at  time.Time
}

// maxTagsPerSandbox bounds what procTags keeps for one sandbox.
const maxTagsPerSandbox = 1000

func newProcTags() *procTags { return &procTags{m: map[string]map[int]procTag{}} }

func (p *procTags) add(id string, pid int, tag *string, cfg *processpb.ProcessConfig) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.m[id]
	if m == nil {
		m = map[int]procTag{}
		p.m[id] = m
	}
	if len(m) >= maxTagsPerSandbox {
		oldest := -1
		for k, v := range m {
			if oldest < 0 || v.at.Before(m[oldest].at) {
				oldest = k
			}
		}
		delete(m, oldest)
	}
	m[pid] = procTag{tag: tag, cfg: cfg, at: time.Now()}
}

func (p *procTags) get(id string, pid int) (*string, *processpb.ProcessConfig) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.m[id][pid]
	return v.tag, v.cfg
}

// pid resolves a selector: a pid as it is, a tag to the newest process
// started with it.
func (p *procTags) pid(id string, sel *processpb.ProcessSelector) (int, error) {
	switch s := sel.GetSelector().(type) {
	case *processpb.ProcessSelector_Pid:
		if s.Pid == 0 {
			return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("process.pid is 0; give the pid the start event carried"))
		}
		return int(s.Pid), nil
	case *processpb.ProcessSelector_Tag:
		p.mu.Lock()
		defer p.mu.Unlock()
		best, at := 0, time.Time{}
		for pid, v := range p.m[id] {
			if v.tag != nil && *v.tag == s.Tag && v.at.After(at) {
				best, at = pid, v.at
			}
		}
		if best == 0 {
			return 0, connect.NewError(connect.CodeNotFound, fmt.Errorf("no process was started with tag %q", s.Tag))
		}
		return best, nil
	}
	return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("name the process by pid or tag"))
}
