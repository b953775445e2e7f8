package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/jupyter"
	"withruntime.dev/runtime/sdk/go/wire"
)

// interruptGrace is how long a kernel has to stop after a timeout's
// SIGINT before it is killed.
const interruptGrace = agentapi.InterruptGraceSeconds * time.Second

// handleRunCode runs a cell in a context: collected into an Execution, or
// streamed as CodeEvents.
func (s *Server) handleRunCode(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.RunCodeRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	t := req.TimeoutSeconds
	if t < 0 || math.IsNaN(t) || math.IsInf(t, 0) || t > 1e9 {
		return badRequest("timeoutSeconds must be a positive number of seconds (or 0 for the default, %d), got %v", agentapi.DefaultCodeTimeoutSeconds, t)
	}
	if t == 0 {
		t = agentapi.DefaultCodeTimeoutSeconds
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return badRequest("env variable %q is invalid: names must be non-empty without '=' or NUL, values without NUL", k)
		}
	}
	var c *codeContext
	var err error
	lang, err := languageOf(req.Language)
	if err != nil {
		return err
	}
	id := req.ContextID
	if id == "" {
		id = defaultContextID(lang)
	}
	if dl, ok := defaultContextLanguage(id); ok {
		if req.Language == "" {
			lang = dl // the context names its language
		}
		c, _, err = s.addContext(id, agentapi.CreateContextRequest{Language: lang.name})
	} else {
		c, err = s.context(id)
		if err == nil && req.Language != "" && lang != c.lang {
			err = badRequest("context %s runs %s, not %q; omit language or use a context of that language", c.id, c.language, req.Language)
		}
	}
	if err != nil {
		return err
	}
	start := time.Now()
	if err := c.acquire(r.Context()); err != nil {
		return nil // the client went away while waiting its turn
	}
	defer c.release()
	k, err := s.kernelOf(r.Context(), c)
	if err != nil {
		return err
	}
	s.applyPendingEnv(c, k)
	x := &execution{lang: c.lang, ex: agentapi.Execution{ContextID: c.id, Results: []agentapi.Result{},
		Logs: agentapi.Logs{Stdout: []string{}, Stderr: []string{}}}}
	if wantsNDJSON(r) {
		out := startNDJSON(w)
		defer out.close()
		x.out = out
		x.emit(agentapi.CodeEvent{Type: "start", ContextID: c.id})
	}
	c.mu.Lock()
	if c.notice != "" {
		x.ex.Restarted, x.ex.Notice, c.notice = true, c.notice, ""
	}
	c.state = "busy"
	c.mu.Unlock()

	s.runCell(r.Context(), c, k, &req, time.Duration(t*float64(time.Second)), x)

	c.mu.Lock()
	if c.k == k {
		c.state = "idle"
	}
	c.mu.Unlock()
	x.finish(start)
	if x.out == nil {
		writeJSON(w, http.StatusOK, x.ex)
	}
	return nil
}

// runCell runs req.Code in k, with its env around it, and fills x. A
// kernel that is lost on the way is recorded in the context.
func (s *Server) runCell(ctx context.Context, c *codeContext, k *kernel, req *agentapi.RunCodeRequest, timeout time.Duration, x *execution) {
	if len(req.Env) > 0 {
		if lost := s.runSilent(c, k, c.lang.setEnv(req.Env, true)); lost {
			if !k.waitExit(time.Second) {
				k.markKilled("it failed while setting this call's env")
			}
			s.kernelLost(c, k, x, 0)
			return
		}
		defer s.runSilent(c, k, c.lang.restoreEnv(sortedKeys(req.Env)))
	}
	req0, err := k.client.Execute(req.Code)
	if err != nil {
		k.markKilled("its connection to the agent broke (" + err.Error() + ")")
		s.kernelLost(c, k, x, 0)
		return
	}
	defer req0.Close()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var grace <-chan time.Time
	gone := ctx.Done()
	idle, replied := false, false
	for !idle || !replied {
		select {
		case m := <-req0.C():
			switch {
			case m.Channel == jupyter.ChannelShell && m.Msg.Type() == "execute_reply":
				replied = true
				x.reply(m.Msg)
			case m.Channel == jupyter.ChannelIOPub:
				idle = x.iopub(m.Msg) || idle
			}
		case <-deadline.C:
			x.ex.TimedOut = true
			x.interrupted = true
			k.interrupt()
			grace = time.After(interruptGrace)
		case <-gone:
			// The client went away: stop the cell as a timeout would, and
			// keep the context for the next call.
			x.out = nil
			gone = nil
			x.interrupted = true
			k.interrupt()
			grace = time.After(interruptGrace)
		case <-grace:
			s.kernelLost(c, k, x, timeout)
			return
		case <-k.p.exited:
			s.kernelLost(c, k, x, 0)
			return
		case <-k.client.Done():
			// A kernel that dies closes its sockets a moment before it is
			// reaped: its own end (out of memory, say) is the news.
			if !k.waitExit(time.Second) {
				k.markKilled("its connection to the agent broke (" + k.client.Err().Error() + ")")
			}
			s.kernelLost(c, k, x, 0)
			return
		}
	}
	if k.lang.lateResults {
		drainLate(req0, k, x)
	}
	if x.ex.TimedOut {
		x.timedOut(timeout)
	}
}

// lateResultsWait is how long a kernel that publishes results after its
// idle status (Deno) is listened to after the last message of a cell.
const lateResultsWait = 50 * time.Millisecond

// drainLate collects IOPub messages that follow a cell's idle status,
// until none came for lateResultsWait.
func drainLate(r *jupyter.Request, k *kernel, x *execution) {
	quiet := time.NewTimer(lateResultsWait)
	defer quiet.Stop()
	for {
		select {
		case m := <-r.C():
			if m.Channel == jupyter.ChannelIOPub {
				x.iopub(m.Msg)
			}
			quiet.Reset(lateResultsWait)
		case <-quiet.C:
			return
		case <-k.p.exited:
			return
		}
	}
}

// kernelLost reports k as lost in x and in the context. stuck says the
// kernel is being killed because it ignored a timeout's interrupt.
func (s *Server) kernelLost(c *codeContext, k *kernel, x *execution, stuck time.Duration) {
	k.p.signal(syscall.SIGKILL)
	<-k.p.exited
	var name, value, why string
	switch {
	case stuck > 0:
		name = "TimeoutError"
		why = "did not stop when its code was interrupted at the timeout"
		value = fmt.Sprintf("the code ran longer than its timeout of %s and did not stop when interrupted, so its kernel was killed and restarted", fmtSeconds(stuck))
		x.ex.TimedOut = true
	case k.killReason() != "":
		name = "KernelDied"
		why = "was stopped because " + k.killReason()
		value = "the kernel " + why
	case k.p.result().OOMKilled:
		name = "OutOfMemoryError"
		why = s.exitReason(k)
		value = "the kernel was " + why + " while this code ran"
		x.ex.OutOfMemory = true
	default:
		name = "KernelDied"
		why = "exited (" + s.exitReason(k) + ")"
		value = "the kernel " + why + " while this code ran"
	}
	x.ex.StateLost = true
	x.setError(name, value+": "+lostSentence, x.traceback())
	s.loseKernel(c, k, why)
}

const lostSentence = "every variable, import and definition of this context is lost, and the next call runs in a new kernel"

// runSilent runs code in k without output or history and waits for it
// (kernel start-up work, this call's env); it reports a lost kernel.
func (s *Server) runSilent(c *codeContext, k *kernel, code string) (lost bool) {
	r, err := k.client.Send("execute_request", jupyter.ExecuteRequest{Code: code, Silent: true,
		UserExpressions: map[string]any{}})
	if err != nil {
		return true
	}
	defer r.Close()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case m := <-r.C():
			if m.Channel == jupyter.ChannelShell {
				return false
			}
		case <-t.C:
			return false
		case <-k.p.exited:
			return true
		case <-k.client.Done():
			return true
		}
	}
}

// envSetCode sets env in os.environ, saving the old values on a stack kept
// in builtins (out of the user's namespace); envRestoreCode puts them back.
func envSetCode(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kj, _ := json.Marshal(keys)
	vj, _ := json.Marshal(env)
	return fmt.Sprintf("__import__('builtins').__dict__.setdefault('_withruntime_env', []).append({k: __import__('os').environ.get(k) for k in %s}); __import__('os').environ.update(%s)", kj, vj)
}

const envRestoreCode = "(lambda s, e: [e.pop(k, None) if v is None else e.__setitem__(k, v) for k, v in s.items()])(__import__('builtins').__dict__['_withruntime_env'].pop(), __import__('os').environ)"

func fmtSeconds(d time.Duration) string {
	return strings.TrimSuffix(fmt.Sprintf("%.3g", d.Seconds()), ".0") + " s"
}

// execution collects (or streams) what a cell produces.
type execution struct {
	lang        *language
	ex          agentapi.Execution
	out         *ndjsonWriter // nil: collect into ex
	logs        [2]logCap
	resultBytes int
	kbInterrupt *agentapi.ExecutionError // the error the timeout's interrupt caused
	// interrupted: the agent interrupted the cell (a timeout, a client
	// gone); the kernel's next error is the interrupt's, whatever its
	// language names it (KeyboardInterrupt, R's interrupt, Deno's
	// terminated execution).
	interrupted bool
}

// emit sends ev to a streaming client; a client that is gone stops the
// stream (the cell is stopped by runCell).
func (x *execution) emit(ev agentapi.CodeEvent) {
	if x.out == nil {
		return
	}
	if err := x.out.emit(ev); err != nil {
		x.out = nil
	}
}

// iopub handles one IOPub message; it reports the idle status.
func (x *execution) iopub(m *jupyter.Message) (idle bool) {
	switch m.Type() {
	case "status":
		var st jupyter.Status
		_ = json.Unmarshal(m.Content, &st)
		return st.ExecutionState == "idle"
	case "execute_input":
		var in struct {
			ExecutionCount int `json:"execution_count"`
		}
		if json.Unmarshal(m.Content, &in) == nil && in.ExecutionCount > 0 {
			x.ex.ExecutionCount = in.ExecutionCount
		}
	case "stream":
		var st jupyter.Stream
		if json.Unmarshal(m.Content, &st) != nil || st.Text == "" {
			return false
		}
		idx := stdout
		if st.Name == "stderr" {
			idx = stderr
		}
		if x.out != nil {
			x.emit(agentapi.CodeEvent{Type: streamNames[idx], Text: st.Text})
		} else {
			x.logs[idx].add(st.Text)
		}
	case "execute_result", "display_data", "update_display_data":
		var d jupyter.DisplayData
		if json.Unmarshal(m.Content, &d) != nil || len(d.Data) == 0 {
			return false
		}
		main := m.Type() == "execute_result"
		if main && d.ExecutionCount > 0 {
			x.ex.ExecutionCount = d.ExecutionCount
		}
		res := agentapi.Result{Data: d.Data, Metadata: d.Metadata, IsMainResult: main}
		liftChart(&res)
		x.result(res)
	case "error":
		var e jupyter.ErrorContent
		if json.Unmarshal(m.Content, &e) != nil {
			return false
		}
		x.kernelError(e)
	}
	return false
}

// reply handles the execute_reply.
func (x *execution) reply(m *jupyter.Message) {
	var r jupyter.ExecuteReply
	if json.Unmarshal(m.Content, &r) != nil {
		return
	}
	if r.ExecutionCount > 0 {
		x.ex.ExecutionCount = r.ExecutionCount
	}
	switch {
	case r.Status == "error" && x.ex.Error == nil && x.kbInterrupt == nil:
		x.kernelError(r.ErrorContent)
	case r.Status == "aborted" && x.ex.Error == nil:
		x.setError("Aborted", "the kernel did not run the code: it was aborted after an earlier error", "")
	}
}

func (x *execution) kernelError(e jupyter.ErrorContent) {
	ee := &agentapi.ExecutionError{Name: e.EName, Value: e.EValue, Traceback: plainTraceback(e.Traceback)}
	if ee.Name == "" && x.lang != nil {
		ee.Name = x.lang.errorName
	}
	if x.ex.TimedOut && (x.interrupted || e.EName == "KeyboardInterrupt") {
		x.kbInterrupt = ee // reported as the timeout (see timedOut)
		return
	}
	x.ex.Error = ee
	x.emit(agentapi.CodeEvent{Type: "error", Error: ee})
}

// timedOut reports a timeout that the interrupt ended in time.
func (x *execution) timedOut(timeout time.Duration) {
	tb := ""
	if x.kbInterrupt != nil {
		tb = x.kbInterrupt.Traceback
	} else if x.ex.Error != nil {
		return // the cell raised something of its own meanwhile
	}
	x.setError("TimeoutError", fmt.Sprintf("the code ran longer than its timeout of %s and was interrupted; the context and its variables are kept", fmtSeconds(timeout)), tb)
}

func (x *execution) traceback() string {
	if x.kbInterrupt != nil {
		return x.kbInterrupt.Traceback
	}
	return ""
}

func (x *execution) setError(name, value, tb string) {
	x.ex.Error = &agentapi.ExecutionError{Name: name, Value: value, Traceback: tb}
	x.emit(agentapi.CodeEvent{Type: "error", Error: x.ex.Error})
}

// result keeps (or streams) one result, within MaxResultBytes.
func (x *execution) result(res agentapi.Result) {
	if x.out != nil {
		x.emit(agentapi.CodeEvent{Type: "result", Result: &res})
		return
	}
	n := resultSize(res)
	if x.resultBytes+n > agentapi.MaxResultBytes {
		x.ex.ResultsTruncated = true
		msg, _ := json.Marshal(fmt.Sprintf("[result of %d bytes left out: the results of one call are capped at %d bytes; save large output to a file instead]", n, agentapi.MaxResultBytes))
		res = agentapi.Result{Data: map[string]json.RawMessage{"text/plain": msg}, IsMainResult: res.IsMainResult}
		n = len(msg)
	}
	x.resultBytes += n
	x.ex.Results = append(x.ex.Results, res)
}

// finish completes the Execution (and ends a stream).
func (x *execution) finish(start time.Time) {
	x.ex.DurationMs = time.Since(start).Milliseconds()
	if x.ex.Error != nil && x.ex.StateLost && x.ex.Notice == "" {
		x.ex.Notice = x.ex.Error.Value
	}
	if x.out != nil {
		end := x.ex
		end.Results, end.Logs = []agentapi.Result{}, agentapi.Logs{Stdout: []string{}, Stderr: []string{}}
		x.emit(agentapi.CodeEvent{Type: "end", Execution: &end})
		return
	}
	x.ex.Logs.Stdout, x.ex.LogsTruncated = x.logs[stdout].list()
	var t bool
	x.ex.Logs.Stderr, t = x.logs[stderr].list()
	x.ex.LogsTruncated = x.ex.LogsTruncated || t
}

// ansi matches the colour escapes of IPython's tracebacks.
var ansi = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

func plainTraceback(lines []string) string {
	return ansi.ReplaceAllString(strings.Join(lines, "\n"), "")
}

// logCap keeps a stream's chunks within MaxLogBytes: the head, and a tail
// of the latest chunks, with one marker entry for what was left out.
type logCap struct {
	head, tail         []string
	headBytes, tailLen int
	omitted            int
}

func (l *logCap) add(s string) {
	const half = agentapi.MaxLogBytes / 2
	if l.omitted == 0 && len(l.tail) == 0 && l.headBytes+len(s) <= agentapi.MaxLogBytes {
		l.head = append(l.head, s)
		l.headBytes += len(s)
		return
	}
	if len(l.tail) == 0 && l.omitted == 0 {
		// First overflow: keep half of the head, the rest goes to the tail.
		for l.headBytes > half && len(l.head) > 0 {
			last := l.head[len(l.head)-1]
			l.head = l.head[:len(l.head)-1]
			l.headBytes -= len(last)
			l.tail = append([]string{last}, l.tail...)
			l.tailLen += len(last)
		}
	}
	l.tail = append(l.tail, s)
	l.tailLen += len(s)
	for l.tailLen > half && len(l.tail) > 1 {
		l.omitted += len(l.tail[0])
		l.tailLen -= len(l.tail[0])
		l.tail = l.tail[1:]
	}
	if l.tailLen > half { // one chunk larger than half: keep its end
		cut := l.tailLen - half
		for cut < len(l.tail[0]) && !utf8Start(l.tail[0][cut]) {
			cut++
		}
		l.omitted += cut
		l.tailLen -= cut
		l.tail[0] = l.tail[0][cut:]
	}
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func (l *logCap) list() ([]string, bool) {
	out := append([]string{}, l.head...)
	if l.omitted > 0 {
		out = append(out, fmt.Sprintf("\n[... %d bytes omitted ...]\n", l.omitted))
	}
	return append(out, l.tail...), l.omitted > 0
}

// liftChart moves the chart the kernel's startup formatter put under
// wire.ChartMIME (kernel_startup.py) into res.Chart. A chart that does not
// decode is dropped: the figure's image is still there.
func liftChart(res *agentapi.Result) {
	raw, ok := res.Data[wire.ChartMIME]
	if !ok {
		return
	}
	delete(res.Data, wire.ChartMIME)
	delete(res.Metadata, wire.ChartMIME)
	var c wire.Chart
	if json.Unmarshal(raw, &c) != nil || c.Type == "" {
		return
	}
	normalizeChart(&c)
	res.Chart = &c
}

// normalizeChart gives every chart (a superchart's too) its elements
// list, empty rather than absent.
func normalizeChart(c *wire.Chart) {
	if c.Elements == nil {
		c.Elements = []wire.ChartElement{}
	}
	for i := range c.Charts {
		normalizeChart(&c.Charts[i])
	}
}

// resultSize is what a result holds, in bytes: its MIME data and its
// chart (counted as its points and ticks, the bulk of it).
func resultSize(res agentapi.Result) int {
	n := 0
	for _, v := range res.Data {
		n += len(v)
	}
	if res.Chart != nil {
		n += chartSize(res.Chart)
	}
	return n
}

func chartSize(c *wire.Chart) int {
	n := 256
	for _, t := range append(c.XTicks, c.YTicks...) {
		n += len(t) + 1
	}
	for _, e := range c.Elements {
		n += 64 + len(e.Label) + len(e.Group) + 8*len(e.Outliers)
		for _, p := range e.Points {
			for _, v := range p {
				n += len(v) + 1
			}
		}
	}
	for i := range c.Charts {
		n += chartSize(&c.Charts[i])
	}
	return n
}
