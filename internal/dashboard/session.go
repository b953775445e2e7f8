package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"

	"withruntime.dev/runtime/internal/auth"
	"withruntime.dev/runtime/internal/metrics"
	"withruntime.dev/runtime/internal/store"
)

// Cookies. Under TLS the session cookie takes the __Host- prefix, which
// browsers accept only with Secure, Path=/ and no Domain; without TLS it is
// scoped to the dashboard's path, so it never travels with API requests.
const (
	sessionCookie     = "wr_session"
	hostSessionCookie = "__Host-wr_session"
	loginCookie       = "wr_login" // the sign-in form's CSRF token (double submit)
)

func cookieName(r *http.Request) string {
	if r.TLS != nil {
		return hostSessionCookie
	}
	return sessionCookie
}

func newToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func hashToken(t string) string {
	sum := sha256.Sum256([]byte(t))
	return hex.EncodeToString(sum[:])
}

// csrfFor is the CSRF token of a session: an HMAC of a fixed label keyed by
// the session's token, so it is bound to the session, needs no storage, and
// tells nothing about the token.
func csrfFor(sessionToken string) string {
	m := hmac.New(sha256.New, []byte(sessionToken))
	m.Write([]byte("withruntime dashboard csrf"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// signed is a signed-in request: its key and its CSRF token.
type signed struct {
	key   store.Key
	admin bool
	csrf  string
	token string
}

func (s *signed) view(title, nav string) *view {
	k := s.key
	return &view{Title: title, Nav: nav, Key: &k, Admin: s.admin, CSRF: s.csrf}
}

// session returns the request's live session and key; ok is false for no
// cookie, an unknown or expired token (a forged cookie included), or a
// revoked key.
func (d *Dashboard) session(r *http.Request) (*signed, bool) {
	c, err := r.Cookie(cookieName(r))
	if err != nil || c.Value == "" || len(c.Value) > 100 {
		return nil, false
	}
	se, err := d.cfg.Store.SessionByHash(r.Context(), hashToken(c.Value), d.cfg.Now())
	if err != nil {
		return nil, false
	}
	k, err := d.cfg.Store.GetKey(r.Context(), se.KeyID)
	if err != nil || k.RevokedAt != nil {
		return nil, false
	}
	limit, err := d.cfg.Store.KeyDailyLimit(r.Context(), k.ID)
	if err != nil {
		return nil, false
	}
	return &signed{key: k, admin: limit <= 0, csrf: csrfFor(c.Value), token: c.Value}, true
}

// signedIn wraps a page that needs a session. Without one, a GET goes to
// the sign-in page (and back after it); anything else is refused. A
// request that changes anything must carry the session's CSRF token in its
// form.
func (d *Dashboard) signedIn(h func(http.ResponseWriter, *http.Request, *signed)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := d.session(r)
		if !ok {
			if _, err := r.Cookie(cookieName(r)); err == nil {
				d.clearSession(w, r)
			}
			if r.Method == http.MethodGet && r.Header.Get("HX-Request") == "" {
				http.Redirect(w, r, Prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			d.refuse(w, r, http.StatusForbidden, "You are not signed in (no session, or it expired or is not valid). Sign in again.")
			return
		}
		if r.Method != http.MethodGet {
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
			if !sameToken(r.PostFormValue("csrf"), s.csrf) {
				d.cfg.Log.Warn("dashboard: form without a valid CSRF token refused", "path", metrics.LogField(r.URL.Path), "key", s.key.ID)
				d.refuse(w, r, http.StatusForbidden, "This form has no valid CSRF token, so it was refused. Reload the page and try again.")
				return
			}
		}
		h(w, r, s)
	}
}

func (d *Dashboard) setCookie(w http.ResponseWriter, r *http.Request, name, value, path string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

func (d *Dashboard) sessionPath(r *http.Request) string {
	if r.TLS != nil {
		return "/" // required by the __Host- prefix
	}
	return Prefix
}

func (d *Dashboard) clearSession(w http.ResponseWriter, r *http.Request) {
	d.setCookie(w, r, cookieName(r), "", d.sessionPath(r), -1)
}

type loginData struct {
	Next string
}

func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	d.showLogin(w, r, http.StatusOK, "")
}

func (d *Dashboard) showLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	tok := newToken()
	d.setCookie(w, r, loginCookie, tok, Prefix+"login", 0)
	d.render(w, status, "login", &view{Title: "Sign in", CSRF: tok, Error: msg, Data: loginData{Next: safeNext(r.FormValue("next"))}})
}

// login signs in with an API key: a new session (its token in the cookie,
// its hash in the store).
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	c, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(r.PostFormValue("csrf"), c.Value) {
		d.showLogin(w, r, http.StatusForbidden, "The sign-in form expired or came from elsewhere; sign in again from this page.")
		return
	}
	key, err := auth.Authenticate(r.Context(), d.cfg.Store, strings.TrimSpace(r.PostFormValue("key")))
	if err != nil {
		d.cfg.Log.Warn("dashboard: sign-in refused", "remote", r.RemoteAddr, "err", err)
		d.showLogin(w, r, http.StatusUnauthorized, "That API key was not accepted: "+err.Error())
		return
	}
	tok := newToken()
	now := d.cfg.Now().UTC()
	if err := d.cfg.Store.InsertSession(r.Context(), store.Session{TokenHash: hashToken(tok), KeyID: key.ID,
		CreatedAt: now, ExpiresAt: now.Add(d.cfg.SessionTTL)}); err != nil {
		d.refuse(w, r, http.StatusInternalServerError, "Could not start a session: "+err.Error())
		return
	}
	d.cfg.Log.Info("dashboard: signed in", "key", key.ID, "name", key.Name, "remote", r.RemoteAddr)
	d.setCookie(w, r, loginCookie, "", Prefix+"login", -1)
	d.setCookie(w, r, cookieName(r), tok, d.sessionPath(r), 0)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request, s *signed) {
	if err := d.cfg.Store.DeleteSession(r.Context(), hashToken(s.token)); err != nil {
		d.refuse(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d.clearSession(w, r)
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// safeNext keeps a post-sign-in destination on the dashboard itself (no
// open redirect).
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || u.IsAbs() || u.Host != "" || !strings.HasPrefix(u.Path, Prefix) ||
		strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return Prefix + "sandboxes"
	}
	return u.RequestURI()
}
