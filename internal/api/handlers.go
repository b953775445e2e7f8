package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/auth"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/store"
)

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) error {
	var req createSandboxRequest
	// The body may carry a first command with its stdin: exec's cap.
	data, release, err := readBody(r, maxExecBytes)
	defer release()
	if err != nil {
		return err
	}
	// Decoded once (a first command's stdin may be 60 MB): only such a
	// stdin makes a create this large, so without an exec the size is
	// the problem, said before any field's own error.
	err = decodeJSON(data, &req, req.bounds(s.cfg.Limits)...)
	if len(data) > maxJSONBytes && req.Exec == nil {
		return errs.New(errs.TooLarge, "request body is over %d bytes; a create without exec is small", maxJSONBytes)
	}
	if err != nil {
		return err
	}
	if req.Exec != nil {
		if err := checkFirstExec(req.Exec); err != nil {
			return err
		}
	}
	p := sandbox.CreateParams{
		KeyID: keyFrom(r.Context()).ID, Template: req.Template, TimeoutSeconds: req.TimeoutSeconds,
		CPU: req.CPU, MemoryMiB: req.MemoryMiB, DiskMiB: req.DiskMiB, Env: req.Env, Metadata: req.Metadata,
		Network: egressPolicy(req.Network), Secrets: req.Secrets, SecretOwner: secretOwner(r.Context()),
		MaxCostMicros: req.MaxCostMicros, OnLeaseEnd: req.OnLeaseEnd, AutoResume: req.AutoResume,
		PauseMode: req.PauseMode,
		Volumes:   volumeRequests(req.Volumes),
		Snapshot:  req.Snapshot, AnyKeysSnapshot: !tenantOf(r.Context()),
	}
	if req.Exec != nil {
		return s.createWithExec(w, r, p, req.Exec)
	}
	sb, err := s.cfg.Manager.Create(r.Context(), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, toSandbox(sb))
	return nil
}

// listSandboxes filters by ?state= and by metadata as ?metadata.KEY=VALUE.
func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) error {
	f := store.SandboxFilter{Metadata: map[string]string{}}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badRequest("malformed query string: %v", err)
	}
	for name, values := range query {
		if len(values) > 1 {
			return badRequest("query parameter %q is given %d times; give it once", name, len(values))
		}
		if err := checkName("query parameter", name); err != nil {
			return err
		}
		if err := checkName(fmt.Sprintf("the value of %q", name), values[0]); err != nil {
			return err
		}
		switch {
		case name == "state":
			f.State = values[0]
			switch f.State {
			case store.StateStarting, store.StateRunning, store.StatePaused, store.StateStopped:
			default:
				return badRequest("state must be starting, running, paused or stopped; got %q", f.State)
			}
		case strings.HasPrefix(name, "metadata."):
			f.Metadata[strings.TrimPrefix(name, "metadata.")] = values[0]
		default:
			return badRequest("unknown query parameter %q; filter with state= or metadata.KEY=VALUE", name)
		}
	}
	if tenantOf(r.Context()) {
		f.KeyID = keyFrom(r.Context()).ID
	}
	sbs, err := s.cfg.Manager.List(r.Context(), f)
	if err != nil {
		return err
	}
	if err := s.addVolumes(r.Context(), sbs); err != nil {
		return err
	}
	out := SandboxList{Sandboxes: make([]Sandbox, 0, len(sbs))}
	for _, sb := range sbs {
		out.Sandboxes = append(out.Sandboxes, toSandbox(sb))
	}
	if err := s.addCosts(r.Context(), out.Sandboxes); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.cfg.Manager.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	sbs := []store.Sandbox{sb}
	if err := s.addVolumes(r.Context(), sbs); err != nil {
		return err
	}
	out := []Sandbox{toSandbox(sbs[0])}
	if err := s.addCosts(r.Context(), out); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out[0])
	return nil
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) error {
	if err := s.cfg.Manager.Destroy(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request) error {
	var req setTimeoutRequest
	if err := decode(r, &req, req.bounds(s.cfg.Limits)...); err != nil {
		return err
	}
	sb, err := s.cfg.Manager.SetTimeout(r.Context(), r.PathValue("id"), req.TimeoutSeconds)
	if err != nil {
		return err
	}
	if req.OnLeaseEnd != "" || req.AutoResume != nil || req.PauseMode != "" {
		if sb, err = s.cfg.Manager.SetLeasePolicy(r.Context(), sb.ID, req.OnLeaseEnd, req.PauseMode, req.AutoResume); err != nil {
			return err
		}
	}
	out := []Sandbox{toSandbox(sb)}
	if err := s.addCosts(r.Context(), out); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out[0])
	return nil
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) error {
	var req createKeyRequest
	if err := decode(r, &req, req.bounds()...); err != nil {
		return err
	}
	k, secret, err := auth.NewKeyWithLimits(r.Context(), s.cfg.Store, req.Name,
		store.KeyLimits{DailyLimitMicros: req.DailyLimitMicros, Quotas: req.quotas()})
	if err != nil {
		return err
	}
	out := withQuotas(toKey(k), req.DailyLimitMicros, s.cfg.Manager.QuotasOf(req.quotas(), req.DailyLimitMicros > 0))
	out.Secret = secret
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := s.cfg.Store.ListKeys(r.Context())
	if err != nil {
		return err
	}
	limits, err := s.cfg.Store.KeyDailyLimits(r.Context())
	if err != nil {
		return err
	}
	quotas, err := s.cfg.Store.AllKeyQuotas(r.Context())
	if err != nil {
		return err
	}
	out := KeyList{Keys: make([]Key, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, withQuotas(toKey(k), limits[k.ID], s.cfg.Manager.QuotasOf(quotas[k.ID], limits[k.ID] > 0)))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if id == keyFrom(r.Context()).ID {
		return errs.New(errs.Conflict, "refusing to revoke the key this request is authenticated with (%s); use another key", id)
	}
	err := s.cfg.Store.RevokeKey(r.Context(), id, time.Now())
	if errors.Is(err, store.ErrNotFound) {
		return notFound("no live key %q; list keys with GET /v1/keys", id)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
