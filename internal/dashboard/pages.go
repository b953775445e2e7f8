package dashboard

import (
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// funcs are the template helpers. None returns template.HTML: whatever they
// format is escaped by html/template like any other value.
var funcs = template.FuncMap{
	"usd": func(micros int64) string { return fmt.Sprintf("$%.6f", float64(micros)/1e6) },
	"usd2": func(micros int64) string {
		return fmt.Sprintf("$%.2f", float64(micros)/1e6)
	},
	"age": func(t time.Time) string { return shortDur(time.Since(t)) },
	"ago": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return shortDur(time.Since(*t)) + " ago"
	},
	"left": func(t time.Time) string {
		d := time.Until(t)
		if d <= 0 {
			return "ended"
		}
		return shortDur(d)
	},
	"unix": func(t time.Time) int64 { return t.Unix() },
	"when": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format("2006-01-02 15:04:05Z")
		case *time.Time:
			if v != nil {
				return v.UTC().Format("2006-01-02 15:04:05Z")
			}
		}
		return ""
	},
	"mib":   func(n int64) string { return strconv.FormatInt(n, 10) + " MiB" },
	"bytes": humanBytes,
	"join":  strings.Join,
	"pairs": func(m map[string]string) []string {
		out := make([]string, 0, len(m))
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		sort.Strings(out)
		return out
	},
}

func shortDur(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %02dh", int(d.Hours())/24, int(d.Hours())%24)
}

func humanBytes(n int64) string {
	f := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB"} {
		if f < 1024 || u == "GiB" {
			return fmt.Sprintf("%.1f %s", f, u)
		}
		f /= 1024
	}
	return ""
}

// maxRows caps the sandboxes listed (the newest first).
const maxRows = 200

type sandboxesData struct {
	State    string
	Meta     string
	Query    string // the filter as a query string, for the live rows
	Rows     []api.Sandbox
	Omitted  int
	Sandbox  *sandboxDetail
	Template []api.Template
}

// listQuery turns the page's filter (state, meta "k=v, k2=v2") into the
// API's query string.
func listQuery(state, meta string) (string, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	for _, pair := range strings.Split(meta, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return "", fmt.Errorf("metadata filter %q: write KEY=VALUE, several separated by commas", pair)
		}
		q.Set("metadata."+strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return q.Encode(), nil
}

func (d *Dashboard) listSandboxes(r *http.Request, s *signed) (sandboxesData, error) {
	data := sandboxesData{State: r.FormValue("state"), Meta: r.FormValue("meta")}
	apiQuery, err := listQuery(data.State, data.Meta)
	if err != nil {
		return data, err
	}
	page := url.Values{}
	if data.State != "" {
		page.Set("state", data.State)
	}
	if data.Meta != "" {
		page.Set("meta", data.Meta)
	}
	data.Query = page.Encode()
	var list api.SandboxList
	path := "/v1/sandboxes"
	if apiQuery != "" {
		path += "?" + apiQuery
	}
	if err := d.call(r.Context(), s.key, "GET", path, nil, &list); err != nil {
		return data, err
	}
	data.Rows = list.Sandboxes
	if len(data.Rows) > maxRows {
		data.Omitted = len(data.Rows) - maxRows
		data.Rows = data.Rows[:maxRows]
	}
	return data, nil
}

func (d *Dashboard) sandboxes(w http.ResponseWriter, r *http.Request, s *signed) {
	v := s.view("Sandboxes", "sandboxes")
	data, err := d.listSandboxes(r, s)
	if err != nil {
		v.Error = err.Error()
	}
	v.Data = data
	d.render(w, http.StatusOK, "sandboxes", v)
}

// sandboxRows is the live part of the list, fetched by htmx every second.
func (d *Dashboard) sandboxRows(w http.ResponseWriter, r *http.Request, s *signed) {
	v := s.view("", "")
	data, err := d.listSandboxes(r, s)
	if err != nil {
		v.Error = err.Error()
	}
	v.Data = data
	d.render(w, http.StatusOK, "sandboxes#rows", v)
}

type sandboxDetail struct {
	api.Sandbox
	Network      *api.NetworkPolicy
	NetworkError string
	Processes    []agentapi.Process
	ProcError    string
	// StyleNonce is this answer's CSP nonce for the terminal's <style>
	// elements (cspWithStyleNonce).
	StyleNonce string
	// Own says the sandbox is the signed-in key's, so the page offers a
	// terminal (ownSandbox); Owner is its key's id otherwise.
	Own   bool
	Owner string
	// Snapshots are those taken of the sandbox (as the key may see them),
	// with their size and cost; SnapError says why they could not be read.
	Snapshots []api.Snapshot
	SnapError string
}

func (d *Dashboard) sandbox(w http.ResponseWriter, r *http.Request, s *signed) {
	id := r.PathValue("id")
	v := s.view("Sandbox "+id, "sandboxes")
	det := &sandboxDetail{}
	if err := d.call(r.Context(), s.key, "GET", "/v1/sandboxes/"+url.PathEscape(id), nil, &det.Sandbox); err != nil {
		v.Error = err.Error()
		d.render(w, statusOf(err), "message", v)
		return
	}
	if det.State == "running" {
		var np api.NetworkPolicy
		if err := d.call(r.Context(), s.key, "GET", "/v1/sandboxes/"+url.PathEscape(id)+"/network", nil, &np); err != nil {
			det.NetworkError = err.Error()
		} else {
			det.Network = &np
		}
		var pl agentapi.ProcessList
		if err := d.call(r.Context(), s.key, "GET", "/v1/sandboxes/"+url.PathEscape(id)+"/processes", nil, &pl); err != nil {
			det.ProcError = err.Error()
		} else {
			det.Processes = pl.Processes
		}
	}
	var sl api.SnapshotList
	if err := d.call(r.Context(), s.key, "GET", "/v1/snapshots?sourceSandboxId="+url.QueryEscape(id), nil, &sl); err != nil {
		det.SnapError = err.Error()
	} else {
		det.Snapshots = sl.Snapshots
	}
	v.Flash = r.FormValue("msg")
	if rec, err := d.cfg.Store.GetSandbox(r.Context(), id); err == nil {
		det.Own, det.Owner = rec.KeyID == s.key.ID, rec.KeyID
	}
	det.StyleNonce = newToken()
	w.Header().Set("Content-Security-Policy", cspWithStyleNonce(det.StyleNonce))
	v.Data = det
	d.render(w, http.StatusOK, "sandbox", v)
}

func (d *Dashboard) kill(w http.ResponseWriter, r *http.Request, s *signed) {
	id := r.PathValue("id")
	if err := d.call(r.Context(), s.key, "DELETE", "/v1/sandboxes/"+url.PathEscape(id), nil, nil); err != nil {
		v := s.view("Sandbox "+id, "sandboxes")
		v.Error = "Could not kill " + id + ": " + err.Error()
		d.render(w, statusOf(err), "message", v)
		return
	}
	d.cfg.Log.Info("dashboard: sandbox killed", "sandbox", id, "key", s.key.ID)
	http.Redirect(w, r, Prefix+"sandboxes/"+url.PathEscape(id)+"?msg="+url.QueryEscape("Killed."), http.StatusSeeOther)
}

func (d *Dashboard) templates(w http.ResponseWriter, r *http.Request, s *signed) {
	v := s.view("Templates", "templates")
	var tl api.TemplateList
	if err := d.call(r.Context(), s.key, "GET", "/v1/templates", nil, &tl); err != nil {
		v.Error = err.Error()
	}
	v.Data = tl.Templates
	d.render(w, http.StatusOK, "templates", v)
}

// volumes lists the signed-in key's volumes (every key sees only its own,
// as the API answers it) with their size and the bytes their files take.
func (d *Dashboard) volumes(w http.ResponseWriter, r *http.Request, s *signed) {
	v := s.view("Volumes", "volumes")
	var vl api.VolumeList
	if err := d.call(r.Context(), s.key, "GET", "/v1/volumes", nil, &vl); err != nil {
		v.Error = err.Error()
	}
	v.Data = vl.Volumes
	d.render(w, http.StatusOK, "volumes", v)
}

// snapshots lists the snapshots the signed-in key sees (as GET
// /v1/snapshots answers it: a tenant key its own, an administrator's every
// key's) with their size and what keeping them has cost.
func (d *Dashboard) snapshots(w http.ResponseWriter, r *http.Request, s *signed) {
	v := s.view("Snapshots", "snapshots")
	var sl api.SnapshotList
	if err := d.call(r.Context(), s.key, "GET", "/v1/snapshots", nil, &sl); err != nil {
		v.Error = err.Error()
	}
	v.Data = sl.Snapshots
	d.render(w, http.StatusOK, "snapshots", v)
}

type keysData struct {
	Keys      []api.Key
	Created   *api.Key
	FormName  string
	FormLimit string
}

func (d *Dashboard) keys(w http.ResponseWriter, r *http.Request, s *signed) {
	d.showKeys(w, r, s, http.StatusOK, keysData{FormLimit: "5.00"}, "", r.FormValue("msg"))
}

func (d *Dashboard) showKeys(w http.ResponseWriter, r *http.Request, s *signed, status int, data keysData, errMsg, flash string) {
	v := s.view("Keys", "keys")
	var kl api.KeyList
	if err := d.call(r.Context(), s.key, "GET", "/v1/keys", nil, &kl); err != nil {
		errMsg = strings.TrimSpace(errMsg + " " + err.Error())
		status = max(status, statusOf(err))
	}
	data.Keys = kl.Keys
	v.Data, v.Error, v.Flash = data, errMsg, flash
	d.render(w, status, "keys", v)
}

// parseUSD reads a dollar amount from a form as micro-dollars.
func parseUSD(field, s string) (int64, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "$")
	if s == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f > 1e9 {
		return 0, fmt.Errorf("%s: %q is not an amount in dollars such as 5 or 2.50", field, s)
	}
	return int64(math.Round(f * 1e6)), nil
}

func (d *Dashboard) createKey(w http.ResponseWriter, r *http.Request, s *signed) {
	data := keysData{FormName: r.PostFormValue("name"), FormLimit: r.PostFormValue("limit")}
	limit, err := parseUSD("daily limit", data.FormLimit)
	if err != nil {
		d.showKeys(w, r, s, http.StatusBadRequest, data, err.Error(), "")
		return
	}
	var k api.Key
	if err := d.call(r.Context(), s.key, "POST", "/v1/keys", api.CreateKeyRequest{Name: data.FormName, DailyLimitMicros: limit}, &k); err != nil {
		d.showKeys(w, r, s, statusOf(err), data, err.Error(), "")
		return
	}
	d.cfg.Log.Info("dashboard: key created", "key", k.ID, "by", s.key.ID)
	d.showKeys(w, r, s, http.StatusCreated, keysData{Created: &k, FormLimit: "5.00"}, "", "")
}

func (d *Dashboard) revokeKey(w http.ResponseWriter, r *http.Request, s *signed) {
	id := r.PathValue("id")
	if err := d.call(r.Context(), s.key, "DELETE", "/v1/keys/"+url.PathEscape(id), nil, nil); err != nil {
		d.showKeys(w, r, s, statusOf(err), keysData{FormLimit: "5.00"}, "Could not revoke "+id+": "+err.Error(), "")
		return
	}
	d.cfg.Log.Info("dashboard: key revoked", "key", id, "by", s.key.ID)
	http.Redirect(w, r, Prefix+"keys?msg="+url.QueryEscape("Revoked "+id+"."), http.StatusSeeOther)
}

type secretsData struct {
	Secrets   []api.Secret
	FormName  string
	FormHosts string
}

func (d *Dashboard) secrets(w http.ResponseWriter, r *http.Request, s *signed) {
	d.showSecrets(w, r, s, http.StatusOK, secretsData{}, "", r.FormValue("msg"))
}

func (d *Dashboard) showSecrets(w http.ResponseWriter, r *http.Request, s *signed, status int, data secretsData, errMsg, flash string) {
	v := s.view("Secrets", "secrets")
	var sl api.SecretList
	if err := d.call(r.Context(), s.key, "GET", "/v1/secrets", nil, &sl); err != nil {
		errMsg = strings.TrimSpace(errMsg + " " + err.Error())
	}
	data.Secrets = sl.Secrets
	v.Data, v.Error, v.Flash = data, errMsg, flash
	d.render(w, status, "secrets", v)
}

// putSecret sets or rotates a secret. The value is write-only: it goes to
// the API and is never rendered back, not even after an error.
func (d *Dashboard) putSecret(w http.ResponseWriter, r *http.Request, s *signed) {
	data := secretsData{FormName: r.PostFormValue("name"), FormHosts: r.PostFormValue("hosts")}
	hosts := strings.FieldsFunc(data.FormHosts, func(c rune) bool { return c == ',' || c == ' ' || c == '\n' || c == '\r' })
	req := api.CreateSecretRequest{Name: data.FormName, Value: r.PostFormValue("value"), Hosts: hosts, Owner: r.PostFormValue("owner")}
	if err := d.call(r.Context(), s.key, "POST", "/v1/secrets", req, nil); err != nil {
		d.showSecrets(w, r, s, statusOf(err), data, err.Error(), "")
		return
	}
	http.Redirect(w, r, Prefix+"secrets?msg="+url.QueryEscape("Saved "+data.FormName+"."), http.StatusSeeOther)
}

func (d *Dashboard) deleteSecret(w http.ResponseWriter, r *http.Request, s *signed) {
	name := r.PostFormValue("name")
	path := "/v1/secrets/" + url.PathEscape(name)
	if owner := r.PostFormValue("owner"); owner != "" {
		path += "?owner=" + url.QueryEscape(owner)
	}
	if err := d.call(r.Context(), s.key, "DELETE", path, nil, nil); err != nil {
		d.showSecrets(w, r, s, statusOf(err), secretsData{}, err.Error(), "")
		return
	}
	http.Redirect(w, r, Prefix+"secrets?msg="+url.QueryEscape("Deleted "+name+"."), http.StatusSeeOther)
}
