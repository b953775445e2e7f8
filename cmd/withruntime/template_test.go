package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/api"
)

// `template ls` prints the table on stdout and, when the server says its
// list may be incomplete, the note on stderr after it; without a note,
// nothing on stderr.
func TestTemplateLsNote(t *testing.T) {
	for _, note := range []string{"", "the registry refuses its catalog API; only templates this server has used are listed"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || r.URL.Path != "/v1/templates" || r.Header.Get("Authorization") != "Bearer wr_test" {
				http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
				return
			}
			if note != "" {
				w.Header().Set(api.HeaderTemplatesNote, note)
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(api.TemplateList{Note: note, Templates: []api.Template{
				{Name: "base", SizeBytes: 3 << 20, CreatedAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)},
			}})
		}))
		t.Setenv("WITHRUNTIME_URL", srv.URL)
		t.Setenv("WITHRUNTIME_API_KEY", "wr_test")
		var out, errOut bytes.Buffer
		cmd := newTemplateCmd()
		cmd.SetArgs([]string{"ls"})
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		err := cmd.Execute()
		srv.Close()
		if err != nil {
			t.Fatalf("note %q: %v (stderr %q)", note, err, errOut.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "base ") || !strings.Contains(lines[1], "3MiB") {
			t.Errorf("note %q: stdout %q", note, out.String())
		}
		want := ""
		if note != "" {
			want = "note: " + note + "\n"
		}
		if errOut.String() != want {
			t.Errorf("stderr %q, want %q", errOut.String(), want)
		}
	}
}
