package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"withruntime.dev/runtime/internal/egress/secrets"
	"withruntime.dev/runtime/internal/store"
)

// Secrets belong to keys. A tenant key (one with a daily limit) creates,
// lists, uses and deletes only its own secrets; another key's secret is
// answered as if it did not exist (404), in these routes and when a create
// names it. Keys without a limit share the server's own secrets (owner "",
// all secrets from before owners existed), and also see and manage every
// tenant's secrets by naming the owner. Secrets are keyed by (owner, name),
// so two tenants may each have a secret of the same name.

func toSecret(s store.Secret) Secret {
	hosts := s.Hosts
	if hosts == nil {
		hosts = []string{}
	}
	return Secret{Name: s.Name, Owner: s.Owner, Hosts: hosts, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// secretOwner is whose secrets the request's key uses in its sandboxes and
// reaches by default: its own id for a tenant key, "" (the server's) for
// a key without a limit.
func secretOwner(ctx context.Context) string {
	if tenantOf(ctx) {
		return keyFrom(ctx).ID
	}
	return ""
}

// ownerFor resolves the owner a request names (the body's owner or the
// ?owner= parameter; "" when absent). A tenant key reaches only its own
// secrets: naming another key answers 404, whether that key exists or not.
// A key without a limit may name any tenant key.
func (s *Server) ownerFor(ctx context.Context, named string) (string, error) {
	if tenantOf(ctx) {
		if named != "" && named != keyFrom(ctx).ID {
			return "", notFound("no key %q among yours: a tenant key's secrets are its own; leave owner out", named)
		}
		return keyFrom(ctx).ID, nil
	}
	if named == "" {
		return "", nil
	}
	if _, err := s.cfg.Store.GetKey(ctx, named); errors.Is(err, store.ErrNotFound) {
		return "", notFound("no key %q; list keys with GET /v1/keys", named)
	} else if err != nil {
		return "", err
	}
	limit, err := s.cfg.Store.KeyDailyLimit(ctx, named)
	if err != nil {
		return "", err
	}
	if limit <= 0 {
		return "", badRequest("owner %q is a key without a daily limit; such keys share the server's own secrets, so leave owner out", named)
	}
	return named, nil
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
	owner, err := s.ownerFor(r.Context(), req.Owner)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	sec := store.Secret{Owner: owner, Name: req.Name, Value: req.Value, Hosts: req.Hosts}
	if err := s.cfg.Store.PutSecret(r.Context(), sec, now); err != nil {
		return err
	}
	s.cfg.Manager.SecretChanged(r.Context(), owner, req.Name)
	sec, err = s.cfg.Store.SecretInfo(r.Context(), owner, req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, toSecret(sec))
	return nil
}

// listSecrets lists a tenant key's own secrets; for a key without a limit,
// every owner's, or one owner's with ?owner= (empty: the server's own).
func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) error {
	f := store.SecretFilter{AllOwners: !tenantOf(r.Context()) && !r.URL.Query().Has("owner")}
	if !f.AllOwners {
		owner, err := s.ownerFor(r.Context(), r.URL.Query().Get("owner"))
		if err != nil {
			return err
		}
		f.Owner = owner
	}
	list, err := s.cfg.Store.ListSecrets(r.Context(), f)
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

// deleteSecret deletes the key's own secret (a tenant's), or for a key
// without a limit the server's own or, with ?owner=, a tenant's.
func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	owner, err := s.ownerFor(r.Context(), r.URL.Query().Get("owner"))
	if err != nil {
		return err
	}
	err = s.cfg.Store.DeleteSecret(r.Context(), owner, name)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("no secret %q; list yours with GET /v1/secrets", name)
	}
	if err != nil {
		return err
	}
	s.cfg.Manager.SecretChanged(r.Context(), owner, name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
