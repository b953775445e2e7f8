package api

import (
	"net/http"
	"time"
)

// sandboxMetrics answers GET /v1/sandboxes/{id}/metrics?from=&to=: the
// sandbox's recent samples (sandbox.Manager.Metrics), within the window
// when one is given (RFC 3339 times or UTC dates, both ends inclusive).
func (s *Server) sandboxMetrics(w http.ResponseWriter, r *http.Request) error {
	var from, to time.Time
	err := checkQuery(r.URL.RawQuery, map[string]queryRule{
		"from": func(name, v string) (err error) { from, err = parseWhen(name, v, false); return err },
		"to":   func(name, v string) (err error) { to, err = parseWhen(name, v, true); return err },
	})
	if err != nil {
		return err
	}
	if !from.IsZero() && !to.IsZero() && to.Before(from) {
		return badRequest("from (%s) must not be after to (%s)", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	ms, err := s.cfg.Manager.Metrics(r.Context(), r.PathValue("id"), from, to)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, SandboxMetrics{Metrics: ms})
	return nil
}
