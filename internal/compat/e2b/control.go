package e2b

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/auth"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// maxControlBody caps a control-plane request body (1 MiB).
const maxControlBody = 1 << 20

// defaultTimeout is E2B's lease when a create or connect names none (s).
const defaultTimeout = 300

func (s *Server) controlRoutes() {
	h := func(pattern string, f func(http.ResponseWriter, *http.Request, who)) {
		s.control.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("X-API-KEY")
			if key == "" {
				writeError(w, http.StatusUnauthorized, "the X-API-KEY header is missing; send a Runtime API key in it (E2B_API_KEY)")
				return
			}
			// The key before the body, as E2B's API: an unknown key is 401
			// whatever it sends (the native API would check the body first).
			k, err := auth.Authenticate(r.Context(), s.cfg.Store, key)
			if err != nil {
				if errors.Is(err, errs.Unauthorized) {
					writeError(w, http.StatusUnauthorized, "%v", err)
				} else {
					s.writeAPIError(w, r, err)
				}
				return
			}
			if id := r.PathValue("id"); id != "" {
				r.SetPathValue("id", runtimeID(id))
			}
			f(w, r, who{token: key, keyID: k.ID})
		})
	}
	h("POST /sandboxes", s.create)
	h("POST /v2/sandboxes", s.create)
	h("GET /sandboxes", s.listV1)
	h("GET /v2/sandboxes", s.listV2)
	h("GET /sandboxes/{id}", s.get)
	h("DELETE /sandboxes/{id}", s.kill)
	h("POST /sandboxes/{id}/timeout", s.setTimeout)
	h("POST /sandboxes/{id}/refreshes", s.refresh)
	h("POST /sandboxes/{id}/pause", s.pause)
	h("POST /sandboxes/{id}/resume", s.resume)
	h("POST /sandboxes/{id}/connect", s.connect)
	h("POST /v2/sandboxes/{id}/connect", s.connect)
	h("PUT /sandboxes/{id}/network", s.setNetwork)
	h("GET /sandboxes/{id}/metrics", s.metrics)
	h("POST /sandboxes/{id}/snapshots", s.createSnapshot)
	h("POST /sandboxes/{id}/fork", s.fork)
	h("GET /snapshots", s.listSnapshots)
	h("DELETE /templates/{templateID}", s.deleteTemplate)
	s.templateRoutes(h)
	s.control.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"message": "Health check successful"})
	})
	s.control.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no route %s %s in Runtime's E2B-compatible API (README: E2B compatibility)", r.Method, r.URL.Path)
	})
}

// decodeBody reads a JSON body into v; an empty body leaves v as it is.
func decodeBody(r *http.Request, v any) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxControlBody+1))
	if err != nil {
		return fmt.Errorf("reading the body: %v", err)
	}
	if len(data) > maxControlBody {
		return fmt.Errorf("the body is over %d bytes", maxControlBody)
	}
	if strings.TrimSpace(string(data)) == "" {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("the body is not the JSON this route takes: %v", err)
	}
	return nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, as who) {
	var req newSandbox
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := req.check(); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	net, err := policy(req.AllowInternetAccess, req.Network)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	timeout := int64(defaultTimeout)
	if req.Timeout != nil {
		timeout = *req.Timeout
	}
	// The key's own E2B template (Template.build) of that alias or id
	// first, then a snapshot of that id or name, then Runtime's templates.
	tplName, tpl, err := s.runtimeTemplate(r.Context(), as, req.TemplateID)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	snap := ""
	if tpl == nil {
		if snap, err = s.snapshotOf(r.Context(), as, req.TemplateID); err != nil {
			s.writeAPIError(w, r, err)
			return
		}
	}
	in := api.CreateSandboxRequest{Template: tplName,
		TimeoutSeconds: timeout, Env: req.EnvVars, Metadata: req.Metadata, Network: net}
	if tpl != nil {
		in.CPU, in.MemoryMiB = float64(tpl.CPUCount), tpl.MemoryMiB
	}
	if snap != "" {
		in.Template, in.Snapshot = "", snap
	}
	if req.AutoPause {
		in.OnLeaseEnd = "pause"
	}
	// autoPauseMemory false (on_timeout {action: pause, mode: filesystem}):
	// the lease-end pause keeps the files alone.
	if req.AutoPauseMemory != nil && !*req.AutoPauseMemory {
		in.PauseMode = "filesystem"
	}
	// E2B resumes a paused sandbox on traffic only when asked to
	// (Runtime's own default is to, for onLeaseEnd pause).
	autoResume := req.AutoResume != nil && req.AutoResume.Enabled
	in.AutoResume = &autoResume
	var sb api.Sandbox
	if err := s.api.json(r.Context(), as, "POST", "/v1/sandboxes", in, &sb); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if snap == "" {
		s.homeKernel(r.Context(), as, sb.ID)
	}
	public := s.cfg.PublicTraffic
	if req.Network != nil && req.Network.AllowPublicTraffic != nil {
		public = *req.Network.AllowPublicTraffic
	}
	var mask string
	if req.Network != nil {
		mask = req.Network.MaskRequestHost
	}
	created, err := s.handOut(r.Context(), as, sb.ID, req.TemplateID, traffic{public: public, mask: mask})
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, created)
}

// mintToken makes a new access token for sandbox id (derived: signed.go)
// and records its hash.
func (s *Server) mintToken(ctx context.Context, id, template string) (string, error) {
	token, nonce, err := s.newToken(ctx, id)
	if err != nil {
		return "", err
	}
	err = s.cfg.Store.InsertE2BToken(ctx, store.E2BToken{Hash: hashToken(token), SandboxID: id, Template: template,
		CreatedAt: time.Now(), Nonce: nonce})
	if err != nil {
		return "", fmt.Errorf("recording the sandbox's access token: %w", err)
	}
	return token, nil
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// sandbox returns one live sandbox as the key sees it; a stopped one (or
// one the key may not see) is an E2B 404.
func (s *Server) sandbox(ctx context.Context, as who, id string) (api.Sandbox, error) {
	var sb api.Sandbox
	if err := s.api.json(ctx, as, "GET", "/v1/sandboxes/"+url.PathEscape(id), nil, &sb); err != nil {
		return sb, err
	}
	if sb.State == "stopped" {
		return sb, &apiError{Status: http.StatusNotFound, Code: "not_found",
			Message: fmt.Sprintf("sandbox %s was not found: it stopped at %s (%s)", id, fmtTime(sb.EndedAt), sb.EndReason)}
	}
	return sb, nil
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

func (s *Server) templates(ctx context.Context) map[string]string {
	m, err := s.cfg.Store.E2BTemplates(ctx)
	if err != nil {
		s.cfg.Log.Warn("e2b templates", "err", err)
	}
	return m
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, as who) {
	id := r.PathValue("id")
	sb, err := s.sandbox(r.Context(), as, id)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	var net api.NetworkPolicy
	netp := &net
	// Not asked of a paused sandbox, which a request to its network would
	// resume when it has autoResume; any failure only leaves it out.
	if sb.State == "paused" || s.api.json(r.Context(), as, "GET", "/v1/sandboxes/"+url.PathEscape(id)+"/network", nil, &net) != nil {
		netp = nil
	}
	d := detail(sb, s.templates(r.Context())[id], netp)
	if d.Network != nil {
		d.Network.AllowPublicTraffic, _ = s.cfg.Store.E2BPublicTraffic(r.Context(), id)
		d.Network.MaskRequestHost, _ = s.cfg.Store.E2BMaskHost(r.Context(), id)
	}
	writeJSON(w, http.StatusOK, d)
}

// list returns the key's live sandboxes in E2B's terms, filtered by the
// query's state (running,paused), metadata (k=v&...: see queryMetadata),
// template and startedAfter, ordered by start time. A filter that cannot
// be read is a 400.
func (s *Server) list(ctx context.Context, as who, q url.Values) ([]listedSandbox, error) {
	states, err := queryStates(q)
	if err != nil {
		return nil, err
	}
	meta, err := queryMetadata(q)
	if err != nil {
		return nil, err
	}
	var all api.SandboxList
	if err := s.api.json(ctx, as, "GET", "/v1/sandboxes", nil, &all); err != nil {
		return nil, err
	}
	var after time.Time
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf("startedAfter must be an RFC 3339 time: %v", err)}
		}
		after = t
	}
	tpls := s.templates(ctx)
	out := []listedSandbox{}
	for _, sb := range all.Sandboxes {
		l := listed(sb, tpls[sb.ID])
		if !slices.Contains(states, l.State) || l.StartedAt.Before(after) ||
			(q.Get("template") != "" && q.Get("template") != l.TemplateID) || !metaMatch(l.Metadata, meta) {
			continue
		}
		out = append(out, l)
	}
	slices.SortStableFunc(out, func(a, b listedSandbox) int {
		return cmp.Or(b.StartedAt.Compare(a.StartedAt), strings.Compare(a.SandboxID, b.SandboxID))
	})
	if q.Get("order") == "asc" {
		slices.Reverse(out)
	}
	return out, nil
}

func (s *Server) listV1(w http.ResponseWriter, r *http.Request, as who) {
	q, err := parseListQuery(r.URL.RawQuery)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	out, err := s.list(r.Context(), as, q)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// listV2 pages the list: limit (1-100, default 100), and nextToken, the
// sandbox id the previous page ended with (answered in X-Next-Token).
func (s *Server) listV2(w http.ResponseWriter, r *http.Request, as who) {
	q, err := parseListQuery(r.URL.RawQuery)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	limit, err := queryLimit(q)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	out, err := s.list(r.Context(), as, q)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if tok := q.Get("nextToken"); tok != "" {
		i := slices.IndexFunc(out, func(l listedSandbox) bool { return l.SandboxID == e2bID(tok) })
		if i < 0 {
			writeError(w, http.StatusBadRequest, "nextToken %q names no sandbox of this list (it may have stopped); list again from the start", tok)
			return
		}
		out = out[i+1:]
	}
	if len(out) > limit {
		out = out[:limit]
		w.Header().Set("X-Next-Token", out[limit-1].SandboxID)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) kill(w http.ResponseWriter, r *http.Request, as who) {
	id := r.PathValue("id")
	if _, err := s.sandbox(r.Context(), as, id); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if err := s.api.json(r.Context(), as, "DELETE", "/v1/sandboxes/"+url.PathEscape(id), nil, nil); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type timeoutRequest struct {
	Timeout int64 `json:"timeout"`
}

func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request, as who) {
	var req timeoutRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if req.Timeout < 0 {
		writeError(w, http.StatusBadRequest, "timeout must be 0 or a positive number of seconds; got %d", req.Timeout)
		return
	}
	// E2B's 0 ends the lease now (what the sandbox does at its end: kill,
	// or pause with lifecycle on_timeout pause); a Runtime lease is at
	// least 1 s, so it ends one second from now.
	s.lease(w, r, as, max(req.Timeout, 1))
}

// lease sets the sandbox's lease to end seconds from now (204).
func (s *Server) lease(w http.ResponseWriter, r *http.Request, as who, seconds int64) {
	id := r.PathValue("id")
	if _, err := s.sandbox(r.Context(), as, id); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	err := s.api.json(r.Context(), as, "POST", "/v1/sandboxes/"+url.PathEscape(id)+"/timeout",
		api.SetTimeoutRequest{TimeoutSeconds: seconds}, nil)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type refreshRequest struct {
	Duration int64 `json:"duration"`
}

func (s *Server) refresh(w http.ResponseWriter, r *http.Request, as who) {
	var req refreshRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	s.lease(w, r, as, cmp.Or(req.Duration, defaultTimeout))
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request, as who) {
	var req struct {
		Memory *bool `json:"memory"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	// memory false (pause(mode="filesystem"), keep_memory=False): the
	// files alone; the resume boots fresh.
	var body any // nil: no body (a typed nil would be JSON null)
	if req.Memory != nil && !*req.Memory {
		body = api.PauseRequest{Mode: "filesystem"}
	}
	id := r.PathValue("id")
	sb, err := s.sandbox(r.Context(), as, id)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if sb.State == "paused" {
		writeError(w, http.StatusConflict, "sandbox %s is already paused", id)
		return
	}
	if err := s.api.json(r.Context(), as, "POST", "/v1/sandboxes/"+url.PathEscape(id)+"/pause", body, nil); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// resume is the older POST /sandboxes/{id}/resume: 201 with a new access
// token; 409 when the sandbox is not paused.
func (s *Server) resume(w http.ResponseWriter, r *http.Request, as who) {
	var req timeoutRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	id := r.PathValue("id")
	sb, err := s.sandbox(r.Context(), as, id)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if sb.State != "paused" {
		writeError(w, http.StatusConflict, "sandbox %s is %s, not paused", id, sb.State)
		return
	}
	s.connectTo(w, r, as, sb, cmp.Or(req.Timeout, defaultTimeout), false)
}

// connect is POST /v2/sandboxes/{id}/connect: a running sandbox answers
// 200 (its lease extended to at least timeout from now), a paused one is
// resumed and answers 201; each answer carries a new access token (the
// ones handed out before keep working).
func (s *Server) connect(w http.ResponseWriter, r *http.Request, as who) {
	var req struct {
		Timeout int64 `json:"timeout"`
		Memory  *bool `json:"memory"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if req.Timeout < 0 {
		writeError(w, http.StatusBadRequest, "timeout must be a positive number of seconds; got %d", req.Timeout)
		return
	}
	sb, err := s.sandbox(r.Context(), as, r.PathValue("id"))
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	// memory false (on_resume="reboot"): a paused sandbox boots fresh from
	// its files, whatever its pause kept.
	s.connectTo(w, r, as, sb, cmp.Or(req.Timeout, defaultTimeout), req.Memory != nil && !*req.Memory)
}

// connectTo resumes sandbox sb if it is paused, or extends its lease to at
// least timeout seconds, and answers with a new access token. With reboot
// a sandbox paused whole comes back booted fresh with its files: resumed,
// paused with its files alone, resumed (Runtime cannot read the files out
// of a memory image without restoring it).
func (s *Server) connectTo(w http.ResponseWriter, r *http.Request, as who, sb api.Sandbox, timeout int64, reboot bool) {
	path := "/v1/sandboxes/" + url.PathEscape(sb.ID)
	status := http.StatusOK
	switch {
	case sb.State == "paused":
		status = http.StatusCreated
		if reboot && sb.ImageMode != "filesystem" {
			if err := s.api.json(r.Context(), as, "POST", path+"/resume", api.ResumeRequest{TimeoutSeconds: timeout}, &sb); err != nil {
				s.writeAPIError(w, r, err)
				return
			}
			if err := s.api.json(r.Context(), as, "POST", path+"/pause", api.PauseRequest{Mode: "filesystem"}, &sb); err != nil {
				s.writeAPIError(w, r, err)
				return
			}
		}
		if err := s.api.json(r.Context(), as, "POST", path+"/resume", api.ResumeRequest{TimeoutSeconds: timeout}, &sb); err != nil {
			s.writeAPIError(w, r, err)
			return
		}
	case time.Until(sb.LeaseEndsAt) < time.Duration(timeout)*time.Second:
		if err := s.api.json(r.Context(), as, "POST", path+"/timeout", api.SetTimeoutRequest{TimeoutSeconds: timeout}, &sb); err != nil {
			s.writeAPIError(w, r, err)
			return
		}
	}
	tpl := cmp.Or(s.templates(r.Context())[sb.ID], sb.Template)
	token, err := s.mintToken(detach(r.Context()), sb.ID, tpl)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if err := s.cfg.Store.InitE2BTraffic(detach(r.Context()), sb.ID, s.cfg.PublicTraffic); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	writeJSON(w, status, createdSandbox{TemplateID: tpl, SandboxID: e2bID(sb.ID), ClientID: ClientID,
		EnvdVersion: EnvdVersion, EnvdAccessToken: token, TrafficAccessToken: &token, Domain: s.domain()})
}

func (s *Server) setNetwork(w http.ResponseWriter, r *http.Request, as who) {
	var req struct {
		networkConfig
		AllowInternetAccess *bool `json:"allow_internet_access"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	p, err := policy(req.AllowInternetAccess, &req.networkConfig)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	id := r.PathValue("id")
	if _, err := s.sandbox(r.Context(), as, id); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if err := s.api.json(r.Context(), as, "PUT", "/v1/sandboxes/"+url.PathEscape(id)+"/network", p, nil); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if req.MaskRequestHost != "" {
		err := s.cfg.Store.InitE2BTraffic(r.Context(), id, s.cfg.PublicTraffic)
		if err == nil {
			err = s.cfg.Store.SetE2BMaskHost(r.Context(), id, req.MaskRequestHost)
		}
		if err != nil {
			s.writeAPIError(w, r, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}
