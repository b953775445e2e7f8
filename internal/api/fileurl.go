package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/sdk/go/wire"
)

// Signed file URLs. POST /v1/sandboxes/{id}/files/url signs, for the
// caller's key, one operation (read or write) on one path of one sandbox
// until an expiry; GET or PUT /v1/files/signed?sandbox&path&op&expires&key&sig
// then does it with no API key. The signature is HMAC-SHA256 over all of
// those fields under a key derived from the server's secrets key (so every
// server sharing the store checks it, and a copy of the database alone
// cannot forge one): change any field and it fails. A used URL is checked
// again each time: expired, its sandbox stopped, or its key revoked, it is
// refused; what it does then runs as that key through the ordinary file
// routes, every rule of theirs applying (a tenant key reaches its own
// sandboxes only).

// fileURLPurpose labels the key URLs are signed with.
const fileURLPurpose = "signed file urls v1"

// SignedFilesPath is the route signed file URLs are served at.
const SignedFilesPath = "/v1/files/signed"

type fileURLRequest wire.FileURLRequest

func (req *fileURLRequest) bounds() []bound {
	return []bound{intBound("expiresInSeconds", &req.ExpiresInSeconds, 1, wire.MaxFileURLSeconds,
		fmt.Sprintf("the default, %d", wire.DefaultFileURLSeconds), "seconds")}
}

func (req *fileURLRequest) check() error {
	if req.Path == "" {
		return badRequest("path is missing: name the file the URL reads or writes")
	}
	if err := checkNoNUL("path", req.Path); err != nil {
		return err
	}
	if req.Operation != "read" && req.Operation != "write" {
		return badRequest("operation must be \"read\" (a GET URL) or \"write\" (a PUT URL); got %q", req.Operation)
	}
	return nil
}

func (s *Server) fileURLRoutes() {
	s.handle("POST", "/v1/sandboxes/{id}/files/url", s.createFileURL)
	s.register("GET", SignedFilesPath, s.signedFiles)
	s.register("PUT", SignedFilesPath, s.signedFiles)
}

// createFileURL is POST /v1/sandboxes/{id}/files/url.
func (s *Server) createFileURL(w http.ResponseWriter, r *http.Request) error {
	var req fileURLRequest
	if err := decode(r, &req, req.bounds()...); err != nil {
		return err
	}
	sb, err := s.cfg.Manager.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if sb.State == store.StateStopped {
		return errs.New(errs.Stopped, "sandbox %s has stopped: its files are gone", sb.ID)
	}
	keys, err := s.cfg.Store.DerivedKeys(fileURLPurpose)
	if err != nil {
		return errs.New(errs.NotImplemented, "this server has no secrets key to sign URLs with")
	}
	if req.ExpiresInSeconds == 0 {
		req.ExpiresInSeconds = wire.DefaultFileURLSeconds
	}
	exp := time.Now().Add(time.Duration(req.ExpiresInSeconds) * time.Second).Truncate(time.Second).UTC()
	key := keyFrom(r.Context()).ID
	q := url.Values{"sandbox": {sb.ID}, "path": {req.Path}, "op": {req.Operation},
		"expires": {strconv.FormatInt(exp.Unix(), 10)}, "key": {key}}
	q.Set("sig", urlSignature(keys[0], q))
	method := http.MethodGet
	if req.Operation == "write" {
		method = http.MethodPut
	}
	writeJSON(w, http.StatusOK, wire.FileURL{URL: s.publicURL(r) + SignedFilesPath + "?" + q.Encode(), Method: method,
		Path: req.Path, Operation: req.Operation, ExpiresAt: exp})
	return nil
}

// urlSignature signs the fields of a signed URL's query.
func urlSignature(key []byte, q url.Values) string {
	m := hmac.New(sha256.New, key)
	for _, f := range []string{"sandbox", "path", "op", "expires", "key"} {
		m.Write([]byte(f + "=" + q.Get(f) + "\x00"))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// signedFiles is GET and PUT /v1/files/signed: the URL is checked, then
// served as GET or PUT /v1/sandboxes/{id}/files?path= as its key.
func (s *Server) signedFiles(w http.ResponseWriter, r *http.Request) {
	key, q, err := s.checkSignedURL(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	in := r.WithContext(AsKey(r.Context(), key))
	in.URL = &url.URL{Path: "/v1/sandboxes/" + url.PathEscape(q.Get("sandbox")) + "/files", RawQuery: url.Values{"path": {q.Get("path")}}.Encode()}
	in.RequestURI = in.URL.RequestURI()
	in.Header = r.Header.Clone()
	in.Header.Del("Authorization")
	s.mux.ServeHTTP(w, in)
}

// checkSignedURL checks a signed URL's query: its fields all there and
// once, its signature, its expiry, its operation against the method, its
// key and its sandbox. It returns the key to act as.
func (s *Server) checkSignedURL(r *http.Request) (store.Key, url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return store.Key{}, nil, errs.New(errs.Unauthorized, "the signed URL's query does not parse: %v", err)
	}
	for _, f := range []string{"sandbox", "path", "op", "expires", "key", "sig"} {
		if len(q[f]) != 1 {
			return store.Key{}, nil, errs.New(errs.Unauthorized, "the signed URL needs exactly one %q; make one with POST /v1/sandboxes/{id}/files/url", f)
		}
	}
	keys, err := s.cfg.Store.DerivedKeys(fileURLPurpose)
	if err != nil {
		return store.Key{}, nil, errs.New(errs.Unauthorized, "this server has no secrets key to check signed URLs with")
	}
	ok := false
	for _, k := range keys {
		if hmac.Equal([]byte(urlSignature(k, q)), []byte(q.Get("sig"))) {
			ok = true
		}
	}
	if !ok {
		return store.Key{}, nil, errs.New(errs.Unauthorized, "the URL's signature does not hold: it was changed, or signed by another server")
	}
	exp, err := strconv.ParseInt(q.Get("expires"), 10, 64)
	if err != nil || time.Now().Unix() > exp {
		return store.Key{}, nil, errs.New(errs.Forbidden, "the signed URL expired at %s; make a new one", time.Unix(exp, 0).UTC().Format(time.RFC3339))
	}
	want := http.MethodGet
	if q.Get("op") == "write" {
		want = http.MethodPut
	}
	if r.Method != want && !(want == http.MethodGet && r.Method == http.MethodHead) {
		return store.Key{}, nil, errs.New(errs.Forbidden, "the signed URL is for %s (%s), not %s", q.Get("op"), want, r.Method)
	}
	key, err := s.cfg.Store.GetKey(r.Context(), q.Get("key"))
	if err != nil || key.RevokedAt != nil {
		return store.Key{}, nil, errs.New(errs.Unauthorized, "the key that signed the URL no longer exists or was revoked")
	}
	// Whether the key may reach the sandbox is the file route's own
	// check (a tenant key its own sandboxes only), made when it is served.
	sb, err := s.cfg.Store.GetSandbox(r.Context(), q.Get("sandbox"))
	if errors.Is(err, store.ErrNotFound) {
		return store.Key{}, nil, errs.New(errs.NotFound, "no sandbox %q", q.Get("sandbox"))
	}
	if err != nil {
		return store.Key{}, nil, err
	}
	if sb.State == store.StateStopped {
		return store.Key{}, nil, errs.New(errs.Stopped, "sandbox %s has stopped, and its signed URLs with it", sb.ID)
	}
	return key, q, nil
}
