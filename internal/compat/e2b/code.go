package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/sdk/go/wire"
)

// The code interpreter's port (49999), as e2b-code-interpreter 2.11.5
// calls it: POST /execute streams JSON lines, /contexts manages contexts.
// Each route is a request to Runtime's /code and /contexts routes, as the
// owner of the sandbox the access token opens (authEnvd ran before), so
// the API's checks and its sanitizing of the agent's answers apply; what
// comes back is still the sandbox's doing, so every line is decoded into
// Runtime's own types and re-encoded, never passed through.

// maxCodeLine caps one NDJSON line read from the API's /code stream (the
// agent caps one kernel message at 64 MiB; base64 and JSON add a little).
const maxCodeLine = 96 << 20

// maxExecuteBody caps the body of POST /execute (the code and its env).
const maxExecuteBody = 64 << 20

// executeRequest is the body of POST /execute.
type executeRequest struct {
	Code      string            `json:"code"`
	ContextID *string           `json:"context_id"`
	Language  *string           `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// e2bContext is a context as the SDK reads it.
type e2bContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// mimeFields maps the MIME types of a result bundle to the fields of the
// SDK's Result that hold strings.
var mimeFields = map[string]string{
	"text/plain": "text", "text/html": "html", "text/markdown": "markdown", "image/svg+xml": "svg",
	"image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf", "text/latex": "latex",
	"application/javascript": "javascript",
}

func (s *Server) codeHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("POST /execute", s.execute)
	mux.HandleFunc("POST /contexts", s.createContext)
	mux.HandleFunc("GET /contexts", s.listContexts)
	mux.HandleFunc("DELETE /contexts/{id}", s.contextOp("DELETE", ""))
	mux.HandleFunc("POST /contexts/{id}/restart", s.contextOp("POST", "/restart"))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no route %s %s in the code interpreter as Runtime serves it (POST /execute, /contexts)", r.Method, r.URL.Path)
	})
	return mux
}

// execute is POST /execute: the cell's events as JSON lines of the SDK's
// shape (stdout, stderr, result, error, number_of_executions).
func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	t := targetFrom(r.Context())
	h := &held{key: t.keyID()}
	defer h.release()
	raw, err := readHeld(r.Body, maxExecuteBody, h)
	if errors.Is(err, errHeld) {
		writeError(w, http.StatusServiceUnavailable, "%s", heldError())
		return
	}
	var req executeRequest
	if err == nil {
		err = json.Unmarshal(raw, &req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "the body is not an execute request {code, context_id, language, env_vars}: %v", err)
		return
	}
	raw = nil
	in := map[string]any{"code": req.Code}
	if req.ContextID != nil && *req.ContextID != "" {
		in["contextId"] = *req.ContextID
	}
	if req.Language != nil && *req.Language != "" {
		in["language"] = *req.Language
	}
	if len(req.EnvVars) > 0 {
		in["env"] = req.EnvVars
	}
	body, err := json.Marshal(in)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	hdr := http.Header{"Accept": {"application/x-ndjson"}, "Content-Type": {"application/json"}}
	resp, err := s.api.doLen(r.Context(), t.as, "POST", t.base()+"/code", bytes.NewReader(body), int64(len(body)), hdr)
	// The API has read the body (and booked it again while it held it).
	body, req = nil, executeRequest{}
	h.release()
	if err != nil {
		s.writeEnvdError(w, r, err)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		// The head now, before the cell's first output: the JS SDK's
		// timeoutMs starts counting only once it has it.
		flusher.Flush()
	}
	enc := json.NewEncoder(w)
	emit := func(v any) {
		_ = enc.Encode(v)
		if flusher != nil {
			flusher.Flush()
		}
	}
	lines := newLineReader(resp.Body, maxCodeLine, h)
	for {
		line, err := lines.next()
		if errors.Is(err, errHeld) {
			emit(streamError("%s", heldError()))
			return
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the code stream ended without its end event")
			}
			s.endExecute(r, t, emit, err)
			return
		}
		var ev agentapi.CodeEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			emit(streamError("the code stream sent a line that is not an event: %v", err))
			return
		}
		line = nil
		for _, out := range translateEvent(ev, time.Now()) {
			emit(out)
		}
		h.release() // the line is written: its copies are garbage now
		if ev.Type == "end" {
			return
		}
	}
}

// endExecute ends an /execute stream that broke off with err. When the
// sandbox was destroyed meanwhile the connection drops, as an E2B
// sandbox's does when it goes away mid-cell, and the SDK raises its own
// error for that; otherwise the stream ends with an error line.
func (s *Server) endExecute(r *http.Request, t target, emit func(any), err error) {
	if r.Context().Err() == nil {
		if serr := s.whyStopped(r.Context(), t); serr != nil {
			s.cfg.Log.Debug("e2b: cell of a stopped sandbox dropped", "sandbox", t.id, "why", serr)
			panic(http.ErrAbortHandler)
		}
	}
	emit(streamError("%v", err))
}

// streamError is an error line for a stream that broke off.
func streamError(format string, args ...any) map[string]any {
	return map[string]any{"type": "error", "name": "RuntimeError", "value": fmt.Sprintf(format, args...), "traceback": ""}
}

// translateEvent turns one of Runtime's code events into the SDK's lines
// (none for start).
func translateEvent(ev agentapi.CodeEvent, now time.Time) []map[string]any {
	switch ev.Type {
	case "stdout", "stderr":
		return []map[string]any{{"type": ev.Type, "text": ev.Text, "timestamp": now.UnixNano()}}
	case "result":
		if ev.Result == nil {
			return nil
		}
		return []map[string]any{resultLine(*ev.Result)}
	case "error":
		if ev.Error == nil {
			return nil
		}
		return []map[string]any{{"type": "error", "name": ev.Error.Name, "value": ev.Error.Value, "traceback": ev.Error.Traceback}}
	case "end":
		n := 0
		if ev.Execution != nil {
			n = ev.Execution.ExecutionCount
		}
		return []map[string]any{{"type": "number_of_executions", "execution_count": n}}
	}
	return nil
}

// resultLine is a result bundle in the SDK's shape: each MIME type the SDK
// knows in its field (a string; a value of another JSON type is left out),
// application/json as "json" (an object; other values left out), a
// DataFrame's columns as "data", the chart as "chart" (chart.go), the rest
// under "extra" keyed by MIME type.
func resultLine(res agentapi.Result) map[string]any {
	out := map[string]any{"type": "result", "is_main_result": res.IsMainResult}
	extra := map[string]json.RawMessage{}
	for mime, raw := range res.Data {
		if field, ok := mimeFields[mime]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				if field == "text" {
					s = unquoted(s)
				}
				out[field] = s
			}
			continue
		}
		if mime == wire.DataFrameMIME {
			var cols map[string]json.RawMessage
			if json.Unmarshal(raw, &cols) == nil {
				out["data"] = cols
			}
			continue
		}
		if mime == "application/json" {
			var obj map[string]json.RawMessage
			if json.Unmarshal(raw, &obj) == nil {
				out["json"] = obj
			}
			continue
		}
		extra[mime] = raw
	}
	if len(extra) > 0 {
		out["extra"] = extra
	}
	if res.Chart != nil {
		out["chart"] = e2bChart(*res.Chart)
	}
	return out
}

// unquoted is a text/plain without the quotes of a string's repr ("'x'"
// is "x"), as E2B's interpreter gives a string result's text.
func unquoted(s string) string {
	if len(s) >= 2 && (s[0] == '\'' && s[len(s)-1] == '\'' || s[0] == '"' && s[len(s)-1] == '"') {
		return s[1 : len(s)-1]
	}
	return s
}

// createContext is POST /contexts {language?, cwd?}.
func (s *Server) createContext(w http.ResponseWriter, r *http.Request) {
	t := targetFrom(r.Context())
	var req struct {
		Language string `json:"language"`
		Cwd      string `json:"cwd"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "the body is not a context {language, cwd}: %v", err)
		return
	}
	if req.Cwd == "" {
		req.Cwd = t.home() // E2B's contexts start in the user's home
	}
	in := agentapi.CreateContextRequest{Language: req.Language, Cwd: req.Cwd}
	if req.Cwd == "/root" || strings.HasPrefix(req.Cwd, "/root/") {
		// E2B runs every kernel as root; Runtime runs them as the sandbox
		// user, who cannot enter root's home: a context there is root's.
		in.User = "root"
	}
	var c agentapi.Context
	if err := s.api.json(r.Context(), t.as, "POST", t.base()+"/contexts", in, &c); err != nil {
		s.writeEnvdError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e2bContext{ID: c.ID, Language: c.Language, Cwd: c.Cwd})
}

// e2bKernelHome is where E2B's code interpreter starts its kernels: the
// user's home (Runtime's own start in /workspace).
const e2bKernelHome = "/home/user"

// homeKernel moves the default code context of a sandbox the facade just
// created from a template to e2bKernelHome (PATCH .../contexts/default: a
// running kernel, a warm template's, changes directory silently; in a
// sandbox with kernels and no default context yet, the context is made
// there), as E2B's is. A sandbox without kernels (501) or without that
// directory (400) keeps Runtime's defaults; a sandbox restored from a
// snapshot keeps its kernels where they were.
//
// The other languages' default contexts ("default-<language>") are made
// there too, without a kernel (one starts at the language's first cell):
// only those whose kernel the sandbox has (a 400 names the others).
func (s *Server) homeKernel(ctx context.Context, as who, id string) {
	p := "/v1/sandboxes/" + url.PathEscape(id) + "/contexts/" + agentapi.DefaultContextID
	if err := s.api.json(ctx, as, "PATCH", p, agentapi.UpdateContextRequest{Cwd: e2bKernelHome}, nil); err != nil {
		s.cfg.Log.Debug("e2b: the default code context stays where it is", "sandbox", id, "err", err)
		return
	}
	for _, lang := range homedLanguages {
		if err := s.api.json(ctx, as, "PATCH", p+"-"+lang, agentapi.UpdateContextRequest{Cwd: e2bKernelHome}, nil); err != nil {
			s.cfg.Log.Debug("e2b: a language's default code context stays where it is", "sandbox", id, "language", lang, "err", err)
		}
	}
}

// homedLanguages are the languages besides Python whose default context
// homeKernel makes in e2bKernelHome.
var homedLanguages = []string{wire.LanguageJavaScript, wire.LanguageTypeScript, wire.LanguageR, wire.LanguageBash, wire.LanguageJava}

// listContexts is GET /contexts: a JSON array of contexts.
func (s *Server) listContexts(w http.ResponseWriter, r *http.Request) {
	t := targetFrom(r.Context())
	var list agentapi.ContextList
	if err := s.api.json(r.Context(), t.as, "GET", t.base()+"/contexts", nil, &list); err != nil {
		s.writeEnvdError(w, r, err)
		return
	}
	out := make([]e2bContext, 0, len(list.Contexts)+2)
	// E2B lists its default contexts (Python's and JavaScript's) from the
	// start; Runtime makes each at its first cell (and a context named
	// "default" or "default-javascript" reaches it then), so the list
	// shows them before that too.
	for _, d := range []e2bContext{
		{ID: agentapi.DefaultContextID, Language: wire.LanguagePython, Cwd: wire.Workspace},
		{ID: agentapi.DefaultContextID + "-" + wire.LanguageJavaScript, Language: wire.LanguageJavaScript, Cwd: wire.Workspace},
	} {
		if !slices.ContainsFunc(list.Contexts, func(c agentapi.Context) bool { return c.ID == d.ID }) {
			out = append(out, d)
		}
	}
	for _, c := range list.Contexts {
		out = append(out, e2bContext{ID: c.ID, Language: c.Language, Cwd: c.Cwd})
	}
	writeJSON(w, http.StatusOK, out)
}

// contextOp is DELETE /contexts/{id} and POST /contexts/{id}/restart,
// answered 204.
func (s *Server) contextOp(method, suffix string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t := targetFrom(r.Context())
		p := t.base() + "/contexts/" + url.PathEscape(r.PathValue("id")) + suffix
		if err := s.api.json(r.Context(), t.as, method, p, nil, nil); err != nil {
			s.writeEnvdError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}
