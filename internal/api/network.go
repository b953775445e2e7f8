package api

import (
	"net/http"

	"withruntime.dev/runtime/internal/egress"
)

// egressPolicy is p as the egress package has it (nil for nil).
func egressPolicy(p *NetworkPolicy) *egress.Policy {
	if p == nil {
		return nil
	}
	return &egress.Policy{Internet: p.Internet, Allow: p.Allow, Deny: p.Deny}
}

func toNetworkPolicy(p egress.Policy) NetworkPolicy {
	return NetworkPolicy{Internet: p.Internet, Allow: p.Allow, Deny: p.Deny}
}

func (s *Server) networkRoutes() {
	s.handle("GET", "/v1/sandboxes/{id}/network", s.getNetwork)
	s.handle("PUT", "/v1/sandboxes/{id}/network", s.putNetwork)
	s.handle("POST", "/v1/secrets", s.putSecret)
	s.handle("GET", "/v1/secrets", s.listSecrets)
	s.handle("DELETE", "/v1/secrets/{name}", s.deleteSecret)
}

func (s *Server) getNetwork(w http.ResponseWriter, r *http.Request) error {
	p, err := s.cfg.Manager.Network(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toNetworkPolicy(p))
	return nil
}

func (s *Server) putNetwork(w http.ResponseWriter, r *http.Request) error {
	var req networkPolicy
	if err := decode(r, &req); err != nil {
		return err
	}
	p, err := s.cfg.Manager.SetNetwork(r.Context(), r.PathValue("id"), *egressPolicy((*NetworkPolicy)(&req)))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toNetworkPolicy(p))
	return nil
}
