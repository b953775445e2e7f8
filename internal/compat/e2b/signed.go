package e2b

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"withruntime.dev/runtime/internal/store"
)

// E2B's signed file URLs. The SDKs' download_url and upload_url (downloadUrl,
// uploadUrl) give a URL of envd's GET or POST /files that needs no header:
// its query carries path, username (when the SDK names a user), signature
// and, with an expiry, signature_expiration (Unix seconds). The SDK signs
// it itself, with the sandbox's access token:
//
//	signature = "v1_" + base64(SHA-256("PATH:OPERATION:USER:TOKEN[:EXPIRATION]")), unpadded
//
// OPERATION is "read" (GET) or "write" (POST) and USER the username as in
// the URL ("" for none). The facade keeps tokens only as hashes, so a token
// is derived: HMAC-SHA256 under a key derived from the server's secrets key
// of the sandbox id and a random nonce stored beside the token's hash
// (mintToken). To check a signature the facade works out each of the
// sandbox's derived tokens again and compares in constant time. A URL is
// therefore bound to its sandbox, path, operation and user, refused once
// expired, and refused once the sandbox has stopped (its tokens go with
// it). Tokens minted by an older server (no nonce), or before the secrets
// key was rotated, still open the sandbox but sign no URL.
//
// The URL names its sandbox only by host (49983-SANDBOX.DOMAIN, E2B's
// domain mode: serve --e2b-domain) or by the E2b-Sandbox-Id header; with
// E2B_SANDBOX_URL the SDK's URL is the bare sandbox URL, which names no
// sandbox, and is refused saying so.

// tokenPurpose labels the key access tokens are derived with.
const tokenPurpose = "e2b envd access tokens v1"

// newToken returns a new access token for sandbox id and the nonce it was
// derived from ("" when the server has no secrets key: a random token).
func (s *Server) newToken(ctx context.Context, id string) (token, nonce string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	keys, kerr := s.cfg.Store.DerivedKeys(tokenPurpose)
	if kerr != nil {
		return "wre2b_" + base64.RawURLEncoding.EncodeToString(b), "", nil
	}
	nonce = base64.RawURLEncoding.EncodeToString(b[:16])
	return derivedToken(keys[0], id, nonce), nonce, nil
}

func derivedToken(key []byte, id, nonce string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "\x00" + nonce))
	return "wre2b_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// fileSignature is E2B's v1 signature of a file URL.
func fileSignature(path, op, user, token, expiration string) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if expiration != "" {
		raw += ":" + expiration
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// isSigned says the request is a signed file URL (no access token, a
// signature in the query).
func isSigned(r *http.Request) bool {
	return r.Header.Get("X-Access-Token") == "" && r.Header.Get("E2b-Traffic-Access-Token") == "" &&
		r.URL.Query().Has("signature")
}

// resolveSigned checks a signed file URL and finds its sandbox; errors
// come with their status: 401 for a signature that does not hold, an
// expired one (as envd: "signature is already expired") or a route no URL
// is signed for, 502 for a sandbox that has stopped.
func (s *Server) resolveSigned(r *http.Request) (target, int, error) {
	q := r.URL.Query()
	var op string
	switch {
	case r.URL.Path == "/files" && r.Method == http.MethodGet:
		op = "read"
	case r.URL.Path == "/files" && r.Method == http.MethodPost:
		op = "write"
	default:
		return target{}, http.StatusUnauthorized, fmt.Errorf("%s %s takes no signed URL (only GET and POST /files do): send the access token in X-Access-Token", r.Method, r.URL.Path)
	}
	if exp := q.Get("signature_expiration"); exp != "" {
		at, err := strconv.ParseInt(exp, 10, 64)
		if err != nil {
			return target{}, http.StatusUnauthorized, errors.New("signature_expiration is not a Unix time in seconds")
		}
		if time.Now().Unix() > at {
			// envd's answer, word for word (E2B's tests compare it).
			return target{}, http.StatusUnauthorized, errors.New("signature is already expired")
		}
	}
	id := r.Header.Get("E2b-Sandbox-Id")
	if id == "" {
		return target{}, http.StatusUnauthorized, errors.New("a signed file URL names its sandbox by its host (49983-SANDBOX.DOMAIN): " +
			"use E2B_DOMAIN with a server started with --e2b-domain, or Runtime's POST /v1/sandboxes/{id}/files/url")
	}
	rid := runtimeID(id)
	sb, err := s.cfg.Store.GetSandbox(r.Context(), rid)
	if errors.Is(err, store.ErrNotFound) {
		return target{}, http.StatusUnauthorized, errors.New("the signature does not hold for this sandbox, path, operation and user")
	}
	if err != nil {
		return target{}, http.StatusInternalServerError, err
	}
	if sb.State == store.StateStopped {
		return target{}, http.StatusBadGateway, fmt.Errorf("the sandbox %s was not found: it has stopped, and its signed URLs with it", e2bID(rid))
	}
	if !s.signatureHolds(r.Context(), rid, q.Get("path"), op, q.Get("username"), q.Get("signature"), q.Get("signature_expiration")) {
		return target{}, http.StatusUnauthorized, errors.New("the signature does not hold for this sandbox, path, operation and user")
	}
	key, err := s.cfg.Store.GetKey(r.Context(), sb.KeyID)
	if err != nil {
		return target{}, http.StatusUnauthorized, fmt.Errorf("the key that created sandbox %s no longer exists", e2bID(rid))
	}
	user, err := userOf(r)
	if err != nil {
		return target{}, http.StatusBadRequest, err
	}
	return target{id: rid, as: who{key: &key}, user: user, paused: sb.PausedAt != nil && !sb.AutoResume}, 0, nil
}

// signatureHolds checks sig against every derived token of sandbox rid.
func (s *Server) signatureHolds(ctx context.Context, rid, path, op, user, sig, exp string) bool {
	keys, err := s.cfg.Store.DerivedKeys(tokenPurpose)
	if err != nil {
		return false
	}
	nonces, err := s.cfg.Store.E2BTokenNonces(ctx, rid)
	if err != nil {
		return false
	}
	ok := false
	for _, n := range nonces {
		for _, k := range keys {
			want := fileSignature(path, op, user, derivedToken(k, rid, n), exp)
			if hmac.Equal([]byte(want), []byte(sig)) {
				ok = true
			}
		}
	}
	return ok
}
