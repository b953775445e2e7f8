package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// Keys with a daily spending limit are tenant keys: the limit is only worth
// something if the key cannot get around it. A tenant key sees and uses only
// the sandboxes it created (others' answer 404, as if they did not exist),
// sees only its own usage, manages and uses only its own secrets (others'
// answer 404; see secrets.go), makes only templates private to itself and
// deletes only those (templates.go), and cannot manage keys (403) — it could
// otherwise make itself a key without a limit or revoke others. Keys
// without a limit administer the server.

type limitedCtx struct{}

// adminRoutes are the routes a tenant key may not use.
var adminRoutes = map[string]bool{
	"POST /v1/keys":        true,
	"GET /v1/keys":         true,
	"DELETE /v1/keys/{id}": true,
	"GET /metrics":         true,
	// Device login approvals make keys.
	"GET /v1/device/requests/{userCode}": true,
	"POST /v1/device/approve":            true,
	"POST /v1/device/deny":               true,
}

// tenantOf reports whether the request's key is a tenant key.
func tenantOf(ctx context.Context) bool {
	limited, _ := ctx.Value(limitedCtx{}).(bool)
	return limited
}

// scope applies the tenant rules to one request of key on route (method and
// pattern) and returns the context the handler runs with.
func (s *Server) scope(r *http.Request, key store.Key, route string) (context.Context, error) {
	limit, err := s.cfg.Store.KeyDailyLimit(r.Context(), key.ID)
	if err != nil {
		return nil, err
	}
	ctx := context.WithValue(r.Context(), limitedCtx{}, limit > 0)
	if limit <= 0 {
		return ctx, nil
	}
	if adminRoutes[route] {
		return nil, errs.New(errs.Forbidden, "this key has a daily spending limit, so it cannot manage keys; use a key without a limit (the server's local key) for that")
	}
	_, pattern, _ := strings.Cut(route, " ")
	if strings.HasPrefix(pattern, "/v1/sandboxes/{id}") {
		id := r.PathValue("id")
		sb, err := s.cfg.Store.GetSandbox(r.Context(), id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && sb.KeyID != key.ID) {
			return nil, errs.New(errs.NotFound, "no sandbox %q; list yours with GET /v1/sandboxes", id)
		}
		if err != nil {
			return nil, err
		}
	}
	return ctx, nil
}
