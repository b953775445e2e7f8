package e2b

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/auth"
	"withruntime.dev/runtime/internal/store"
)

// tagFixture: key A's template "app" with its last build (b2, default)
// and an older one tagged v1 (b1); the API stub lists Runtime templates
// (and an untagged old build, e2b.app.0) and records deletes.
type tagFixture struct {
	s          *Server
	secA, secB string
	keyA       string
	deleted    []string
}

func newTagFixture(t *testing.T) *tagFixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &tagFixture{}
	keyA, secA, err := auth.NewKey(ctx, st, "a", 1000)
	if err != nil {
		t.Fatal(err)
	}
	_, secB, err := auth.NewKey(ctx, st, "b", 1000)
	if err != nil {
		t.Fatal(err)
	}
	f.secA, f.secB, f.keyA = secA, secB, keyA.ID
	now := time.Now().UTC().Truncate(time.Millisecond)
	tpl, _, err := st.E2BTemplateFor(ctx, store.E2BTemplate{ID: "tplapp", KeyID: keyA.ID, Alias: "app", CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	tpl.Template, tpl.BuildID, tpl.UpdatedAt = "e2b.app.2", "b2", now
	if err := st.SetE2BTemplateBuild(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ build, rt, tag string }{{"b1", "e2b.app.1", "v1"}, {"b2", "e2b.app.2", "default"}} {
		if err := st.SetE2BTemplateTags(ctx, store.E2BTemplateTag{TemplateID: "tplapp", KeyID: keyA.ID, BuildID: b.build,
			Template: b.rt, CPUCount: 1, CreatedAt: now}, []string{b.tag}); err != nil {
			t.Fatal(err)
		}
	}
	f.s = New(Config{Store: st, API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "GET" && r.URL.Path == "/v1/templates":
			var list []map[string]any
			for _, n := range []string{"base", "e2b.app.0", "e2b.app.1", "e2b.app.2", "e2b.other.1"} {
				if !slices.Contains(f.deleted, n) {
					e := map[string]any{"name": n, "private": n != "base"}
					if n == "e2b.app.1" {
						e["createdAt"] = "2026-01-02T03:04:05Z"
					}
					list = append(list, e)
				}
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"templates": list})
		case r.Method == "DELETE" && strings.HasPrefix(r.URL.Path, "/v1/templates/"):
			f.deleted = append(f.deleted, strings.TrimPrefix(r.URL.Path, "/v1/templates/"))
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, "stub", http.StatusTeapot)
		}
	})})
	return f
}

func (f *tagFixture) do(t *testing.T, secret, method, path, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("X-API-KEY", secret)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	f.s.ServeHTTP(rec, req)
	var e e2bError
	if rec.Code >= 400 && json.Unmarshal(rec.Body.Bytes(), &e) == nil {
		return rec.Code, e.Message
	}
	return rec.Code, rec.Body.String()
}

// TestTagRoutes: assign from a tag, list, resolve "alias:tag" to its
// build's Runtime template, remove (the build's template goes with its
// last tag, never the last build's or another alias's), refuse what is
// not a tag, and show another key nothing.
func TestTagRoutes(t *testing.T) {
	f := newTagFixture(t)
	ctx := context.Background()
	a := who{keyID: f.keyA}
	code, body := f.do(t, f.secA, "POST", "/templates/tags", `{"target":"app:v1","tags":["production","app:stable"]}`)
	if code != http.StatusCreated || body != `{"tags":["production","stable"],"buildID":"b1"}`+"\n" {
		t.Fatalf("assign: %d %s", code, body)
	}
	// The untagged old build went; the tagged ones stay.
	if !slices.Equal(f.deleted, []string{"e2b.app.0"}) {
		t.Errorf("deleted after the assign: %v", f.deleted)
	}
	for ref, want := range map[string]string{"app": "e2b.app.2", "app:default": "e2b.app.2", "app:production": "e2b.app.1", "tplapp:stable": "e2b.app.1"} {
		if got, tpl, err := f.s.runtimeTemplate(ctx, a, ref); err != nil || got != want || tpl == nil || tpl.Template != want {
			t.Errorf("runtimeTemplate(%s): %q %v; want %q", ref, got, err, want)
		}
	}
	if _, _, err := f.s.runtimeTemplate(ctx, a, "app:nope"); err == nil || asAPIError(err).Status != http.StatusNotFound {
		t.Errorf("runtimeTemplate(app:nope): %v", err)
	}
	code, body = f.do(t, f.secA, "GET", "/templates/app/tags", "")
	var tags []templateTag
	if code != 200 || json.Unmarshal([]byte(body), &tags) != nil || len(tags) != 4 {
		t.Fatalf("list: %d %s", code, body)
	}
	for _, c := range []struct {
		secret, method, path, body string
		code                       int
		want                       string
	}{
		{f.secA, "POST", "/templates/tags", `{"target":"app:v1","tags":[":invalid-tag"]}`, 400, `tag ":invalid-tag"`},
		{f.secA, "POST", "/templates/tags", `{"target":"app:v1","tags":["app:"]}`, 400, `tag ""`},
		{f.secA, "POST", "/templates/tags", `{"target":"app:","tags":["x"]}`, 400, `target "app:"`},
		{f.secA, "POST", "/templates/tags", `{"target":":v1","tags":["x"]}`, 404, `no template ""`},
		{f.secA, "POST", "/templates/tags", `{"target":"app:nope","tags":["x"]}`, 404, `has no tag "nope"`},
		{f.secA, "DELETE", "/templates/tags", `{"name":"app","tags":["v1","nope"]}`, 404, `no tag "nope"; nothing was removed`},
		{f.secA, "GET", "/templates/app:v1/tags", "", 400, "without a tag"},
		{f.secB, "POST", "/templates/tags", `{"target":"app:v1","tags":["x"]}`, 404, `no template "app"`},
		{f.secB, "DELETE", "/templates/tags", `{"name":"app","tags":["v1"]}`, 404, `no template "app"`},
		{f.secB, "GET", "/templates/app/tags", "", 404, `no template "app"`},
		{f.secB, "GET", "/templates/tplapp/tags", "", 404, `no template "tplapp"`},
	} {
		if code, body := f.do(t, c.secret, c.method, c.path, c.body); code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s %s %s: %d %s; want %d %q", c.method, c.path, c.body, code, body, c.code, c.want)
		}
	}
	if code, body := f.do(t, f.secA, "DELETE", "/templates/tags", `{"name":"app","tags":["v1","stable"]}`); code != 204 {
		t.Fatalf("remove v1, stable: %d %s", code, body)
	}
	if slices.Contains(f.deleted, "e2b.app.1") {
		t.Errorf("a build production still names was deleted: %v", f.deleted)
	}
	if code, body := f.do(t, f.secA, "DELETE", "/templates/tags", `{"name":"app","tags":["production","default"]}`); code != 204 {
		t.Fatalf("remove production, default: %d %s", code, body)
	}
	// e2b.app.1 went with its last tag; e2b.app.2 is the last build and
	// stays, untagged, reached by "app"; another alias's is untouched.
	if !slices.Equal(f.deleted, []string{"e2b.app.0", "e2b.app.1"}) {
		t.Errorf("deleted after the removes: %v", f.deleted)
	}
	if got, _, err := f.s.runtimeTemplate(ctx, a, "app"); err != nil || got != "e2b.app.2" {
		t.Errorf("app with no default tag: %q %v", got, err)
	}
	if _, _, err := f.s.runtimeTemplate(ctx, a, "app:default"); err == nil {
		t.Errorf("app:default after its removal resolved")
	}
}

// TestTagQueries: E2B's read-only tag routes (tags/count, tags/exists,
// tags/groups with search, sorts and pages, tags/{tag}/assignments) answer
// from the key's tags, refuse what is not a parameter of theirs with a 400
// naming it, and show another key nothing.
func TestTagQueries(t *testing.T) {
	f := newTagFixture(t)
	ctx := context.Background()
	later := time.Now().UTC().Truncate(time.Millisecond).Add(time.Second)
	if err := f.s.cfg.Store.SetE2BTemplateTags(ctx, store.E2BTemplateTag{TemplateID: "tplapp", KeyID: f.keyA, BuildID: "b1",
		Template: "e2b.app.1", CreatedAt: later}, []string{"production"}); err != nil {
		t.Fatal(err)
	}
	get := func(path string, v any) {
		t.Helper()
		code, body := f.do(t, f.secA, "GET", path, "")
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
	var n tagsCount
	if get("/templates/app/tags/count", &n); n.Total != 3 {
		t.Errorf("count: %d, want 3", n.Total)
	}
	for q, want := range map[string]tagExists{"v1": {true, "v1"}, "%20production%20": {true, "production"}, "nope": {false, "nope"}} {
		var e tagExists
		if get("/templates/tplapp/tags/exists?tag="+q, &e); e != want {
			t.Errorf("exists %s: %+v, want %+v", q, e, want)
		}
	}
	names := func(g tagGroups) (out []string) {
		for _, x := range g.Tags {
			out = append(out, x.Tag)
		}
		return out
	}
	var g tagGroups
	if get("/templates/app/tags/groups", &g); !slices.Equal(names(g), []string{"production", "default", "v1"}) || g.NextCursor != nil {
		t.Errorf("groups latest_desc: %v %v", names(g), g.NextCursor)
	}
	prod := g.Tags[0]
	if len(prod.Assignments) != 1 || prod.HasMore || prod.Assignments[0].BuildID != "b1" || !prod.Assignments[0].AssignedAt.Equal(later) ||
		!prod.Assignments[0].BuildCreatedAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) || prod.Assignments[0].BuildFinishedAt == nil ||
		!regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(prod.Assignments[0].AssignmentID) {
		t.Errorf("production's group: %+v", prod)
	}
	if get("/templates/app/tags/groups?sort=name_desc&tagsLimit=2", &g); !slices.Equal(names(g), []string{"v1", "production"}) || g.NextCursor == nil {
		t.Fatalf("groups name_desc page 1: %v %v", names(g), g.NextCursor)
	}
	if get("/templates/app/tags/groups?sort=name_desc&tagsLimit=2&tagsCursor="+url.QueryEscape(*g.NextCursor), &g); !slices.Equal(names(g), []string{"default"}) || g.NextCursor != nil {
		t.Errorf("groups name_desc page 2: %v %v", names(g), g.NextCursor)
	}
	if get("/templates/app/tags/groups?sort=latest_asc&search=PROD", &g); !slices.Equal(names(g), []string{"production"}) {
		t.Errorf("groups search PROD: %v", names(g))
	}
	var a tagAssignments
	if get("/templates/app/tags/production/assignments", &a); len(a.Data) != 1 || !reflect.DeepEqual(a.Data[0], prod.Assignments[0]) || a.NextCursor != nil {
		t.Errorf("assignments of production: %+v; its group's: %+v", a, prod.Assignments)
	}
	cur := url.QueryEscape(a.Data[0].AssignedAt.Format(time.RFC3339Nano) + "|" + a.Data[0].AssignmentID)
	if get("/templates/app/tags/production/assignments?limit=100&cursor="+cur, &a); len(a.Data) != 0 {
		t.Errorf("assignments after the last: %+v", a)
	}
	if get("/templates/app/tags/nope/assignments", &a); len(a.Data) != 0 {
		t.Errorf("assignments of a missing tag: %+v", a)
	}
	for _, c := range []struct {
		secret, path string
		code         int
		want         string
	}{
		{f.secA, "/templates/app/tags/count?x=1", 400, `unknown query parameter "x"; this route takes none`},
		{f.secA, "/templates/app/tags/exists", 400, "tag is missing"},
		{f.secA, "/templates/app/tags/exists?tag=", 400, `tag ""`},
		{f.secA, "/templates/app/tags/exists?tag=app:v1", 400, `tag "app:v1"`},
		{f.secA, "/templates/app/tags/exists?tag=v1&name=x", 400, `unknown query parameter "name"; this route takes tag`},
		{f.secA, "/templates/app:v1/tags/exists?tag=v1", 400, "without a tag"},
		{f.secA, "/templates/app/tags/groups?sort=newest", 400, `sort "newest": give one of latest_desc`},
		{f.secA, "/templates/app/tags/groups?tagsLimit=0", 400, `tagsLimit "0": give a whole number from 1 to 100`},
		{f.secA, "/templates/app/tags/groups?tagsLimit=x", 400, `tagsLimit "x"`},
		{f.secA, "/templates/app/tags/groups?assignmentLimit=26", 400, `assignmentLimit "26": give a whole number from 1 to 25`},
		{f.secA, "/templates/app/tags/groups?search=a%20b", 400, `search "a b"`},
		{f.secA, "/templates/app/tags/groups?tagsCursor=nope", 400, `tagsCursor "nope": give the nextCursor`},
		{f.secA, "/templates/app/tags/groups?tagsCursor=name_asc%7C2026-01-01T00:00:00Z%7Cv1", 400, `was given for sort "name_asc", not "latest_desc"`},
		{f.secA, "/templates/app/tags/v1/assignments?limit=101", 400, `limit "101": give a whole number from 1 to 100`},
		{f.secA, "/templates/app/tags/v1/assignments?cursor=x", 400, `cursor "x"`},
		{f.secA, "/templates/app/tags/v1/assignments?after=x", 400, `unknown query parameter "after"`},
		{f.secA, "/templates/app/tags/a%21/assignments", 400, `tag "a!"`},
		{f.secA, "/templates/app/tags/frobnicate", 404, "tags/count, tags/exists, tags/groups"},
		{f.secA, "/templates/nope/tags/count", 404, `no template "nope"`},
		{f.secB, "/templates/app/tags/count", 404, `no template "app"`},
		{f.secB, "/templates/tplapp/tags/exists?tag=v1", 404, `no template "tplapp"`},
		{f.secB, "/templates/app/tags/groups", 404, `no template "app"`},
		{f.secB, "/templates/app/tags/v1/assignments", 404, `no template "app"`},
	} {
		if code, body := f.do(t, c.secret, "GET", c.path, ""); code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d %s; want %d %q", c.path, code, body, c.code, c.want)
		}
	}
}
