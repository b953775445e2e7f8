// Package agent is the in-sandbox half of Runtime: the process that runs as
// PID 1 in every sandbox and serves the routes of internal/agentapi on a unix
// socket. It runs commands as the sandbox user in their own sessions, captures
// or streams their output, keeps background processes, and serves files.
//
// As PID 1 the binary also reaps the orphans it inherits (StartReaping),
// without ever taking a command's exit status.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// Config configures a Server.
type Config struct {
	// Workspace is the directory relative paths and commands start in.
	// Default agentapi.Workspace.
	Workspace string
	// User is the account that requests for "user" (the default) run as and
	// that owns what the files API creates. Default "user".
	User string
	// Version is reported by GET /health.
	Version string
	// Logger receives operational logs. Default slog.Default().
	Logger *slog.Logger
	// MemoryBytes is the sandbox's memory size. When set, and the agent
	// runs under its own PID 1 (in a sandbox, never on a host), the agent is
	// the sandbox's OOM killer and keeps its process table (see guard): a
	// command that would take the sandbox past its memory is killed and
	// reported as oomKilled, and a fork bomb is killed. 0: no guard.
	MemoryBytes int64
	// PidsLimit is how many processes and threads each user may have; the
	// guard kills a command that keeps the sandbox at the limit. 0: the
	// agent's RLIMIT_NPROC.
	PidsLimit int
}

// Server serves the agent protocol. Create it with New; it is safe for
// concurrent use.
type Server struct {
	cfg        Config
	log        *slog.Logger
	envMu      sync.Mutex
	env        []string   // the agent's environment, inherited by commands (see configure)
	passwdFile *fileCache // /etc/passwd
	groupFile  *fileCache // /etc/group
	procs      *registry
	live       *liveSet
	guard      *guard
	kicker     *kicker
	lease      lease
	ckpt       checkpointer // the listener, and a checkpoint pending (checkpoint.go)
	cgroups    *cgroups     // per-command cgroups; nil outside a sandbox or without the mount
	ctxs       *contexts
	temps      tempFiles // the file API's temporary files, which watches do not report
	// memoryBytes is the sandbox's memory size: cfg.MemoryBytes, or what
	// the host sent later (ConfigureRequest.MemoryBytes).
	memoryBytes atomic.Int64
}

// New returns a Server for cfg. It fails if the workspace is not an absolute
// path.
func New(cfg Config) (*Server, error) {
	if cfg.Workspace == "" {
		cfg.Workspace = agentapi.Workspace
	}
	if !filepath.IsAbs(cfg.Workspace) {
		return nil, fmt.Errorf("workspace %q must be an absolute path", cfg.Workspace)
	}
	cfg.Workspace = filepath.Clean(cfg.Workspace)
	if cfg.User == "" {
		cfg.User = defaultUserName
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	live := newLiveSet()
	s := &Server{
		cfg:        cfg,
		log:        cfg.Logger,
		env:        os.Environ(),
		passwdFile: newFileCache("/etc/passwd"),
		groupFile:  newFileCache("/etc/group"),
		procs:      newRegistry(),
		live:       live,
		guard:      newGuard(cfg.Logger, live, cfg.MemoryBytes, cfg.PidsLimit),
		kicker:     newKicker(cfg.Logger, live),
		ctxs:       newContexts(),
	}
	s.lease.end = s.endSandbox
	s.memoryBytes.Store(cfg.MemoryBytes)
	if _, err := nullStdin(); err != nil { // now, before any command runs
		cfg.Logger.Warn("commands without stdin cannot start", "err", err)
	}
	if inSandbox() {
		s.cgroups = openCgroups(cfg.Logger, cgroupRoot)
	}
	return s, nil
}

// start starts a command (exec or background) and puts it in the guard's
// view.
func (s *Server) start(spec procSpec, sk sink) (*proc, error) {
	if s.guard.on {
		spec.hostKillNote = s.guard.hostKillNote
	}
	p, err := startProc(spec, sk, s.cgroups)
	if err != nil {
		return nil, err
	}
	s.live.add(p)
	for _, wake := range []chan struct{}{s.guard.wake, s.kicker.wake} {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	return p, nil
}

// Handler returns the HTTP handler for every agent route. Unknown routes and
// methods get a JSON error like every other failure.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	route := func(method, path string, h func(http.ResponseWriter, *http.Request) error) {
		mux.HandleFunc(method+" "+path, func(w http.ResponseWriter, r *http.Request) {
			if err := h(w, r); err != nil {
				s.writeErr(w, r, err)
			}
		})
	}
	route("GET", "/health", s.handleHealth)
	route("GET", "/usage", s.handleUsage)
	route("POST", "/configure", s.handleConfigure)
	route("POST", "/checkpoint", s.handleCheckpoint)
	route("POST", "/exec", s.handleExec)
	route("POST", "/processes", s.handleStartProcess)
	route("GET", "/processes", s.handleListProcesses)
	route("GET", "/processes/{pid}", s.handleGetProcess)
	route("POST", "/processes/{pid}/wait", s.handleWaitProcess)
	route("POST", "/processes/{pid}/kill", s.handleKillProcess)
	route("POST", "/processes/{pid}/stdin", s.handleWriteStdin)
	route("POST", "/processes/{pid}/stdin/close", s.handleCloseStdin)
	route("GET", "/processes/{pid}/terminal", s.handleTerminal)
	route("POST", "/processes/{pid}/resize", s.handleResize)
	route("GET", "/files", s.handleGetFile)
	route("PUT", "/files", s.handlePutFile)
	route("DELETE", "/files", s.handleDeleteFile)
	route("GET", "/files/list", s.handleListFiles)
	route("GET", "/files/stat", s.handleStatFile)
	route("POST", "/files/mkdir", s.handleMkdir)
	route("POST", "/files/rename", s.handleRename)
	route("GET", "/files/watch", s.handleWatch)
	route("POST", "/contexts", s.handleCreateContext)
	route("GET", "/contexts", s.handleListContexts)
	route("GET", "/contexts/{contextId}", s.handleGetContext)
	route("DELETE", "/contexts/{contextId}", s.handleDeleteContext)
	route("POST", "/contexts/{contextId}/restart", s.handleRestartContext)
	route("PATCH", "/contexts/{contextId}", s.handleUpdateContext)
	route("POST", "/code", s.handleRunCode)
	route("POST", "/ports/{port}/connect", s.handlePortConnect)
	// Method-less patterns catch a known path with a wrong method.
	for _, p := range []string{"/health", "/usage", "/configure", "/checkpoint", "/exec", "/processes", "/processes/{pid}",
		"/processes/{pid}/wait", "/processes/{pid}/kill", "/processes/{pid}/stdin", "/processes/{pid}/stdin/close", "/processes/{pid}/terminal", "/processes/{pid}/resize", "/files", "/files/list",
		"/files/stat", "/files/mkdir", "/files/rename", "/files/watch", "/contexts", "/contexts/{contextId}",
		"/contexts/{contextId}/restart", "/code", "/ports/{port}/connect"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			s.writeErr(w, r, &apiError{status: http.StatusMethodNotAllowed, code: agentapi.CodeBadRequest,
				msg: fmt.Sprintf("method %s is not supported on %s; see the API reference for the methods of this route", r.Method, p)})
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeErr(w, r, notFound("no such route: %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// Listen creates the unix socket at path, replacing a stale one and creating
// its directory. The socket is root's alone (0600): the sandbox user may
// pass through its directory (to the host's files mounted there) but must
// never reach the agent, which runs commands as root. The host connects as
// root through the directory it bind-mounts.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	return ln, nil
}

// Serve serves HTTP/1.1 on ln until ctx is done, then stops accepting,
// kills every running command and returns. It returns nil after a shutdown.
// In a sandbox the guard watches its memory and processes meanwhile, and
// the kicker unsticks stalled pipelines. When the host prepares a
// checkpoint (POST /checkpoint) Serve closes ln, waits for the checkpoint
// and serves on a new listener at ln's unix socket path (checkpoint.go).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	gctx, stopGuard := context.WithCancel(ctx)
	defer stopGuard()
	go s.guard.run(gctx)
	if s.guard.on { // in a gVisor sandbox: see kicker
		go s.kicker.run(gctx)
	}
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	for {
		s.ckpt.setListener(ln)
		errc := make(chan error, 1)
		go func() { errc <- hs.Serve(ln) }()
		select {
		case err := <-errc:
			f, lease := s.ckpt.takePending()
			if f == nil {
				s.Close()
				return err
			}
			if ln, err = s.awaitCheckpoint(ctx, f, lease, ln.Addr().String()); err != nil {
				s.Close()
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("listening again after a checkpoint: %w", err)
			}
			continue
		case <-ctx.Done():
		}
		s.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		_ = hs.Close()
		return nil
	}
}

// EnsureWorkspace creates the workspace if it is missing, owned by the
// sandbox user like every directory the agent creates. An existing
// workspace is left as it is.
func (s *Server) EnsureWorkspace() error {
	acct, err := s.lookupAccount("")
	if err != nil {
		return err
	}
	_, err = mkdirAllOwned(s.cfg.Workspace, acct)
	return err
}

// Close kills every running background command's process tree and every
// kernel.
func (s *Server) Close() {
	s.procs.killAll()
	s.closeContexts()
}

// handleConfigure adds a claiming create's environment to the agent's own
// (a warm-pool sandbox boots without it; commands already running keep
// theirs) and moves the lease backstop (see lease.go).
func (s *Server) handleConfigure(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.ConfigureRequest
	if err := decodeJSON(r, &req, false); err != nil {
		return err
	}
	if req.LeaseEndsAt != nil {
		s.SetLease(*req.LeaseEndsAt)
	}
	if req.MemoryBytes < 0 {
		return badRequest("memoryBytes must be positive; got %d", req.MemoryBytes)
	}
	if req.MemoryBytes > 0 {
		s.memoryBytes.Store(req.MemoryBytes)
		s.guard.resize(req.MemoryBytes)
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(v, "\x00") {
			return badRequest("env variable %q is invalid: names must be non-empty without '=' or NUL, values without NUL", k)
		}
	}
	s.envMu.Lock()
	env := make([]string, 0, len(s.env)+len(req.Env))
	for _, kv := range s.env {
		k, _, _ := strings.Cut(kv, "=")
		if _, replaced := req.Env[k]; !replaced {
			env = append(env, kv)
		}
	}
	for k, v := range req.Env {
		env = append(env, k+"="+v)
	}
	s.env = env
	s.envMu.Unlock()
	s.kernelsConfigured(r.Context(), req.Env, req.WarmKernel)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// environ is the agent's environment as commands inherit it.
func (s *Server) environ() []string {
	s.envMu.Lock()
	defer s.envMu.Unlock()
	return s.env
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, agentapi.Health{OK: true, Version: s.cfg.Version})
	return nil
}

// apiError is a failure with its HTTP status and agentapi error code.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: agentapi.CodeBadRequest, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{status: http.StatusNotFound, code: agentapi.CodeNotFound, msg: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *apiError {
	return &apiError{status: http.StatusConflict, code: agentapi.CodeConflict, msg: fmt.Sprintf(format, args...)}
}

// writeErr sends err as an ErrorBody; errors that are not apiErrors are
// internal (500) and logged.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = &apiError{status: http.StatusInternalServerError, code: agentapi.CodeInternal,
			msg: fmt.Sprintf("internal error in the sandbox agent: %v", err)}
	}
	writeJSON(w, ae.status, agentapi.ErrorBody{Error: agentapi.Error{Code: ae.code, Message: ae.msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// maxJSONBody bounds a JSON request body (stdin travels in it).
const maxJSONBody = 64 << 20

// decodeJSON reads a JSON body into v. An empty body leaves v unchanged when
// allowEmpty. Unknown fields are refused so that typos are caught.
func decodeJSON(r *http.Request, v any, allowEmpty bool) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxJSONBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) && allowEmpty {
			return nil
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{status: http.StatusRequestEntityTooLarge, code: agentapi.CodeTooLarge,
				msg: fmt.Sprintf("request body is larger than %d bytes; pass large input as a file (PUT /files) instead", maxJSONBody)}
		}
		return badRequest("request body is not valid JSON for this route: %v", err)
	}
	if dec.More() {
		return badRequest("request body has data after the JSON object; send exactly one object")
	}
	return nil
}
