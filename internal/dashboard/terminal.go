package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/metrics"
	"withruntime.dev/runtime/sdk/go/wire"
)

// The sandbox page's terminal (static/terminal.js, xterm.js). Opening one
// takes two requests:
//
//  1. POST /ui/sandboxes/{id}/terminal, a form with the session's CSRF token
//     (checked by signedIn, after Go's cross-origin protection), and either
//     cols and rows, to start a login shell on a terminal of that size (a
//     background process with "pty", started through the API as the
//     session's key), or pid, to connect to a process already on a
//     terminal. The answer is JSON: the process's pid and the WebSocket's
//     path with a ticket (ticket.go) for that session, sandbox and process.
//  2. GET /ui/sandboxes/{id}/processes/{pid}/terminal?ticket=T, the
//     WebSocket: refused (403) when it comes from another origin, (403)
//     without a live session, (404 for a tenant key, as the API answers;
//     403 for an administrator) when the sandbox is not the session key's
//     own (ownSandbox), (403) when the ticket is missing, used,
//     expired, or made for another session, sandbox or process; then handed
//     to the API's terminal WebSocket (internal/api/terminal.go) in process
//     as the session's key, which relays it to the sandbox. What travels on
//     it is the API's: binary messages are the terminal's bytes, text
//     messages JSON controls and events (sdk/go/wire/terminal.go).

// loginShell is what a new terminal runs: the sandbox's bash as a login
// shell, or sh (the same command as `withruntime sandbox shell`).
const loginShell = `if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi`

// terminalAnswer is the JSON answer of POST /ui/sandboxes/{id}/terminal.
type terminalAnswer struct {
	// Pid is the process on the terminal.
	Pid int `json:"pid,omitempty"`
	// URL is the WebSocket's path, with its ticket, on this origin.
	URL string `json:"url,omitempty"`
	// Error says why no terminal was opened.
	Error string `json:"error,omitempty"`
}

func writeTerminalAnswer(w http.ResponseWriter, status int, a terminalAnswer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}

// formInt reads a whole number from the form; ok is false when the field
// is missing or not a number from lo to hi.
func formInt(r *http.Request, field string, lo, hi int) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue(field)))
	return n, err == nil && n >= lo && n <= hi
}

// ownSandbox checks that sandbox id is the session key's own: first as the
// API answers the key (a tenant key gets 404 for another key's sandbox),
// then by its owner, since a key without a limit sees every sandbox through
// the API: the dashboard opens terminals only in the signed-in key's own
// sandboxes (403 for another's that an administrator can see), so that a
// dashboard session, a cookie in a browser, never types into a tenant's
// sandbox. An administrator who must can still run `withruntime sandbox
// shell` with its key.
func (d *Dashboard) ownSandbox(ctx context.Context, s *signed, id string) error {
	if err := d.call(ctx, s.key, "GET", "/v1/sandboxes/"+url.PathEscape(id), nil, nil); err != nil {
		return err
	}
	sb, err := d.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	if sb.KeyID != s.key.ID {
		return &apiError{Status: http.StatusForbidden, Code: "forbidden", Message: "sandbox " + id + " belongs to another key (" + sb.KeyID +
			"); the dashboard opens terminals only in the signed-in key's own sandboxes. Use `withruntime sandbox shell " + id + "` with your key instead."}
	}
	return nil
}

// terminalStart starts a shell on a terminal in the sandbox (or finds the
// process to connect to) and answers with a ticket for its WebSocket.
func (d *Dashboard) terminalStart(w http.ResponseWriter, r *http.Request, s *signed) {
	id := r.PathValue("id")
	procs := "/v1/sandboxes/" + url.PathEscape(id) + "/processes"
	if err := d.ownSandbox(r.Context(), s, id); err != nil {
		writeTerminalAnswer(w, statusOf(err), terminalAnswer{Error: err.Error()})
		return
	}
	var p agentapi.Process
	started := false
	if r.PostFormValue("pid") != "" {
		pid, ok := formInt(r, "pid", 1, 1<<22)
		if !ok {
			writeTerminalAnswer(w, http.StatusBadRequest, terminalAnswer{Error: "pid must be the number of a process in the sandbox"})
			return
		}
		if err := d.call(r.Context(), s.key, "GET", procs+"/"+strconv.Itoa(pid), nil, &p); err != nil {
			writeTerminalAnswer(w, statusOf(err), terminalAnswer{Error: err.Error()})
			return
		}
		if p.Pty == nil {
			writeTerminalAnswer(w, http.StatusConflict, terminalAnswer{Error: "process " + strconv.Itoa(pid) +
				" was not started on a terminal, so it has none to open; its output is in the processes API"})
			return
		}
	} else {
		cols, okc := formInt(r, "cols", 1, wire.MaxPtyCols)
		rows, okr := formInt(r, "rows", 1, wire.MaxPtyRows)
		if !okc || !okr {
			writeTerminalAnswer(w, http.StatusBadRequest, terminalAnswer{Error: "cols and rows must be the terminal's size: cols from 1 to " +
				strconv.Itoa(wire.MaxPtyCols) + ", rows from 1 to " + strconv.Itoa(wire.MaxPtyRows)})
			return
		}
		req := agentapi.ExecRequest{Command: loginShell, Pty: &wire.PtySize{Cols: cols, Rows: rows}}
		if err := d.call(r.Context(), s.key, "POST", procs, req, &p); err != nil {
			writeTerminalAnswer(w, statusOf(err), terminalAnswer{Error: "Could not start a shell: " + err.Error()})
			return
		}
		started = true
		d.cfg.Log.Info("dashboard: terminal started", "sandbox", id, "pid", p.Pid, "key", s.key.ID)
	}
	tok, err := d.mintTicket(r.Context(), s, id, p.Pid)
	if err != nil {
		if started { // nobody will connect to it
			_ = d.call(r.Context(), s.key, "POST", procs+"/"+strconv.Itoa(p.Pid)+"/kill", agentapi.KillRequest{Signal: "SIGKILL"}, nil)
		}
		status := http.StatusInternalServerError
		if errors.Is(err, errTicket) {
			status = http.StatusTooManyRequests
		}
		writeTerminalAnswer(w, status, terminalAnswer{Error: err.Error()})
		return
	}
	writeTerminalAnswer(w, http.StatusOK, terminalAnswer{Pid: p.Pid,
		URL: Prefix + "sandboxes/" + url.PathEscape(id) + "/processes/" + strconv.Itoa(p.Pid) + "/terminal?ticket=" + tok})
}

// sameOrigin refuses a WebSocket handshake that a page of another origin
// opened. Browsers send Origin (and Sec-Fetch-Site) on every WebSocket
// handshake and no page can forge them; Go's cross-origin protection, which
// guards the dashboard's forms, lets every GET through, so the WebSocket is
// checked here by the same rules: Sec-Fetch-Site, when present, must be
// same-origin; else Origin, when present, must name this host. A request
// with neither comes from no browser page.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// isWebSocket reports whether r asks for a WebSocket.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") &&
		strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
}

// terminalSocket checks a terminal WebSocket's origin, session and ticket,
// then hands it to the API's terminal WebSocket as the session's key.
func (d *Dashboard) terminalSocket(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !isWebSocket(r) {
		http.Error(w, "This is a terminal's WebSocket: the sandbox's page opens it.", http.StatusBadRequest)
		return
	}
	if !sameOrigin(r) {
		d.cfg.Log.Warn("dashboard: cross-origin terminal WebSocket refused", "path", metrics.LogField(r.URL.Path),
			"origin", metrics.LogField(r.Header.Get("Origin")), "secFetchSite", metrics.LogField(r.Header.Get("Sec-Fetch-Site")))
		http.Error(w, "This terminal was opened from another site, so it was refused. Use the dashboard's own pages.", http.StatusForbidden)
		return
	}
	s, ok := d.session(r)
	if !ok {
		http.Error(w, "You are not signed in (no session, or it expired or is not valid). Sign in again.", http.StatusForbidden)
		return
	}
	pid, err := strconv.Atoi(r.PathValue("pid"))
	if err != nil || pid < 1 {
		http.Error(w, "The process id "+strconv.Quote(r.PathValue("pid"))+" is not a number.", http.StatusBadRequest)
		return
	}
	// Another key's sandbox is refused (404 for a tenant, as the API
	// answers it) before the ticket is looked at.
	if err := d.ownSandbox(r.Context(), s, id); err != nil {
		http.Error(w, err.Error(), statusOf(err))
		return
	}
	if err := d.redeemTicket(r.Context(), r.URL.Query().Get("ticket"), s, id, pid); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, errTicket) {
			status = http.StatusForbidden
			d.cfg.Log.Warn("dashboard: terminal ticket refused", "sandbox", id, "pid", pid, "key", s.key.ID, "err", err)
		}
		http.Error(w, err.Error(), status)
		return
	}
	path := "/v1/sandboxes/" + url.PathEscape(id) + "/processes/" + strconv.Itoa(pid) + "/terminal"
	fwd := r.Clone(api.AsKey(r.Context(), s.key))
	fwd.URL.Path, fwd.URL.RawPath, fwd.URL.RawQuery, fwd.RequestURI = path, "", "", path
	fwd.Header.Del("Cookie") // the API never reads cookies; none should reach it
	d.cfg.API.ServeHTTP(w, fwd)
}
