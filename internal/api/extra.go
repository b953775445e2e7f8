package api

import "net/http"

// extraRoutes are the routes that serve other packages' handlers through
// the API's authentication and tenant rules: /metrics, device login.
func (s *Server) extraRoutes() {
	s.deviceRoutes()
	if s.cfg.Metrics != nil {
		s.handle("GET", "/metrics", func(w http.ResponseWriter, r *http.Request) error {
			s.cfg.Metrics.ServeHTTP(w, r)
			return nil
		})
	}
}
