// Package e2b serves E2B's API over Runtime, so that the unmodified e2b SDKs
// (PyPI e2b 2.63.0 and e2b-code-interpreter 2.11.5, npm e2b 2.51.0) work
// against a Runtime server given E2B_API_URL, E2B_SANDBOX_URL and
// E2B_API_KEY (a Runtime key).
//
// One handler serves both of E2B's planes (serve --e2b-listen):
//
//   - the control plane (E2B_API_URL): POST /sandboxes and /v2/sandboxes,
//     GET /sandboxes and /v2/sandboxes (X-Next-Token pages), GET and DELETE
//     /sandboxes/{id}, POST /sandboxes/{id}/timeout, /pause, /resume,
//     /refreshes, POST /v2/sandboxes/{id}/connect and /sandboxes/{id}/connect,
//     GET /sandboxes/{id}/metrics (metrics.go), PUT /sandboxes/{id}/network, and
//     snapshots and fork (snapshot.go): POST /sandboxes/{id}/snapshots and
//     /fork, GET /snapshots, DELETE /templates/{id} (a snapshot's, or a
//     template's); template builds (templates.go): POST /v3/templates,
//     GET /templates/{id}/files/{hash} and the upload links' PUT,
//     POST /v2/templates/{id}/builds/{build}, GET .../status and .../logs,
//     GET /templates, /v2/templates, /templates/{id}, /templates/aliases/{alias}.
//     Authenticated by X-API-KEY; errors are {"code": HTTP status, "message"}.
//   - the data plane ("envd", E2B_SANDBOX_URL): requests that carry the
//     sandbox's access token (X-Access-Token, handed out at create and
//     connect) and usually E2b-Sandbox-Id and E2b-Sandbox-Port. Port 49983:
//     Connect RPC with the JSON codec (process.Process, filesystem.Filesystem)
//     and plain HTTP GET /health, GET and POST /files. Port 49999: the
//     code interpreter (code.go), POST /execute and /contexts. Any other
//     port is a program in the sandbox, through the API's port relay.
//   - with Config.Domain (serve --e2b-domain, E2B_DOMAIN in the SDKs), the
//     same by host name: api.DOMAIN and PORT-SANDBOX.DOMAIN (domain.go).
//
// The facade holds no sandbox of its own and never talks to the manager or
// an agent directly: each operation is a request to Runtime's API handler in
// process (inproc.go), as the X-API-KEY's key or as the sandbox's owner, so
// every rule of that API applies. docs/ARCHITECTURE.md says why.
package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"withruntime.dev/runtime/internal/metrics"
	"withruntime.dev/runtime/internal/store"
)

// EnvdVersion is the envd version the facade answers. The SDKs switch
// features on by it; everything up to it is served: recursive watch (0.1.4),
// stdin kept open or closed (0.3.0), a default user (0.4.0), closing stdin
// (0.5.2), octet-stream uploads (0.5.7), file metadata (0.6.2: X-Metadata-*
// headers on a write, kept as the file's user.e2b.* extended attributes,
// reported in every EntryInfo), the entry in watch events (0.6.3:
// include_entry) and allow_network_mounts on a watch (0.6.4: envd refuses
// to watch an NFS, CIFS or FUSE mount without it; a Runtime sandbox mounts
// none, so it changes nothing).
const EnvdVersion = "0.6.4"

// EnvdPort is the port of envd in E2B's sandboxes, which the SDKs name in
// E2b-Sandbox-Port.
const EnvdPort = "49983"

// ClientID is the clientID of every sandbox the facade describes.
const ClientID = "withruntime"

// Config configures the facade.
type Config struct {
	// API is Runtime's API handler (internal/api), called in process.
	API http.Handler
	// Store is the server's store: the facade keeps its access tokens
	// there (hashed) and reads keys.
	Store *store.Store
	Log   *slog.Logger
	// Templates maps E2B template names to Runtime's; a name not in it is
	// used as Runtime's template name (default: "base" -> "base",
	// "code-interpreter-v1" -> "code-interpreter").
	Templates map[string]string
	// Domain turns on E2B's domain mode (serve --e2b-domain, E2B_DOMAIN in
	// the SDKs): hosts api.DOMAIN (the control plane) and
	// PORT-SANDBOX.DOMAIN (envd, the code interpreter, and any other port
	// of the sandbox: domain.go). Empty: off; requests are routed by
	// header alone.
	Domain string
	// PublicTraffic is whether a sandbox's ports answer on their
	// PORT-SANDBOX.DOMAIN host without its traffic access token when its
	// create does not say (network.allowPublicTraffic); E2B's default is
	// true.
	PublicTraffic bool
	// SpoolDir holds the files E2B template builds upload, as unnamed
	// files (O_TMPFILE) that vanish with the server (default: the
	// system's temporary directory).
	SpoolDir string
}

// Server is the facade; an http.Handler.
type Server struct {
	cfg     Config
	api     apiClient
	control *http.ServeMux
	envd    http.Handler
	procs   *procTags
	watches *watchers
	// fileOps are the facade's own recent file operations (watch.go).
	fileOps fileOps
	// code serves the code interpreter's port (49999); nil: not served.
	code http.Handler
	// tagsMu serialises what moves template tags or deletes the builds
	// they name (tags.go, a build's finish): a tag assigned to a build
	// while its last tag is removed would otherwise name a deleted build.
	// One process's lock: servers sharing a store (Postgres) can still race.
	tagsMu sync.Mutex
	// builds and uploads are the template builds (templates.go).
	builds  *buildSet
	uploads *uploadSet
	// ctx lives as long as the facade: builds run under it; stop ends
	// them and wg waits for them.
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// New returns the facade's handler.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Templates == nil {
		cfg.Templates = map[string]string{"base": "base", "code-interpreter-v1": "code-interpreter"}
	}
	s := &Server{cfg: cfg, api: apiClient{h: cfg.API}, control: http.NewServeMux(),
		procs: newProcTags(), watches: newWatchers(), builds: newBuildSet(), uploads: newUploadSet()}
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.controlRoutes()
	s.code = s.codeHandler()
	s.envd = s.envdHandler()
	return s
}

// Close stops the watchers the Python SDK left behind and the template
// builds running (each leaves nothing behind), and removes the uploads.
func (s *Server) Close() {
	s.watches.closeAll()
	s.stop()
	s.wg.Wait()
	s.uploads.closeAll()
}

// ServeHTTP sends a data-plane request (one that carries a sandbox access
// token or names a sandbox, or an envd-only path) to envd and the rest to
// the control plane.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Domain != "" && s.serveDomain(w, r) {
		return
	}
	if isEnvd(r) {
		s.envd.ServeHTTP(w, r)
		return
	}
	s.control.ServeHTTP(w, r)
}

func isEnvd(r *http.Request) bool {
	if r.Header.Get("X-Access-Token") != "" || r.Header.Get("E2b-Traffic-Access-Token") != "" || r.Header.Get("E2b-Sandbox-Id") != "" {
		return true
	}
	p := r.URL.Path
	return p == "/files" || strings.HasPrefix(p, "/process.") || strings.HasPrefix(p, "/filesystem.") ||
		p == "/execute" || strings.HasPrefix(p, "/contexts")
}

// e2bError is the control plane's error body.
type e2bError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// writeError answers an error of the control plane (or a plain-HTTP envd
// route) in E2B's shape, {"code": status, "message"}.
func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, e2bError{Code: status, Message: fmt.Sprintf(format, args...)})
}

// writeAPIError answers err (from the in-process API) in E2B's shape.
func (s *Server) writeAPIError(w http.ResponseWriter, r *http.Request, err error) {
	ae := asAPIError(err)
	if ae.Status >= 500 {
		s.cfg.Log.Error("e2b request failed", "method", metrics.LogField(r.Method), "path", metrics.LogField(r.URL.Path), "err", err)
	}
	status := ae.Status
	if ae.Code == "sandbox_paused" {
		status = http.StatusConflict
	}
	writeError(w, status, "%s", ae.Message)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// detach returns a context that keeps ctx's values but not its
// cancellation, for work that must finish once begun (recording a token).
func detach(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
