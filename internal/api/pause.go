package api

import (
	"errors"
	"net/http"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/store"
)

// pauseSandbox is POST /v1/sandboxes/{id}/pause (optional body
// PauseRequest): the sandbox is saved whole (mode "full") or its files
// alone (mode "filesystem") and stopped; 200 with its record (state
// "paused", imageMode the mode). 409 when it is not running (the message
// says its state) or a filesystem pause's archive would pass its disk
// size, 507 when the host has no room for its image (it runs on), 501 for
// a filesystem pause on a driver without one.
func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) error {
	var req PauseRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	id := r.PathValue("id")
	sb, err := s.cfg.Manager.Pause(r.Context(), id, req.Mode)
	if errors.Is(err, driver.ErrChannel) {
		return s.channelRefused(id, err)
	}
	if err != nil {
		return err
	}
	return s.writeSandbox(w, r, sb)
}

// resumeSandbox is POST /v1/sandboxes/{id}/resume (optional body
// ResumeRequest): the sandbox runs again where it was; 200 with its record.
// 409 when it is not paused.
func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request) error {
	var req ResumeRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.TimeoutSeconds < 0 {
		return badRequest("timeoutSeconds must be positive (a lease in seconds) or absent; got %d", req.TimeoutSeconds)
	}
	sb, err := s.cfg.Manager.Resume(r.Context(), r.PathValue("id"), req.TimeoutSeconds)
	if err != nil {
		return err
	}
	return s.writeSandbox(w, r, sb)
}

// writeSandbox answers 200 with sb and its cost so far.
func (s *Server) writeSandbox(w http.ResponseWriter, r *http.Request, sb store.Sandbox) error {
	out := []Sandbox{toSandbox(sb)}
	if err := s.addCosts(r.Context(), out); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out[0])
	return nil
}
