// Package api is Runtime's HTTP API: REST with JSON bodies, NDJSON for
// streams, documented in api/openapi.yaml. Control routes (sandboxes, keys,
// templates) are served here; sandbox-scoped routes (exec, processes, files)
// are checked here and then forwarded to the sandbox's agent.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"withruntime.dev/runtime/internal/auth"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/template"
)

// DefaultMaxUploadBytes caps one file upload (1.5 GiB).
const DefaultMaxUploadBytes = 1536 << 20

// maxJSONBytes caps a JSON request body (1 MiB).
const maxJSONBytes = 1 << 20

// Config configures the API server.
type Config struct {
	Manager   *sandbox.Manager
	Store     *store.Store
	Templates *template.Store
	Log       *slog.Logger
	// MaxUploadBytes caps one file upload; 0 means DefaultMaxUploadBytes.
	MaxUploadBytes int64
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
	for _, ar := range agentRoutes {
		s.handle(ar.method, "/v1/sandboxes/{id}/"+ar.path, s.forwarder(ar.path))
	}
	s.handle("POST", "/v1/keys", s.createKey)
	s.handle("GET", "/v1/keys", s.listKeys)
	s.handle("DELETE", "/v1/keys/{id}", s.revokeKey)
	s.handle("GET", "/v1/templates", s.listTemplates)
	s.handle("GET", "/v1/usage", s.usage)
	s.networkRoutes()
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
	s.register(method, path, func(w http.ResponseWriter, r *http.Request) {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		key, err := auth.Authenticate(r.Context(), s.cfg.Store, strings.TrimSpace(token))
		if err != nil {
			writeError(w, r, err)
			return
		}
		ctx, err := s.scope(r, key, method+" "+path)
		if err != nil {
			writeError(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(ctx, keyCtx{}, key))
		if err := h(w, r); err != nil {
			if isInternal(err) {
				s.cfg.Log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeError(w, r, err)
		}
	})
}

func keyFrom(ctx context.Context) store.Key {
	k, _ := ctx.Value(keyCtx{}).(store.Key)
	return k
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := Health{OK: true}
	for t, st := range s.cfg.Manager.PoolStatus() {
		if h.Pool == nil {
			h.Pool = map[string]PoolStatus{}
		}
		h.Pool[t] = PoolStatus{Size: st.Size, Ready: st.Ready}
	}
	writeJSON(w, http.StatusOK, h)
}

// decode reads exactly one JSON object into v, refusing unknown fields,
// trailing data and bodies over maxJSONBytes. An empty body is an empty object.
func decode(r *http.Request, v any) error {
	body := http.MaxBytesReader(nil, r.Body, maxJSONBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errs.New(errs.TooLarge, "request body is over %d bytes; JSON bodies are small — upload files with PUT .../files", maxJSONBytes)
		}
		return badRequest("reading request body: %v", err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("malformed JSON body: %s", describeJSONError(err))
	}
	if dec.More() {
		return badRequest("malformed JSON body: unexpected data after the JSON object")
	}
	return nil
}

func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s, not a JSON %s", te.Field, te.Type, te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return strings.TrimPrefix(err.Error(), "json: ") + " (check the field's spelling against api/openapi.yaml)"
	}
	return err.Error()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func notFoundRoute(r *http.Request) error {
	return notFound("no route %s %s; the API is described in api/openapi.yaml", r.Method, r.URL.Path)
}
