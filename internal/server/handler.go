package server

import (
	"net/http"

	"withruntime.dev/runtime/internal/api"
)

// handler is everything the server serves on its one listener: the API
// (with GET /metrics for keys without a limit), each request given an id,
// logged and measured by the metrics middleware.
func (s *Server) handler(cfg Config) http.Handler {
	h := api.New(api.Config{Manager: s.Manager, Store: s.Store, Templates: s.Templates, Log: cfg.Log,
		MaxUploadBytes: cfg.MaxUploadBytes, Metrics: s.Metrics.Handler()})
	return s.Metrics.Middleware(h)
}
