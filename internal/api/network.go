package api

import (
	"net/http"

	"withruntime.dev/runtime/internal/egress"
)

// NetworkPolicy is a sandbox's network: {"internet": false} (the default:
// nothing but loopback), {"internet": true} (every public destination,
// minus deny), or an allow list of names, *.wildcards, addresses and CIDRs.
type NetworkPolicy struct {
	// Internet allows every public destination not on Deny.
	Internet bool `json:"internet"`
	// Allow lists what the sandbox may reach when Internet is false.
	Allow []string `json:"allow,omitempty"`
	// Deny lists exceptions, in the same forms; deny wins over allow.
	Deny []string `json:"deny,omitempty"`
}

func (p *NetworkPolicy) policy() *egress.Policy {
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
	var req NetworkPolicy
	if err := decode(r, &req); err != nil {
		return err
	}
	p, err := s.cfg.Manager.SetNetwork(r.Context(), r.PathValue("id"), *req.policy())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toNetworkPolicy(p))
	return nil
}
