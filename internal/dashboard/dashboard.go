// Package dashboard is the web dashboard that `withruntime serve` serves
// under /ui/: server-rendered html/template pages with htmx for the live
// parts, uPlot for the usage charts and xterm.js for the sandbox page's
// terminal, all embedded in the binary (no CDN; static/vendor/SOURCES.md
// names each file's npm package, version and licence).
//
// A browser signs in with an API key and gets a session (session.go). Every
// figure the pages show comes from the API itself, called in process as
// the session's key (api.AsKey; apicall.go): the dashboard has no
// authorization of its own, so a tenant key sees exactly what the API shows
// it, and an administrator's pages (keys, device approvals) answer what the
// API answers a tenant (403) when a tenant opens them.
//
// The dashboard shares its origin with the API and with the answers the API
// forwards from sandboxes, so every page has a strict Content-Security-
// Policy (scripts and styles from /ui/static only, nothing inline, no
// framing), X-Frame-Options DENY and nosniff; anything that came from a
// sandbox or a user (metadata, command lines, names) is rendered through
// html/template's contextual escaping, never as HTML; the session cookie is
// HttpOnly, SameSite=Strict, Secure under TLS and scoped to /ui/; and every
// state-changing form carries a CSRF token bound to the session, on top of
// Go's cross-origin protection (Sec-Fetch-Site / Origin). A terminal's
// WebSocket, which can carry no form, is opened with a single-use ticket
// that a CSRF-checked form returns, from the same origin only, in the
// session key's own sandboxes only (terminal.go, ticket.go).
package dashboard

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/metrics"
	"withruntime.dev/runtime/internal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the dashboard is served.
const Prefix = "/ui/"

// CSP is the Content-Security-Policy of every dashboard answer.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// cspWithStyleNonce is CSP that also lets <style> elements carrying nonce
// apply: the sandbox page's terminal (xterm.js) writes its stylesheets as
// <style> elements, which static/terminal.js stamps with the page's nonce.
// The nonce is random per answer, so no <style> that reached the page any
// other way applies.
func cspWithStyleNonce(nonce string) string {
	return strings.Replace(CSP, "style-src 'self';", "style-src 'self' 'nonce-"+nonce+"';", 1)
}

// Config configures the dashboard.
type Config struct {
	// API is the API handler the pages call in process (api.New).
	API http.Handler
	// Store holds sessions and finds the signed-in key.
	Store *store.Store
	// Log receives sign-ins and refusals.
	Log *slog.Logger
	// SessionTTL is how long a session lasts (default 12 h).
	SessionTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Dashboard serves /ui/. Create it with New; it is an http.Handler.
type Dashboard struct {
	cfg   Config
	pages map[string]*template.Template
	h     http.Handler
}

// New returns the dashboard.
func New(cfg Config) (*Dashboard, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	d := &Dashboard{cfg: cfg, pages: map[string]*template.Template{}}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("dashboard template %s: %w", n, err)
		}
		d.pages[base] = t
	}
	mux := http.NewServeMux()
	d.routes(mux)
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.cfg.Log.Warn("dashboard: cross-origin request refused", "method", metrics.LogField(r.Method), "path", metrics.LogField(r.URL.Path),
			"origin", metrics.LogField(r.Header.Get("Origin")), "secFetchSite", metrics.LogField(r.Header.Get("Sec-Fetch-Site")))
		d.refuse(w, r, http.StatusForbidden, "This form was sent from another site, so it was refused. Use the dashboard's own pages.")
	}))
	d.h = cop.Handler(mux)
	return d, nil
}

// ServeHTTP implements http.Handler.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, Prefix+"static/") {
		h.Set("Cache-Control", "no-store")
	}
	d.h.ServeHTTP(w, r)
}

func (d *Dashboard) routes(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix(Prefix+"static/", http.FileServerFS(static))
	mux.Handle("GET "+Prefix+"static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET "+Prefix+"{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"sandboxes", http.StatusSeeOther)
	})
	mux.HandleFunc("GET "+Prefix+"login", d.loginPage)
	mux.HandleFunc("POST "+Prefix+"login", d.login)
	mux.HandleFunc("POST "+Prefix+"logout", d.signedIn(d.logout))
	mux.HandleFunc("GET "+Prefix+"sandboxes", d.signedIn(d.sandboxes))
	mux.HandleFunc("GET "+Prefix+"sandboxes/rows", d.signedIn(d.sandboxRows))
	mux.HandleFunc("GET "+Prefix+"sandboxes/{id}", d.signedIn(d.sandbox))
	mux.HandleFunc("POST "+Prefix+"sandboxes/{id}/kill", d.signedIn(d.kill))
	mux.HandleFunc("POST "+Prefix+"sandboxes/{id}/terminal", d.signedIn(d.terminalStart))
	mux.HandleFunc("GET "+Prefix+"sandboxes/{id}/processes/{pid}/terminal", d.terminalSocket)
	mux.HandleFunc("GET "+Prefix+"usage", d.signedIn(d.usage))
	mux.HandleFunc("GET "+Prefix+"keys", d.signedIn(d.keys))
	mux.HandleFunc("POST "+Prefix+"keys", d.signedIn(d.createKey))
	mux.HandleFunc("POST "+Prefix+"keys/{id}/revoke", d.signedIn(d.revokeKey))
	mux.HandleFunc("GET "+Prefix+"secrets", d.signedIn(d.secrets))
	mux.HandleFunc("POST "+Prefix+"secrets", d.signedIn(d.putSecret))
	mux.HandleFunc("POST "+Prefix+"secrets/delete", d.signedIn(d.deleteSecret))
	mux.HandleFunc("GET "+Prefix+"templates", d.signedIn(d.templates))
	mux.HandleFunc("GET "+Prefix+"volumes", d.signedIn(d.volumes))
	mux.HandleFunc("GET "+Prefix+"snapshots", d.signedIn(d.snapshots))
	mux.HandleFunc("GET "+Prefix+"device", d.signedIn(d.devicePage))
	mux.HandleFunc("POST "+Prefix+"device", d.signedIn(d.deviceDecide))
	mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		d.refuse(w, r, http.StatusNotFound, "No dashboard page at "+r.URL.Path+".")
	})
}

// view is what every page template gets.
type view struct {
	Title string
	Nav   string
	// Key is the signed-in key (nil on the sign-in page).
	Key *store.Key
	// Admin says the key has no limit (for the menu only; the API decides
	// what each call may do).
	Admin bool
	CSRF  string
	Flash string
	Error string
	Data  any
}

// render writes page with v.
func (d *Dashboard) render(w http.ResponseWriter, status int, page string, v *view) {
	base, _, _ := strings.Cut(page, "#")
	t, ok := d.pages[base]
	if !ok {
		http.Error(w, "no page "+page, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	name := "layout"
	if i := strings.IndexByte(page, '#'); i >= 0 { // "page#part": one part of a page, for htmx
		t, name = d.pages[page[:i]], page[i+1:]
	}
	if err := t.ExecuteTemplate(w, name, v); err != nil {
		d.cfg.Log.Error("dashboard: rendering", "page", page, "err", err)
	}
}

// refuse answers with a page that says why.
func (d *Dashboard) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	d.render(w, status, "message", &view{Title: http.StatusText(status), Error: msg})
}
