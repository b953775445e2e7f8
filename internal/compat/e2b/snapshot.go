package e2b

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/sdk/go/wire"
)

// E2B's snapshots and fork over Runtime's (POST /v1/sandboxes/{id}/snapshots
// and /fork, /v1/snapshots): the e2b SDKs' create_snapshot, list_snapshots,
// delete_snapshot, Sandbox.create(<snapshot id>) and fork(count).
//
//   - POST /sandboxes/{id}/snapshots {name?, memory?}: 201 {snapshotID,
//     names}. snapshotID is Runtime's snapshot id ("snap_..."); names is
//     [name] for a named one, else []. memory false (the SDKs'
//     mode="filesystem") is Runtime's files-only snapshot (mode
//     "filesystem"): a sandbox created from it boots fresh with its files.
//     A name the key has given a snapshot already is a 409
//     (E2B would give the name's template a new build instead).
//   - GET /snapshots ?sandboxID, name (an id or a name), limit (1-100),
//     nextToken (the last snapshotID of the previous page, answered in
//     X-Next-Token): the key's ready snapshots, newest first.
//   - DELETE /templates/{templateID}, which the SDKs' delete_snapshot
//     calls: 204 for the key's snapshot of that id or name, 404 otherwise
//     (the SDKs answer false). Deleting a template this way is not
//     served: that is a 501.
//   - POST /sandboxes and /v2/sandboxes whose templateID is a snapshot (an
//     id "snap_...", or a name among the key's snapshots that is not one of
//     Config.Templates' names): a sandbox started from it, with the create's
//     other fields as for a template. Its templateID is the one given.
//   - POST /sandboxes/{id}/fork {timeout?, count?}: 201 with one entry per
//     fork, {"sandbox": created sandbox} or {"error": {code, message}}.
//     count defaults to 1 and timeout to E2B's 15 s. Each fork has the
//     source's network policy, public-traffic choice, metadata and
//     lifecycle (onTimeout, autoResume), and its own access token.
//
// Snapshots are per key as in Runtime's API: another key's snapshot is
// not found, everywhere above.

// snapshotInfo is E2B's SnapshotInfo.
type snapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func toSnapshotInfo(sn api.Snapshot) snapshotInfo {
	names := []string{}
	if sn.Name != "" {
		names = append(names, sn.Name)
	}
	return snapshotInfo{SnapshotID: sn.ID, Names: names}
}

// forkDefaultTimeout is E2B's lease of a fork when the request names none
// (s).
const forkDefaultTimeout = 15

func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request, as who) {
	var req struct {
		Name   string `json:"name"`
		Memory *bool  `json:"memory"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	mode := "full"
	if req.Memory != nil && !*req.Memory {
		mode = "filesystem" // E2B's mode="filesystem": the files alone
	}
	id := r.PathValue("id")
	if _, err := s.sandbox(r.Context(), as, id); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	var sn api.Snapshot
	err := s.api.json(r.Context(), as, "POST", "/v1/sandboxes/"+url.PathEscape(id)+"/snapshots",
		api.CreateSnapshotRequest{Name: req.Name, Mode: mode}, &sn)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSnapshotInfo(sn))
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request, as who) {
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
	path := "/v1/snapshots"
	if src := q.Get("sandboxID"); src != "" {
		path += "?" + url.Values{"sourceSandboxId": {runtimeID(src)}}.Encode()
	}
	var all api.SnapshotList
	if err := s.api.json(r.Context(), as, "GET", path, nil, &all); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	name := q.Get("name")
	out := []snapshotInfo{}
	for _, sn := range all.Snapshots {
		if sn.State != "ready" || (name != "" && name != sn.ID && name != sn.Name) {
			continue
		}
		out = append(out, toSnapshotInfo(sn))
	}
	if tok := q.Get("nextToken"); tok != "" {
		i := slices.IndexFunc(out, func(sn snapshotInfo) bool { return sn.SnapshotID == tok })
		if i < 0 {
			writeError(w, http.StatusBadRequest, "nextToken %q names no snapshot of this list (it may have been deleted); list again from the start", tok)
			return
		}
		out = out[i+1:]
	}
	if len(out) > limit {
		out = out[:limit]
		w.Header().Set("X-Next-Token", out[limit-1].SnapshotID)
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteTemplate is DELETE /templates/{templateID}, which the SDKs'
// delete_snapshot calls with a snapshot id.
func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request, as who) {
	ref := r.PathValue("templateID")
	if t, err := s.templateOf(r.Context(), as, ref); err == nil {
		if err := s.deleteE2BTemplate(r.Context(), as, t); err != nil {
			s.writeAPIError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	} else if asAPIError(err).Status != http.StatusNotFound {
		s.writeAPIError(w, r, err)
		return
	}
	err := s.api.json(r.Context(), as, "DELETE", "/v1/snapshots/"+url.PathEscape(ref), nil, nil)
	if err == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if asAPIError(err).Status != http.StatusNotFound {
		s.writeAPIError(w, r, err)
		return
	}
	if _, isTpl := s.cfg.Templates[ref]; isTpl || s.api.json(r.Context(), as, "GET", "/v1/templates/"+url.PathEscape(ref), nil, nil) == nil {
		writeError(w, http.StatusNotImplemented, "deleting template %q is not supported by Runtime's E2B-compatible API (it deletes the templates Template.build made, and snapshots); use Runtime's DELETE /v1/templates/%s", ref, ref)
		return
	}
	writeError(w, http.StatusNotFound, "no snapshot or template %q: this API key has no such snapshot (Sandbox.list_snapshots() lists them) and built no template of that name or id", ref)
}

// snapshotOf is the snapshot a create's templateID names, or "" when it
// names a template: a snapshot id ("snap_...", never a template), or a
// name among the key's snapshots that is not one of Config.Templates'.
func (s *Server) snapshotOf(ctx context.Context, as who, templateID string) (string, error) {
	if strings.HasPrefix(templateID, "snap_") {
		return templateID, nil
	}
	if _, ok := s.cfg.Templates[templateID]; ok {
		return "", nil
	}
	var sn api.Snapshot
	err := s.api.json(ctx, as, "GET", "/v1/snapshots/"+url.PathEscape(templateID), nil, &sn)
	switch {
	case err == nil:
		return sn.ID, nil
	case asAPIError(err).Status == http.StatusNotFound:
		return "", nil
	}
	return "", err
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request, as who) {
	var req struct {
		Timeout *int64 `json:"timeout"`
		Count   *int   `json:"count"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	timeout := int64(forkDefaultTimeout)
	if req.Timeout != nil {
		timeout = *req.Timeout
	}
	if timeout <= 0 {
		writeError(w, http.StatusBadRequest, "timeout must be a positive number of seconds; got %d", timeout)
		return
	}
	count := 1
	if req.Count != nil {
		count = *req.Count
	}
	id := r.PathValue("id")
	ctx := r.Context()
	sb, err := s.sandbox(ctx, as, id)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if sb.State == "paused" {
		writeError(w, http.StatusConflict, "sandbox %s is paused; connect to it (which resumes it) and fork it then", e2bID(id))
		return
	}
	var net api.NetworkPolicy
	if err := s.api.json(ctx, as, "GET", "/v1/sandboxes/"+url.PathEscape(id)+"/network", nil, &net); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	public, err := s.cfg.Store.E2BPublicTraffic(ctx, id)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	mask, err := s.cfg.Store.E2BMaskHost(ctx, id)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	autoResume := sb.AutoResume
	in := api.ForkRequest{Count: count, TimeoutSeconds: timeout, Metadata: sb.Metadata, Network: &net,
		OnLeaseEnd: sb.OnLeaseEnd, AutoResume: &autoResume}
	var res api.ForkResult
	if err := s.api.json(ctx, as, "POST", "/v1/sandboxes/"+url.PathEscape(id)+"/fork", in, &res); err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	tpl := cmp.Or(s.templates(ctx)[id], sb.Template)
	out := make([]forkResult, len(res.Sandboxes))
	for i, f := range res.Sandboxes {
		if f.Error != nil || f.Sandbox == nil {
			out[i].Error = forkError(f.Error)
			continue
		}
		created, err := s.handOut(ctx, as, f.Sandbox.ID, tpl, traffic{public: public, mask: mask})
		if err != nil {
			ae := asAPIError(err)
			out[i].Error = &e2bError{Code: ae.Status, Message: ae.Message}
			continue
		}
		out[i].Sandbox = &created
	}
	writeJSON(w, http.StatusCreated, out)
}

// forkResult is E2B's SandboxForkResult: exactly one of Sandbox and Error.
type forkResult struct {
	Sandbox *createdSandbox `json:"sandbox,omitempty"`
	Error   *e2bError       `json:"error,omitempty"`
}

// forkError is a fork's failed create in E2B's shape: its code is the
// HTTP status the create would have answered (the SDKs raise by it).
func forkError(d *wire.ErrorDetail) *e2bError {
	if d == nil {
		return &e2bError{Code: http.StatusInternalServerError, Message: "the fork did not start, and the server said no more"}
	}
	return &e2bError{Code: wire.CodeStatus(d.Code), Message: d.Message}
}

// handOut makes a new sandbox reachable through the facade: an access
// token recorded with the E2B template name tpl, and its public-traffic
// choice. On failure the sandbox is destroyed (nobody could reach it).
// traffic is how a sandbox's ports answer in E2B's terms: without the
// traffic access token (public), and with the Host header programs see
// (mask, E2B's mask_request_host; "" for the client's).
type traffic struct {
	public bool
	mask   string
}

func (s *Server) handOut(ctx context.Context, as who, id, tpl string, t traffic) (createdSandbox, error) {
	token, err := s.mintToken(detach(ctx), id, tpl)
	if err == nil {
		err = s.cfg.Store.SetE2BTraffic(detach(ctx), id, t.public)
	}
	if err == nil && t.mask != "" {
		err = s.cfg.Store.SetE2BMaskHost(detach(ctx), id, t.mask)
	}
	if err != nil {
		if derr := s.api.json(detach(ctx), as, "DELETE", "/v1/sandboxes/"+id, nil, nil); derr != nil {
			err = errors.Join(err, derr)
		}
		return createdSandbox{}, err
	}
	return createdSandbox{TemplateID: tpl, SandboxID: e2bID(id), ClientID: ClientID, EnvdVersion: EnvdVersion,
		EnvdAccessToken: token, TrafficAccessToken: &token, Domain: s.domain()}, nil
}
