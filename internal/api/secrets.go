package api

import (
	"errors"
	"net/http"
	"time"

	"withruntime.dev/runtime/internal/egress/secrets"
	"withruntime.dev/runtime/internal/store"
)

// CreateSecretRequest is the body of POST /v1/secrets. The value is
// write-only: no API returns it.
type CreateSecretRequest struct {
	// Name is the environment variable sandboxes see ([A-Za-z_][A-Za-z0-9_]*).
	Name string `json:"name"`
	// Value is the credential (at most 8 KiB, no line breaks).
	Value string `json:"value"`
	// Hosts are the names (or *.wildcards) whose HTTPS requests get the value.
	Hosts []string `json:"hosts"`
}

// Secret is a secret as listed: never its value.
type Secret struct {
	Name      string    `json:"name"`
	Hosts     []string  `json:"hosts"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// SecretList is the body of GET /v1/secrets.
type SecretList struct {
	Secrets []Secret `json:"secrets"`
}

func toSecret(s store.Secret) Secret {
	hosts := s.Hosts
	if hosts == nil {
		hosts = []string{}
	}
	return Secret{Name: s.Name, Hosts: hosts, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// putSecret creates or replaces a secret. Running sandboxes created with it
// send the new value from their next request on.
func (s *Server) putSecret(w http.ResponseWriter, r *http.Request) error {
	var req CreateSecretRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	// Validate never echoes the value.
	if err := secrets.Validate(secrets.Secret{Name: req.Name, Value: req.Value, Hosts: req.Hosts}); err != nil {
		return badRequest("%v", err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	if err := s.cfg.Store.PutSecret(r.Context(), store.Secret{Name: req.Name, Value: req.Value, Hosts: req.Hosts}, now); err != nil {
		return err
	}
	s.cfg.Manager.SecretChanged(r.Context(), req.Name)
	sec, err := s.cfg.Store.GetSecret(r.Context(), req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, toSecret(sec))
	return nil
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) error {
	list, err := s.cfg.Store.ListSecrets(r.Context())
	if err != nil {
		return err
	}
	out := SecretList{Secrets: make([]Secret, 0, len(list))}
	for _, sec := range list {
		out.Secrets = append(out.Secrets, toSecret(sec))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	err := s.cfg.Store.DeleteSecret(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("no secret %q; list them with GET /v1/secrets", name)
	}
	if err != nil {
		return err
	}
	s.cfg.Manager.SecretChanged(r.Context(), name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
