package dashboard

import (
	"bytes"
	"html/template"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/store"
)

// page parses a page's template as New does.
func page(t *testing.T, name string) *template.Template {
	t.Helper()
	tpl, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// The snapshots page and a sandbox's page list snapshots with their size,
// cost and expiry; a name from the API is escaped.
func TestSnapshotRows(t *testing.T) {
	created := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	expires := created.Add(24 * time.Hour)
	snaps := []api.Snapshot{
		{ID: "snap_aaaa", Name: "warm<x>", SourceSandboxID: "sbx_1", Template: "base", Mode: "full", Bytes: 3 << 20, CostMicros: 1234, CreatedAt: created},
		{ID: "snap_bbbb", SourceSandboxID: "sbx_1", Template: "base", Mode: "filesystem", Bytes: 1536, CreatedAt: created, ExpiresAt: &expires},
	}
	key := store.Key{ID: "key_1"}
	var b bytes.Buffer
	if err := page(t, "snapshots").ExecuteTemplate(&b, "layout", &view{Title: "Snapshots", Nav: "snapshots", Key: &key, Data: snaps}); err != nil {
		t.Fatal(err)
	}
	body := b.String()
	for _, want := range []string{`<tr data-snapshot="snap_aaaa">`, "3.0 MiB", "$0.001234", "warm&lt;x&gt;", "filesystem", "1.5 KiB",
		"2026-12-07 10:00:00Z", `href="/ui/sandboxes/sbx_1"`, `href="/ui/snapshots" class="on"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the snapshots page lacks %q", want)
		}
	}
	b.Reset()
	det := &sandboxDetail{Sandbox: api.Sandbox{ID: "sbx_1", State: "stopped"}, Snapshots: snaps[1:]}
	if err := page(t, "sandbox").ExecuteTemplate(&b, "layout", &view{Title: "Sandbox sbx_1", Key: &key, Data: det}); err != nil {
		t.Fatal(err)
	}
	if body := b.String(); !strings.Contains(body, `<tr data-snapshot="snap_bbbb">`) || strings.Contains(body, "snap_aaaa") || !strings.Contains(body, "<h2>Snapshots</h2>") {
		t.Errorf("the sandbox page's snapshots:\n%s", body)
	}
	b.Reset()
	det.Snapshots = nil
	if err := page(t, "sandbox").ExecuteTemplate(&b, "layout", &view{Key: &key, Data: det}); err != nil || !strings.Contains(b.String(), "None taken.") {
		t.Errorf("no snapshots: %v", err)
	}
}

// A sandbox paused files-only says so in the list and on its page; one
// paused whole says that on its page.
func TestPausedImageMode(t *testing.T) {
	key := store.Key{ID: "key_1"}
	rows := []api.Sandbox{{ID: "sbx_f", State: "paused", ImageMode: "filesystem"}, {ID: "sbx_w", State: "paused", ImageMode: "full"}}
	var b bytes.Buffer
	if err := page(t, "sandboxes").ExecuteTemplate(&b, "layout", &view{Key: &key, Data: &sandboxesData{Rows: rows}}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), ">files only</small>"); n != 1 {
		t.Errorf("the list marks %d sandboxes files only, want 1:\n%s", n, b.String())
	}
	for _, c := range []struct {
		sb   api.Sandbox
		want string
	}{{rows[0], "files only: a resume boots it fresh"}, {rows[1], "whole: processes, memory and files"}} {
		b.Reset()
		if err := page(t, "sandbox").ExecuteTemplate(&b, "layout", &view{Key: &key, Data: &sandboxDetail{Sandbox: c.sb}}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("the page of %s lacks %q", c.sb.ID, c.want)
		}
	}
}
