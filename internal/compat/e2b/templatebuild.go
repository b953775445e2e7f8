package e2b

// Starting, running and following a build of an E2B template.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/store"
)

// maxBuildEvent caps one line of the API's build stream (a RUN's output
// comes in pieces far smaller).
const maxBuildEvent = 16 << 20

// startBuild is POST /v2/templates/{templateID}/builds/{buildID}: every
// step is checked first (a step Runtime's builder cannot run is a 400
// naming it, and nothing runs), the COPY steps' files must have been
// uploaded, then the build runs in the background (202).
func (s *Server) startBuild(w http.ResponseWriter, r *http.Request, as who) {
	t, b, err := s.buildOf(r, as)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	var spec buildSpec
	if err := decodeBody(r, &spec); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	img, err := spec.checkFrom()
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	from := img
	if from == "" {
		ref := spec.FromTemplate
		if ref == "" {
			ref = "base" // E2B's base image (defaultBaseImages)
		}
		if from, _, err = s.runtimeTemplate(r.Context(), as, ref); err != nil {
			s.writeAPIError(w, r, err)
			return
		}
	}
	tr, err := spec.translate(from)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	files, err := s.uploads.take(as.keyID, t.ID, tr.hashes)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	b.mu.Lock()
	state := b.state
	if state == stateWaiting {
		b.state = stateBuilding
	}
	b.mu.Unlock()
	if state != stateWaiting {
		s.uploads.release(files)
		writeError(w, http.StatusConflict, "build %s is %s: a build starts once; request another (POST /v3/templates)", b.id, state)
		return
	}
	key := who{keyID: as.keyID, key: &store.Key{ID: as.keyID}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.uploads.release(files)
		s.runBuild(s.ctx, key, t, b, tr, files)
	}()
	w.WriteHeader(http.StatusAccepted)
}

// runBuild runs b: the build context (the Dockerfile and the uploaded
// files) goes to the API's Dockerfile build as the key, whose events
// become b's log; a successful build becomes template t's.
func (s *Server) runBuild(ctx context.Context, as who, t store.E2BTemplate, b *build, tr translated, files []*upload) {
	b.log("info", "base", "Building template %s (%s), build %s, with Runtime's template builder", t.Alias, t.ID, b.id)
	bctx, err := buildContext(s.cfg.SpoolDir, tr, files)
	if err != nil {
		var se *stepError
		step := ""
		if errors.As(err, &se) {
			step = strconv.Itoa(se.step)
		}
		s.fail(b, step, err.Error())
		return
	}
	defer bctx.Close()
	size, err := bctx.Seek(0, io.SeekEnd)
	if err != nil {
		s.fail(b, "", err.Error())
		return
	}
	name := runtimePrefix(t.Alias) + randomHex(4)
	// E2B's builds reach the internet (apt_install, pip_install): so do
	// these, as E2B's sandboxes do by default here, behind the host's
	// guard against private and metadata addresses.
	q := url.Values{"name": {name}, "dockerfile": {"Dockerfile"}, "private": {"true"}, "internet": {"true"}}
	// set_start_cmd, set_ready_cmd: the template's start (a warm
	// template: the build runs it and saves the running sandbox, as
	// E2B's does), with E2B's ten minutes for the ready check.
	if tr.startCmd != "" {
		q.Set("startCommand", tr.startCmd)
	}
	if tr.readyCmd != "" {
		q.Set("readyCommand", tr.readyCmd)
		q.Set("readyTimeoutSeconds", strconv.Itoa(e2bReadyTimeout))
	}
	resp, err := s.api.doLen(ctx, as, "POST", "/v1/templates?"+q.Encode(), io.NewSectionReader(bctx, 0, size), size,
		http.Header{"Content-Type": {api.ContentTypeTar}, "Accept": {agentapi.ContentTypeNDJSON}})
	if err != nil {
		s.fail(b, "", asAPIError(err).Message)
		return
	}
	defer resp.Body.Close()
	f := follower{b: b, tr: tr, step: "base"}
	built, err := f.follow(resp.Body)
	if err != nil {
		s.fail(b, f.step, err.Error())
		return
	}
	t.Template, t.BuildID, t.CPUCount, t.MemoryMiB, t.UpdatedAt = built.Name, b.id, b.cpu, b.memory, time.Now().UTC().Truncate(time.Millisecond)
	s.tagsMu.Lock()
	defer s.tagsMu.Unlock()
	if err := s.cfg.Store.SetE2BTemplateBuild(ctx, t); err != nil {
		_ = s.api.json(detach(ctx), as, "DELETE", "/v1/templates/"+url.PathEscape(built.Name), nil, nil)
		if errors.Is(err, store.ErrNotFound) {
			err = fmt.Errorf("template %q was deleted while it was built", t.Alias)
		}
		s.fail(b, "finalize", err.Error())
		return
	}
	tag := store.E2BTemplateTag{TemplateID: t.ID, KeyID: t.KeyID, BuildID: b.id, Template: built.Name, CPUCount: b.cpu,
		MemoryMiB: b.memory, CreatedAt: t.UpdatedAt}
	if err := s.cfg.Store.SetE2BTemplateTags(ctx, tag, b.tags); err != nil {
		// The build is the template's last: "alias" reaches it even so.
		b.log("warn", "finalize", "the build's tags %v were not recorded: %v", b.tags, err)
	}
	// The previous build goes unless a tag names it; sandboxes of it keep
	// it until they end, and the next build, tag removal or delete
	// removes it then.
	s.dropOldBuilds(ctx, as, t)
	b.log("info", "finalize", "Template %s is built: Runtime template %s, %.1f MiB", t.Alias, built.Name, float64(built.SizeBytes)/(1<<20))
	b.finish(nil)
}

// fail ends b with an error at step ("" when no step is to blame).
func (s *Server) fail(b *build, step, msg string) {
	b.log("error", step, "%s", msg)
	b.finish(&buildReason{Message: msg, Step: step})
}

// follower turns the API's build events into a build's log.
type follower struct {
	b    *build
	tr   translated
	step string // the E2B step running: "base", "1", ...
	line strings.Builder
}

// lineOf finds "(line N)" in the builder's step names.
var lineOf = regexp.MustCompile(`\(line ([0-9]+)\)$`)

// follow reads the events to the end: the template built, or an error.
func (f *follower) follow(r io.Reader) (*api.Template, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxBuildEvent)
	for sc.Scan() {
		var ev api.TemplateEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("the template builder answered what it does not send: %v", err)
		}
		switch ev.Type {
		case "step":
			if ev.Done {
				continue
			}
			f.flush()
			// A Dockerfile instruction's step names its line: the log
			// says which of E2B's steps begins, and the instruction
			// (of the Dockerfile the steps became) only at debug level.
			m := lineOf.FindStringSubmatch(ev.Step)
			if m == nil {
				if f.step != "base" {
					f.step = "finalize" // what follows the last step
				}
				f.b.log("info", f.step, "%s", ev.Step)
				continue
			}
			n, _ := strconv.Atoi(m[1])
			if st, ok := f.tr.steps[n]; ok && st > 0 && strconv.Itoa(st) != f.step {
				f.step = strconv.Itoa(st)
				f.b.log("info", f.step, "[%d/%d] %s", st, len(f.tr.desc)-1, f.tr.desc[st])
			}
			f.b.log("debug", f.step, "%s", ev.Step)
		case "output":
			f.output(ev.Data)
		case "error":
			f.flush()
			msg := "the build failed"
			if ev.Error != nil {
				msg = ev.Error.Message
			}
			return nil, errors.New(msg)
		case "template":
			f.flush()
			if ev.Template == nil {
				return nil, errors.New("the template builder named no template")
			}
			return ev.Template, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the template builder's answer: %v", err)
	}
	return nil, errors.New("the template builder's answer ended before the build did")
}

// output logs what a RUN printed, a line at a time.
func (f *follower) output(data string) {
	for data != "" {
		i := strings.IndexByte(data, '\n')
		if i < 0 {
			f.line.WriteString(data)
			if f.line.Len() >= maxLogMessage {
				f.flush()
			}
			return
		}
		f.line.WriteString(data[:i])
		f.flush()
		data = data[i+1:]
	}
}

func (f *follower) flush() {
	if f.line.Len() > 0 {
		f.b.log("info", f.step, "%s", strings.TrimRight(f.line.String(), "\r"))
		f.line.Reset()
	}
}

// buildInfo is E2B's TemplateBuildInfo.
type buildInfo struct {
	Logs       []string     `json:"logs"`
	LogEntries []logEntry   `json:"logEntries"`
	TemplateID string       `json:"templateID"`
	BuildID    string       `json:"buildID"`
	Status     string       `json:"status"`
	Reason     *buildReason `json:"reason,omitempty"`
}

// intQuery reads the whole number q[name] in [lo, hi], def when absent.
func intQuery(q url.Values, name string, def, lo, hi int) (int, error) {
	if !q.Has(name) {
		return def, nil
	}
	n, err := strconv.Atoi(q.Get(name))
	if err != nil || n < lo || n > hi {
		return 0, badQuery("%s must be a whole number from %d to %d; got %q", name, lo, hi, q.Get(name))
	}
	return n, nil
}

// levelQuery reads ?level= (debug, info, warn or error).
func levelQuery(q url.Values) (string, error) {
	l := q.Get("level")
	if _, ok := levelRank[l]; !ok {
		return "", badQuery("level must be debug, info, warn or error; got %q", l)
	}
	return l, nil
}

// buildStatus is GET /templates/{templateID}/builds/{buildID}/status: the
// state and the log entries from logsOffset (at most limit, 100).
func (s *Server) buildStatus(w http.ResponseWriter, r *http.Request, as who) {
	q := r.URL.Query()
	offset, err := intQuery(q, "logsOffset", 0, 0, 1<<31-1)
	if err == nil {
		var limit int
		var level string
		if limit, err = intQuery(q, "limit", 100, 0, 100); err == nil {
			if level, err = levelQuery(q); err == nil {
				s.answerStatus(w, r, as, offset, limit, level)
				return
			}
		}
	}
	s.writeAPIError(w, r, err)
}

func (s *Server) answerStatus(w http.ResponseWriter, r *http.Request, as who, offset, limit int, level string) {
	t, b, err := s.buildOf(r, as)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	state, logs, reason := b.snapshot(offset, limit, level)
	writeJSON(w, http.StatusOK, buildInfo{Logs: []string{}, LogEntries: logs, TemplateID: t.ID, BuildID: b.id, Status: state, Reason: reason})
}

// buildLogs is GET /templates/{templateID}/builds/{buildID}/logs: the log
// entries from cursor (a time in Unix milliseconds), forward (or backward
// with direction=backward), at most limit (100).
func (s *Server) buildLogs(w http.ResponseWriter, r *http.Request, as who) {
	q := r.URL.Query()
	limit, err := intQuery(q, "limit", 100, 0, 100)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	level, err := levelQuery(q)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	var cursor int64
	if q.Has("cursor") {
		if cursor, err = strconv.ParseInt(q.Get("cursor"), 10, 64); err != nil || cursor < 0 {
			writeError(w, http.StatusBadRequest, "cursor must be a time in Unix milliseconds; got %q", q.Get("cursor"))
			return
		}
	}
	dir := q.Get("direction")
	if dir != "" && dir != "forward" && dir != "backward" {
		writeError(w, http.StatusBadRequest, "direction must be forward or backward; got %q", dir)
		return
	}
	if src := q.Get("source"); src != "" && src != "temporary" && src != "persistent" {
		writeError(w, http.StatusBadRequest, "source must be temporary or persistent; got %q", src)
		return
	}
	_, b, err := s.buildOf(r, as)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	_, all, _ := b.snapshot(0, maxLogEntries, level)
	out := []logEntry{}
	if dir == "backward" {
		for i := len(all) - 1; i >= 0 && len(out) < limit; i-- {
			if cursor == 0 || all[i].Timestamp.UnixMilli() <= cursor {
				out = append(out, all[i])
			}
		}
	} else {
		for _, e := range all {
			if len(out) < limit && e.Timestamp.UnixMilli() >= cursor {
				out = append(out, e)
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": out})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// buildOf is the key's template {templateID} and its build {buildID}, or
// the error that says which is missing.
func (s *Server) buildOf(r *http.Request, as who) (store.E2BTemplate, *build, error) {
	t, err := s.templateOf(r.Context(), as, r.PathValue("templateID"))
	if err != nil {
		return t, nil, err
	}
	b, err := s.builds.get(as.keyID, t.ID, r.PathValue("buildID"))
	return t, b, err
}
