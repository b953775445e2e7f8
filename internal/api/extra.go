package api

import (
	"context"
	"net/http"

	"withruntime.dev/runtime/internal/auth"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

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

type asKeyCtx struct{}

// AsKey returns a context under which a request served by the API in
// process (Server.ServeHTTP called with it, never a request off the wire:
// no header can set a context value) is authenticated as key instead of by
// its Authorization header. It is for the dashboard, which authenticates the
// key with a session cookie; the API's tenant rules then apply exactly as to
// a bearer token. The key is read again by id for every request, so a key
// revoked since the session began is refused.
func AsKey(ctx context.Context, key store.Key) context.Context {
	return context.WithValue(ctx, asKeyCtx{}, key.ID)
}

// authenticate returns the request's key: the one AsKey set, else the
// Authorization header's bearer token.
func (s *Server) authenticate(r *http.Request) (store.Key, error) {
	if id, ok := r.Context().Value(asKeyCtx{}).(string); ok {
		k, err := s.cfg.Store.GetKey(r.Context(), id)
		if err != nil {
			return store.Key{}, errs.New(errs.Unauthorized, "the signed-in key %s no longer exists; sign in again", id)
		}
		if k.RevokedAt != nil {
			return store.Key{}, errs.New(errs.Unauthorized, "the signed-in key %s (%s) was revoked; sign in with another key", k.ID, k.Name)
		}
		return k, nil
	}
	token, err := bearerToken(r.Header)
	if err != nil {
		return store.Key{}, err
	}
	return auth.Authenticate(r.Context(), s.cfg.Store, token)
}
