package e2b

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/compat/e2b/envd/filesystempb/filesystempbconnect"
	"withruntime.dev/runtime/internal/compat/e2b/envd/processpb/processpbconnect"
	"withruntime.dev/runtime/internal/store"
)

// The data plane. Every request carries a sandbox's access token
// (X-Access-Token, or E2B-Traffic-Access-Token, to which create and connect
// answer the same token), checked before anything else: its SHA-256 must be a
// token the facade handed out, for the sandbox E2b-Sandbox-Id names when
// that header is there (some JS SDK releases leave it off plain-HTTP file
// requests, so the token alone also routes). Whatever the sandbox's owner,
// the request then runs as that owner's key against Runtime's API, so a
// token opens one sandbox and nothing else.

// Ports the data plane serves (E2b-Sandbox-Port).
const (
	portEnvd = EnvdPort
	portCode = "49999"
)

type sandboxCtx struct{}

// target is the sandbox a data-plane request addresses, and as whom.
type target struct {
	id   string
	as   who
	user string // "user" or "root"
	// paused says the sandbox was paused when the request came, and will
	// not be resumed by it (it was created without autoResume).
	paused bool
}

func targetFrom(ctx context.Context) target {
	t, _ := ctx.Value(sandboxCtx{}).(target)
	return t
}

// keyID is the key the target's requests are made as ("" for a bearer
// token, whose key the API finds).
func (t target) keyID() string {
	if t.as.key == nil {
		return ""
	}
	return t.as.key.ID
}

// base is the API path of the target's sandbox.
func (t target) base() string { return "/v1/sandboxes/" + url.PathEscape(t.id) }

// home is the user's home directory: where relative paths and commands
// without a cwd start, as in E2B.
func (t target) home() string {
	if t.user == "root" {
		return "/root"
	}
	return "/home/user"
}

// abs makes p absolute the way envd does: relative to the user's home, "~"
// being the home.
func (t target) abs(p string) string {
	switch {
	case p == "" || p == "~":
		return t.home()
	case strings.HasPrefix(p, "~/"):
		return path.Join(t.home(), p[2:])
	case !path.IsAbs(p):
		return path.Join(t.home(), p)
	}
	return path.Clean(p)
}

func (s *Server) envdHandler() http.Handler {
	mux := http.NewServeMux()
	procPath, procH := processpbconnect.NewProcessHandler(&processService{s: s})
	fsPath, fsH := filesystempbconnect.NewFilesystemHandler(&filesystemService{s: s})
	mux.Handle(procPath, knownProcedures(procH, procPath, processpbconnect.ProcessListProcedure, processpbconnect.ProcessConnectProcedure,
		processpbconnect.ProcessStartProcedure, processpbconnect.ProcessUpdateProcedure, processpbconnect.ProcessStreamInputProcedure,
		processpbconnect.ProcessSendInputProcedure, processpbconnect.ProcessSendSignalProcedure, processpbconnect.ProcessCloseStdinProcedure))
	mux.Handle(fsPath, knownProcedures(fsH, fsPath, filesystempbconnect.FilesystemStatProcedure, filesystempbconnect.FilesystemMakeDirProcedure,
		filesystempbconnect.FilesystemMoveProcedure, filesystempbconnect.FilesystemListDirProcedure, filesystempbconnect.FilesystemRemoveProcedure,
		filesystempbconnect.FilesystemWatchDirProcedure, filesystempbconnect.FilesystemCreateWatcherProcedure,
		filesystempbconnect.FilesystemGetWatcherEventsProcedure, filesystempbconnect.FilesystemRemoveWatcherProcedure))
	mux.HandleFunc("GET /health", envdHealth)
	mux.HandleFunc("GET /files", s.readFile)
	mux.HandleFunc("POST /files", s.writeFiles)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/process.") || strings.HasPrefix(r.URL.Path, "/filesystem.") {
			unimplemented(w, r)
			return
		}
		writeError(w, http.StatusNotFound, "no route %s %s in envd as Runtime serves it", r.Method, r.URL.Path)
	})
	return s.authEnvd(mux)
}

// envdHealth answers 204 for a running sandbox and 502 for a paused one
// that traffic does not resume, as E2B's proxy does: the SDKs'
// is_running()/isRunning() read 502 as "not running" (the sandbox is kept
// and can be resumed or connected to).
func envdHealth(w http.ResponseWriter, r *http.Request) {
	if t := targetFrom(r.Context()); t.paused {
		writeError(w, http.StatusBadGateway, "the sandbox %s is paused: resume it (or connect to it) to reach it", e2bID(t.id))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// knownProcedures answers a procedure of the service that the contract
// does not have as a Connect "unimplemented" error, as envd does.
func knownProcedures(h http.Handler, prefix string, procs ...string) http.Handler {
	known := map[string]bool{}
	for _, p := range procs {
		known[p] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !known[r.URL.Path] {
			unimplemented(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// unimplemented writes a Connect error body with code unimplemented (HTTP
// 501), which the SDKs raise as their own error.
func unimplemented(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotImplemented)
	msg := fmt.Sprintf("%s is not a procedure Runtime serves; it serves process.Process and filesystem.Filesystem as the e2b SDKs call them", r.URL.Path)
	_, _ = fmt.Fprintf(w, `{"code":"unimplemented","message":%q}`, msg)
}

// authEnvd resolves and checks the sandbox of a data-plane request.
func (s *Server) authEnvd(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, status, err := s.resolve(r)
		if err != nil {
			writeError(w, status, "%v", err)
			return
		}
		if port := r.Header.Get("E2b-Sandbox-Port"); port != "" && port != portEnvd {
			if port == portCode && s.code != nil {
				s.code.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sandboxCtx{}, t)))
				return
			}
			// Any other port: a program in the sandbox (domain.go).
			s.servePort(w, r, t.id, port)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sandboxCtx{}, t)))
	})
}

func codePortNote(code bool) string {
	if code {
		return " and the code interpreter (" + portCode + ")"
	}
	return ""
}

// resolve finds the sandbox an access token opens. Errors come with the
// status to answer: 401 for a missing, unknown or mismatched token (which
// says nothing of whether the sandbox exists), 502 "was not found" for a
// sandbox that has stopped (the SDKs raise their sandbox-not-running
// error on it), 400 for a user that is neither user nor root.
func (s *Server) resolve(r *http.Request) (target, int, error) {
	if isSigned(r) {
		return s.resolveSigned(r)
	}
	token := r.Header.Get("X-Access-Token")
	if token == "" {
		// The same token, as trafficAccessToken: e2b-code-interpreter
		// sends only this header on its /contexts requests.
		token = r.Header.Get("E2b-Traffic-Access-Token")
	}
	if token == "" {
		return target{}, http.StatusUnauthorized, errors.New("the X-Access-Token header is missing: send the envdAccessToken the sandbox's create or connect answered")
	}
	tok, err := s.cfg.Store.E2BTokenByHash(r.Context(), hashToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return target{}, http.StatusUnauthorized, errors.New("the access token opens no sandbox: use the envdAccessToken of the sandbox's create or connect")
	}
	if err != nil {
		return target{}, http.StatusInternalServerError, err
	}
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" && runtimeID(id) != tok.SandboxID {
		return target{}, http.StatusUnauthorized, fmt.Errorf("the access token is not sandbox %s's", id)
	}
	sb, err := s.cfg.Store.GetSandbox(r.Context(), tok.SandboxID)
	if err != nil || sb.State == store.StateStopped {
		return target{}, http.StatusBadGateway, fmt.Errorf("the sandbox %s was not found: it has stopped", tok.SandboxID)
	}
	key, err := s.cfg.Store.GetKey(r.Context(), sb.KeyID)
	if err != nil {
		return target{}, http.StatusUnauthorized, fmt.Errorf("the key that created sandbox %s no longer exists", sb.ID)
	}
	user, err := userOf(r)
	if err != nil {
		return target{}, http.StatusBadRequest, err
	}
	return target{id: sb.ID, as: who{key: &key}, user: user, paused: sb.PausedAt != nil && !sb.AutoResume}, 0, nil
}

// userOf reads the user a request runs as: `Authorization: Basic
// base64("NAME:")` or, on /files, ?username=NAME; absent means "user".
// Runtime sandboxes have the users "user" (uid 1000) and "root".
func userOf(r *http.Request) (string, error) {
	name := r.URL.Query().Get("username")
	if h := r.Header.Get("Authorization"); h != "" && name == "" {
		scheme, cred, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Basic") {
			return "", errors.New("the Authorization header must be Basic base64(\"USER:\") naming the sandbox user")
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		if err != nil {
			return "", errors.New("the Authorization header's Basic credentials are not base64")
		}
		name, _, _ = strings.Cut(string(raw), ":")
	}
	switch name {
	case "", "user":
		return "user", nil
	case "root":
		return "root", nil
	}
	return "", fmt.Errorf("user %q does not exist in Runtime sandboxes: run as \"user\" (uid 1000, the default) or \"root\"", name)
}

// readFile is GET /files?path=P: the file's bytes. A Range (and If-Range)
// goes to Runtime's download as it came, which honours one byte range as
// envd does (206 with Content-Range, 416 with Content-Range: bytes */SIZE,
// anything else the whole file).
func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	t := targetFrom(r.Context())
	p := t.abs(r.URL.Query().Get("path"))
	h := http.Header{}
	for _, name := range []string{"Range", "If-Range"} {
		if v := r.Header.Values(name); len(v) > 0 {
			h[name] = v
		}
	}
	resp, err := s.api.do(r.Context(), t.as, "GET", t.base()+"/files?path="+url.QueryEscape(p), nil, h)
	if err != nil {
		s.writeEnvdError(w, r, err)
		return
	}
	defer resp.Body.Close()
	out := w.Header()
	out.Set("Content-Type", "application/octet-stream")
	out.Set("X-Content-Type-Options", "nosniff")
	out.Set("Cache-Control", "no-store")
	out.Set("Content-Disposition", "attachment")
	// The API checked these (internal/api's sanitizing of agent answers).
	for _, name := range []string{"Content-Length", "Content-Range", "Accept-Ranges", "ETag", "Last-Modified"} {
		if v := resp.Header.Get(name); v != "" {
			out.Set(name, v)
		}
	}
	status := http.StatusOK
	if resp.StatusCode == http.StatusPartialContent {
		status = http.StatusPartialContent
	}
	w.WriteHeader(status)
	_, _ = io.Copy(w, resp.Body)
}

// writeInfo is one entry of the answer to POST /files.
type writeInfo struct {
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Path     string            `json:"path"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// metadataHeader is the prefix of the headers that carry a write's file
// metadata (envd 0.6.2): X-Metadata-KEY: VALUE.
const metadataHeader = "X-Metadata-"

// uploadMetadata is a write's file metadata from its X-Metadata-* headers,
// keys lower-cased, the first value of a repeated one, as envd reads them;
// "" when there is none (the write then leaves the file none), else the
// metadata query parameter of Runtime's PUT /files.
func uploadMetadata(h http.Header) (string, error) {
	m := map[string]string{}
	for name, vs := range h {
		key, ok := strings.CutPrefix(name, metadataHeader)
		if !ok || len(vs) == 0 || key == "" {
			continue
		}
		m[strings.ToLower(key)] = vs[0]
	}
	if len(m) == 0 {
		return "", nil
	}
	if err := agentapi.CheckMetadata(m); err != nil {
		return "", err
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// writeFiles is POST /files: a multipart body (each part "file", named by
// its file name when ?path= is absent), or the raw bytes of one file
// (application/octet-stream, optionally Content-Encoding: gzip).
func (s *Server) writeFiles(w http.ResponseWriter, r *http.Request) {
	t := targetFrom(r.Context())
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	qpath := r.URL.Query().Get("path")
	meta, err := uploadMetadata(r.Header)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	var out []writeInfo
	put := func(p string, body io.Reader, length int64) error {
		p = t.abs(p)
		began := time.Now()
		h := http.Header{"Content-Type": {"application/octet-stream"}}
		q := url.Values{"path": {p}}
		if meta != "" {
			q.Set("metadata", meta)
		}
		resp, err := s.api.doLen(r.Context(), t.as, "PUT", t.base()+"/files?"+q.Encode(), body, length, h)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		// What the sandbox kept (none where its file system has no
		// extended attributes), read from inside it: checked again.
		var fi agentapi.FileInfo
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&fi)
		s.fileOps.add(t.id, fileOp{path: p, at: began, last: lastOfWrite})
		out = append(out, writeInfo{Name: path.Base(p), Type: "file", Path: p, Metadata: agentapi.CleanMetadata(fi.Metadata)})
		return nil
	}
	switch ct {
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeError(w, http.StatusBadRequest, "the multipart body is malformed: %v", err)
				return
			}
			if part.FormName() != "file" {
				writeError(w, http.StatusBadRequest, "a part is named %q; name each file's part \"file\"", part.FormName())
				return
			}
			p := qpath
			if p == "" {
				// The SDKs send the whole path as the file name, which
				// Part.FileName would cut to its last element.
				_, cd, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				p = cd["filename"]
			}
			if p == "" {
				writeError(w, http.StatusBadRequest, "say where to write the file: ?path= or the part's file name")
				return
			}
			if err := put(p, part, -1); err != nil {
				s.writeEnvdError(w, r, err)
				return
			}
		}
	case "application/octet-stream", "":
		if qpath == "" {
			writeError(w, http.StatusBadRequest, "?path= is missing: say where to write the file")
			return
		}
		body, length := io.Reader(r.Body), r.ContentLength
		switch enc := strings.ToLower(r.Header.Get("Content-Encoding")); enc {
		case "", "identity":
		case "gzip":
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				writeError(w, http.StatusBadRequest, "the gzip body is malformed: %v", err)
				return
			}
			body, length = zr, -1
		default:
			writeError(w, http.StatusBadRequest, "Content-Encoding %q is not supported; send gzip or nothing", enc)
			return
		}
		if err := put(qpath, body, length); err != nil {
			s.writeEnvdError(w, r, err)
			return
		}
	default:
		writeError(w, http.StatusBadRequest, "Content-Type %q is not supported; send multipart/form-data or application/octet-stream", ct)
		return
	}
	if len(out) == 0 {
		writeError(w, http.StatusBadRequest, "the body holds no file")
		return
	}
	writeJSON(w, http.StatusOK, out)
}
