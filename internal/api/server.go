// Package api is Runtime's HTTP API: REST with JSON bodies, NDJSON for
// streams, documented in api/openapi.yaml. Control routes (sandboxes, keys,
// templates) are served here; sandbox-scoped routes (exec, processes, files)
// are checked here and then forwarded to the sandbox's agent.
package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"withruntime.dev/runtime/internal/auth"
	"withruntime.dev/runtime/internal/device"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/metrics"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/template/image"
	"withruntime.dev/runtime/internal/version"
)

// DefaultMaxUploadBytes caps one file upload (1.5 GiB).
const DefaultMaxUploadBytes = 1536 << 20

// maxJSONBytes caps a JSON request body (1 MiB).
const maxJSONBytes = 1 << 20

// Config configures the API server.
type Config struct {
	Manager *sandbox.Manager
	Store   *store.Store
	// Templates answers the template routes: a *template.Store (the
	// server's template directory, which builds and deletes too) or, on a
	// Kubernetes server, a *registry.Templates (read-only).
	Templates Templates
	Log       *slog.Logger
	// MaxUploadBytes caps one file upload; 0 means DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// Limits are the manager's, for the ranges requests are checked
	// against; the zero value means sandbox.DefaultLimits.
	Limits sandbox.Limits
	// Images configures templates made from images (POST /v1/templates):
	// the byte cap, registry access.
	Images image.Options
	// Metrics serves GET /metrics to keys without a limit (nil: no route).
	Metrics http.Handler
	// Device serves device login, /v1/device/* (nil: no routes).
	Device *device.Service
	// PublicURL is the server's URL as users reach it, for the links that
	// device login prints (default: the request's scheme and Host).
	PublicURL string
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// a request's client (clientAddr); without them the client is the TCP
	// peer, whatever the request's headers say.
	TrustedProxies []netip.Prefix
	// Leader reports the leader election for GET /v1/health (nil: no
	// leader election, no field).
	Leader func() LeaderStatus
}

// Server serves the API. Create it with New; it is an http.Handler.
type Server struct {
	cfg Config
	mux *http.ServeMux
	// allowed lists the methods of each registered path pattern, for the
	// JSON 405 answers of a known path with another method.
	allowed map[string][]string
	paths   []string
}

// New returns the API handler.
func New(cfg Config) *Server {
	if cfg.MaxUploadBytes == 0 {
		cfg.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Limits == (sandbox.Limits{}) {
		cfg.Limits = sandbox.DefaultLimits()
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), allowed: map[string][]string{}}
	s.routes()
	return s
}

func (s *Server) routes() {
	s.register("GET", "/v1/health", s.health)
	s.handle("POST", "/v1/sandboxes", s.createSandbox)
	s.handle("GET", "/v1/sandboxes", s.listSandboxes)
	s.handle("GET", "/v1/sandboxes/{id}", s.getSandbox)
	s.handle("DELETE", "/v1/sandboxes/{id}", s.deleteSandbox)
	s.handle("POST", "/v1/sandboxes/{id}/timeout", s.setTimeout)
	s.handle("POST", "/v1/sandboxes/{id}/pause", s.pauseSandbox)
	s.handle("POST", "/v1/sandboxes/{id}/resume", s.resumeSandbox)
	s.handle("GET", "/v1/sandboxes/{id}/metrics", s.sandboxMetrics)
	s.fileURLRoutes()
	s.snapshotRoutes()
	for _, ar := range agentRoutes {
		s.handle(ar.method, "/v1/sandboxes/{id}/"+ar.path, s.forwarder(ar))
	}
	s.handle("POST", "/v1/keys", s.createKey)
	s.handle("GET", "/v1/keys", s.listKeys)
	s.handle("DELETE", "/v1/keys/{id}", s.revokeKey)
	s.templateRoutes()
	s.handle("GET", "/v1/usage", s.usage)
	s.networkRoutes()
	s.volumeRoutes()
	s.portRoutes()
	s.terminalRoutes()
	s.extraRoutes()
	// A known path with a method it does not have: 405 with Allow, as JSON.
	for _, path := range s.paths {
		allow := s.allowed[path]
		if slices.Contains(allow, "GET") {
			allow = append(allow, "HEAD")
		}
		s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, r, &httpError{status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed,
				msg: fmt.Sprintf("method %s is not allowed on %s; use %s (the API is described in api/openapi.yaml)",
					r.Method, r.URL.Path, strings.Join(allow, ", "))})
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, notFoundRoute(r))
	})
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// register adds an unauthenticated route and records its method.
func (s *Server) register(method, path string, h http.HandlerFunc) {
	if _, ok := s.allowed[path]; !ok {
		s.paths = append(s.paths, path)
	}
	s.allowed[path] = append(s.allowed[path], method)
	s.mux.HandleFunc(method+" "+path, h)
}

type keyCtx struct{}

// handle registers an authenticated route.
func (s *Server) handle(method, path string, h func(http.ResponseWriter, *http.Request) error) {
	s.register(method, path, s.authed(method+" "+path, h))
}

// authed wraps h in authentication and the tenant rules of route (method
// and pattern; method "*" for routes of every method).
func (s *Server) authed(route string, h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, err := s.authenticate(r)
		if err != nil {
			writeError(w, r, err)
			return
		}
		ctx, err := s.scope(r, key, route)
		if err != nil {
			writeError(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(ctx, keyCtx{}, key))
		if err := h(w, r); err != nil {
			if isInternal(err) {
				s.cfg.Log.Error("request failed", "method", metrics.LogField(r.Method), "path", metrics.LogField(r.URL.Path), "err", err)
			}
			writeError(w, r, err)
		}
	}
}

// bearerToken returns the API key of an `Authorization: Bearer <key>`
// header ("" when there is none, for auth.Authenticate to explain). The
// scheme is matched without regard to case (RFC 7235); a bare key, another
// scheme, several keys or several Authorization headers are refused with
// errs.Unauthorized. Messages never repeat the header, which may hold a key.
func bearerToken(h http.Header) (string, error) {
	const want = "send the key as `Authorization: Bearer wr_...`"
	values := h.Values("Authorization")
	switch {
	case len(values) == 0:
		return "", nil
	case len(values) > 1:
		return "", errs.New(errs.Unauthorized, "the request has %d Authorization headers; %s, once", len(values), want)
	}
	scheme, token, found := strings.Cut(strings.TrimSpace(values[0]), " ")
	token = strings.TrimLeft(token, " ")
	switch {
	case scheme == "":
		return "", nil
	case !strings.EqualFold(scheme, "Bearer"):
		if !found && strings.HasPrefix(scheme, auth.TokenPrefix) {
			return "", errs.New(errs.Unauthorized, "the Authorization header holds a bare key, without its scheme; %s", want)
		}
		return "", errs.New(errs.Unauthorized, "the Authorization header must use the Bearer scheme; %s", want)
	case strings.ContainsAny(token, " \t"):
		return "", errs.New(errs.Unauthorized, "the Authorization header holds more than one value after Bearer; %s", want)
	}
	return token, nil
}

func keyFrom(ctx context.Context) store.Key {
	k, _ := ctx.Value(keyCtx{}).(store.Key)
	return k
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := Health{OK: true, Version: version.Get()}
	for t, st := range s.cfg.Manager.PoolStatus() {
		if h.Pool == nil {
			h.Pool = map[string]PoolStatus{}
		}
		h.Pool[t] = PoolStatus{Size: st.Size, Ready: st.Ready, Min: st.Min, Max: st.Max}
	}
	if s.cfg.Leader != nil {
		ls := s.cfg.Leader()
		h.Leader = &ls
	}
	writeJSON(w, http.StatusOK, h)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func notFoundRoute(r *http.Request) error {
	return notFound("no route %s %s; the API is described in api/openapi.yaml", r.Method, r.URL.Path)
}
