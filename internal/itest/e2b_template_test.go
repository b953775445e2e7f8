package itest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/api"
)

// E2B's template build routes (internal/compat/e2b/templates.go), spoken
// to as E2B's Template SDK does: request a build, ask for each COPY step's
// upload link by its files' hash and PUT a tar there, start the build with
// its steps, poll its status and logs.

// controlAs is f.control with another API key.
func (f *e2bFront) controlAs(key, method, path string, body any) (int, []byte) {
	f.e.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, f.url+path, r)
	req.Header.Set("X-API-KEY", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// e2bMessage is an E2B error body's message.
func e2bMessage(data []byte) string {
	var eb struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &eb) != nil {
		return string(data)
	}
	return eb.Message
}

// gzTar is a gzipped tar of files (name: content), as the SDKs upload.
func gzTar(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	names := slices.Sorted(maps.Keys(files)) // a directory before what is in it, as the SDKs walk
	for _, name := range names {
		body := files[name]
		if strings.HasSuffix(name, "/") {
			tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755})
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

type e2bBuildStatus struct {
	Status     string `json:"status"`
	LogEntries []struct {
		Level   string `json:"level"`
		Message string `json:"message"`
		Step    string `json:"step"`
	} `json:"logEntries"`
	Reason *struct {
		Message string `json:"message"`
		Step    string `json:"step"`
	} `json:"reason"`
}

// e2bBuild runs one template build as key, as the SDKs do: request, upload
// each hash's files, start, and poll until it ends. It returns the
// template's id, the final status and every log message.
func (f *e2bFront) e2bBuild(key, name string, spec map[string]any, uploads map[string][]byte) (string, e2bBuildStatus, string) {
	t := f.e.t
	t.Helper()
	status, data := f.controlAs(key, "POST", "/v3/templates", map[string]any{"name": name, "cpuCount": 1, "memoryMB": 512})
	var req struct{ TemplateID, BuildID string }
	if status != http.StatusAccepted || json.Unmarshal(data, &req) != nil || req.TemplateID == "" || req.BuildID == "" {
		t.Fatalf("request a build: %d %s", status, data)
	}
	for hash, body := range uploads {
		status, data := f.controlAs(key, "GET", "/templates/"+req.TemplateID+"/files/"+hash, nil)
		var link struct {
			Present bool   `json:"present"`
			URL     string `json:"url"`
		}
		if status != http.StatusCreated || json.Unmarshal(data, &link) != nil {
			t.Fatalf("upload link: %d %s", status, data)
		}
		if link.Present {
			continue
		}
		put, _ := http.NewRequest("PUT", link.URL, bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(put)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("upload: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	path := "/templates/" + req.TemplateID + "/builds/" + req.BuildID
	if status, data := f.controlAs(key, "POST", "/v2"+path, spec); status != http.StatusAccepted {
		return req.TemplateID, e2bBuildStatus{Status: "refused", Reason: &struct {
			Message string `json:"message"`
			Step    string `json:"step"`
		}{Message: fmt.Sprintf("%d %s", status, e2bMessage(data))}}, ""
	}
	var logs strings.Builder
	offset := 0
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		status, data := f.controlAs(key, "GET", path+"/status?logsOffset="+fmt.Sprint(offset), nil)
		var st e2bBuildStatus
		if status != http.StatusOK || json.Unmarshal(data, &st) != nil {
			t.Fatalf("status: %d %s", status, data)
		}
		for _, l := range st.LogEntries {
			fmt.Fprintf(&logs, "[%s %s] %s\n", l.Level, l.Step, l.Message)
		}
		offset += len(st.LogEntries)
		if (st.Status == "ready" || st.Status == "error") && len(st.LogEntries) == 0 {
			return req.TemplateID, st, logs.String()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the build did not end in 5 minutes; logs:\n%s", logs.String())
	return "", e2bBuildStatus{}, ""
}

// TestE2BTemplateRoutes: the template build routes answer bad input with a
// 4xx that names the problem, refuse a step Runtime's builder lacks by
// name before anything runs, and show one key's template to no other key.
func TestE2BTemplateRoutes(t *testing.T) {
	e := newEnv(t)
	f := newE2BFront(e)
	var tenant api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "tenant", DailyLimitMicros: 1_000_000}, &tenant)
	a := tenant.Secret

	for _, c := range []struct {
		body   any
		status int
		want   string
	}{
		{map[string]any{}, 400, "the template has no name"},
		{map[string]any{"name": "Bad Name"}, 400, "give 1-50 characters of a-z"},
		{map[string]any{"name": "app:"}, 400, `tag ""`},
		{map[string]any{"name": ":v2"}, 400, "give 1-50 characters of a-z"},
		{map[string]any{"name": "app", "tags": []string{"other:stable"}}, 400, `tag "other:stable"`},
		{map[string]any{"name": "team/app"}, 400, "namespaced names"},
		{map[string]any{"name": "app", "teamID": "t1"}, 400, "Runtime has no teams"},
		{map[string]any{"name": "app", "cpuCount": 0}, 400, "cpuCount must be at least 1"},
		{"not json", 400, "not the JSON this route takes"},
	} {
		status, data := f.controlAs(a, "POST", "/v3/templates", c.body)
		if status != c.status || !strings.Contains(e2bMessage(data), c.want) {
			t.Errorf("POST /v3/templates %v: %d %s; want %d saying %q", c.body, status, data, c.status, c.want)
		}
	}
	status, data := f.controlAs(a, "POST", "/v3/templates", map[string]any{"name": "app"})
	var req struct{ TemplateID, BuildID string }
	if status != http.StatusAccepted || json.Unmarshal(data, &req) != nil {
		t.Fatalf("request: %d %s", status, data)
	}
	tpl := "/templates/" + req.TemplateID
	build := tpl + "/builds/" + req.BuildID
	hash := strings.Repeat("ab", 32)
	copyStep := map[string]any{"type": "COPY", "args": []string{"a.txt", "/home/user/", "", ""}, "filesHash": hash}
	for _, c := range []struct {
		method, path string
		body         any
		status       int
		want         string
	}{
		{"GET", tpl + "/files/NOTAHASH", nil, 400, `hash "NOTAHASH" is not a SHA-256`},
		{"GET", tpl + "/builds/nope/status", nil, 404, `no build "nope"`},
		{"GET", build + "/status?logsOffset=-1", nil, 400, "logsOffset must be a whole number"},
		{"GET", build + "/status?level=loud", nil, 400, "level must be debug, info, warn or error"},
		{"GET", "/templates/nope/builds/x/status", nil, 404, `no template "nope"`},
		{"POST", "/v2" + build, map[string]any{"fromImage": "e2bdev/base", "steps": []any{map[string]any{"type": "ADD", "args": []string{"a", "b"}}}},
			400, `step 1 (ADD a b): the step type "ADD" is not supported by Runtime's template builder`},
		{"POST", "/v2" + build, map[string]any{"fromImage": "a", "fromTemplate": "b"}, 400, "not both"},
		{"POST", "/v2" + build, map[string]any{"fromImage": "repo/x:1", "fromImageRegistry": map[string]string{"type": "registry", "username": "u", "password": "p"}},
			400, "fromImageRegistry (registry credentials"},
		{"POST", "/v2" + build, map[string]any{"fromTemplate": "base", "steps": []any{map[string]any{"type": "RUN", "args": []string{"id", "postgres"}}}},
			400, `user "postgres": Runtime runs build steps as root or user`},
		{"POST", "/v2" + build, map[string]any{"fromTemplate": "base", "steps": []any{copyStep}}, 400, "the files of a COPY step (filesHash " + hash + ") were not uploaded"},
		{"PATCH", tpl, map[string]any{"public": true}, 501, "public templates"},
		{"POST", "/templates/tags", map[string]any{"target": "app", "tags": []string{"x"}}, 404, `template "app" has no tag "default"`},
		{"POST", "/templates/tags", map[string]any{"target": "app", "tags": []string{":x"}}, 400, `tag ":x"`},
		{"POST", "/templates/tags", map[string]any{"target": "app", "tags": []string{"app:"}}, 400, `tag ""`},
		{"POST", "/templates/tags", map[string]any{"target": "app", "tags": []string{}}, 400, "tags is empty"},
		{"DELETE", "/templates/tags", map[string]any{"name": "app", "tags": []string{"x"}}, 404, `template "app" has no tag "x"`},
		{"DELETE", "/templates/tags", map[string]any{"name": "app:v1", "tags": []string{"x"}}, 400, "without a tag"},
		{"GET", tpl + "/tags", nil, 200, ""},
		{"GET", tpl + "/nope", nil, 404, "no route"},
	} {
		status, data := f.controlAs(a, c.method, c.path, c.body)
		if status != c.status || !strings.Contains(e2bMessage(data), c.want) {
			t.Errorf("%s %s %v: %d %s; want %d saying %q", c.method, c.path, c.body, status, data, c.status, c.want)
		}
	}
	// An upload link is bound to its token, template and hash.
	status, data = f.controlAs(a, "GET", tpl+"/files/"+hash, nil)
	var link struct {
		Present bool
		URL     string
	}
	if status != http.StatusCreated || json.Unmarshal(data, &link) != nil || link.Present || !strings.Contains(link.URL, "token=") {
		t.Fatalf("upload link: %d %s", status, data)
	}
	for _, u := range []string{strings.Replace(link.URL, "token=", "token=x", 1), strings.Replace(link.URL, hash, strings.Repeat("cd", 32), 1)} {
		put, _ := http.NewRequest("PUT", u, strings.NewReader("x"))
		resp, err := http.DefaultClient.Do(put)
		if err != nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("PUT %s: %v %v; want 403", u, err, resp)
		}
		resp.Body.Close()
	}
	// Another key sees nothing of it, by alias or by id.
	for _, c := range []struct{ method, path string }{
		{"GET", "/templates/aliases/app"}, {"GET", tpl}, {"GET", build + "/status"}, {"GET", tpl + "/files/" + hash},
		{"DELETE", tpl}, {"POST", "/v2" + build}, {"GET", tpl + "/tags"}, {"POST", "/templates/tags"}, {"DELETE", "/templates/tags"},
	} {
		status, data := f.control(c.method, c.path, map[string]any{"fromTemplate": "base", "target": "app", "name": "app", "tags": []string{"x"}})
		if status != http.StatusNotFound {
			t.Errorf("another key's %s %s: %d %s; want 404", c.method, c.path, status, data)
		}
	}
	if status, data := f.controlAs(a, "GET", "/templates/aliases/app", nil); status != http.StatusOK || !strings.Contains(string(data), req.TemplateID) {
		t.Errorf("its own alias: %d %s", status, data)
	}
	var list []map[string]any
	if status, data := f.control("GET", "/templates", nil); status != 200 || json.Unmarshal(data, &list) != nil || len(list) != 0 {
		t.Errorf("another key's list: %d %s", status, data)
	}
	// A template with no successful build boots nothing.
	if status, data := f.controlAs(a, "POST", "/sandboxes", map[string]any{"templateID": "app"}); status != 400 || !strings.Contains(e2bMessage(data), "has no successful build yet") {
		t.Errorf("create from a template never built: %d %s", status, data)
	}
}

// TestE2BTemplateBuild: a tenant key builds a template from base with
// E2B's steps (RUN as user and as root, COPY of uploaded files with an
// owner and a mode, build-only ENV, WORKDIR, USER); a sandbox of its alias
// sees the result; another key can neither list, boot nor delete it
// (through E2B's API or Runtime's); a rebuild replaces it; a failing step
// fails the build naming its step and output; the owner deletes it.
func TestE2BTemplateBuild(t *testing.T) {
	s := newHostileScene(t)
	withBase(t, s.tdir)
	e := newEnv(t, withTemplatesDir(s.tdir))
	f := newE2BFront(e)
	var tenant api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "tenant", DailyLimitMicros: 100_000_000}, &tenant)
	a := tenant.Secret
	hashApp, hashOne := strings.Repeat("1a", 32), strings.Repeat("2b", 32)
	uploads := map[string][]byte{
		hashApp: gzTar(t, map[string]string{"app/": "", "app/lib/": "", "app/main.py": "print('app', 6*7)\n", "app/lib/data.txt": "data\n"}),
		hashOne: gzTar(t, map[string]string{"odd $name.txt": "odd file\n"}),
	}
	spec := map[string]any{"fromTemplate": "base", "steps": []any{
		map[string]any{"type": "ENV", "args": []string{"GREETING", `hello "quoted" $HOME`}},
		map[string]any{"type": "RUN", "args": []string{`echo "$GREETING" > greeting.txt; id -un > who.txt`}},
		map[string]any{"type": "RUN", "args": []string{"mkdir -p /srv && id -un > /srv/root-who.txt", "root"}},
		map[string]any{"type": "COPY", "args": []string{"app", "/srv/app", "", "0750"}, "filesHash": hashApp},
		map[string]any{"type": "COPY", "args": []string{"odd $name.txt", "copied/", "root", ""}, "filesHash": hashOne},
		map[string]any{"type": "WORKDIR", "args": []string{"/srv"}},
		map[string]any{"type": "USER", "args": []string{"root"}},
		map[string]any{"type": "RUN", "args": []string{"pwd > /srv/pwd.txt && python3 /srv/app/main.py > /srv/out.txt"}},
	}}
	start := time.Now()
	id, st, logs := f.e2bBuild(a, "my-app", spec, uploads)
	t.Logf("build: %s in %s; logs:\n%s", st.Status, time.Since(start).Round(time.Millisecond), logs)
	if st.Status != "ready" {
		t.Fatalf("build: %+v", st.Reason)
	}

	status, data := f.controlAs(a, "POST", "/sandboxes", map[string]any{"templateID": "my-app", "timeout": 120})
	var sb e2bSandbox
	if status != http.StatusCreated || json.Unmarshal(data, &sb) != nil {
		t.Fatalf("create from the alias: %d %s", status, data)
	}
	sbID := runtimeSandboxID(sb.SandboxID)
	res := e.sh(sbID, `cd /home/user; cat greeting.txt who.txt /srv/root-who.txt /srv/out.txt /srv/pwd.txt "copied/odd \$name.txt"; `+
		`stat -c '%U %a' /srv/app/main.py /srv/app/lib "copied/odd \$name.txt"; cat /srv/app/lib/data.txt; echo "env:${GREETING:-unset}"`)
	want := "hello \"quoted\" $HOME\nuser\nroot\napp 42\n/srv\nodd file\nuser 750\nuser 750\nroot 644\ndata\nenv:unset\n"
	if res.Stdout != want {
		t.Errorf("in a sandbox of the template:\n%s\nwant:\n%s\n(stderr %s)", res.Stdout, want, res.Stderr)
	}

	// Another key: not listed, not booted, not deleted, by alias or id,
	// through E2B's API or Runtime's.
	var list []struct {
		TemplateID string   `json:"templateID"`
		Aliases    []string `json:"aliases"`
		Status     string   `json:"buildStatus"`
	}
	if status, data := f.controlAs(a, "GET", "/v2/templates", nil); status != 200 || json.Unmarshal(data, &list) != nil ||
		len(list) != 1 || list[0].TemplateID != id || list[0].Aliases[0] != "my-app" || list[0].Status != "ready" {
		t.Errorf("the owner's list: %d %s", status, data)
	}
	for _, ref := range []string{"my-app", id} {
		if status, data := f.control("POST", "/sandboxes", map[string]any{"templateID": ref}); status < 400 || status >= 500 {
			t.Errorf("another key boots %s: %d %s", ref, status, data)
		}
		if status, data := f.control("DELETE", "/templates/"+ref, nil); status != http.StatusNotFound {
			t.Errorf("another key deletes %s: %d %s", ref, status, data)
		}
	}
	var rt api.TemplateList
	e.must(200, "GET", "/v1/templates", nil, &rt)
	if len(rt.Templates) != 1 || rt.Templates[0].Name != "base" {
		t.Errorf("Runtime's template list for another key: %+v", rt.Templates)
	}
	var mine api.TemplateList
	status, data = e.do("GET", "/v1/templates", nil, "Authorization", "Bearer "+a)
	if status != 200 || json.Unmarshal(data, &mine) != nil || len(mine.Templates) != 2 {
		t.Fatalf("the owner's Runtime list: %d %s", status, data)
	}
	private := mine.Templates[1]
	if !private.Private || !strings.HasPrefix(private.Name, "e2b.my-app.") {
		t.Errorf("the owner's Runtime template: %+v", private)
	}
	if status, data := e.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{Template: private.Name}); status != 400 || !strings.Contains(string(data), "template not found") {
		t.Errorf("another key boots the Runtime template: %d %s", status, data)
	}
	if status, data := e.do("DELETE", "/v1/templates/"+private.Name, nil); status != 404 {
		t.Errorf("another key deletes the Runtime template: %d %s", status, data)
	}

	// The owner cannot delete it while its sandbox runs.
	if status, data := f.controlAs(a, "DELETE", "/templates/my-app", nil); status != http.StatusConflict {
		t.Errorf("delete while a sandbox runs: %d %s", status, data)
	}

	// A failing step fails the build, naming the step and its output; the
	// template keeps its last build.
	_, st, logs = f.e2bBuild(a, "my-app", map[string]any{"fromTemplate": "base", "steps": []any{
		map[string]any{"type": "RUN", "args": []string{"echo fine"}},
		map[string]any{"type": "RUN", "args": []string{"echo broken >&2; exit 7"}},
	}}, nil)
	if st.Status != "error" || st.Reason == nil || st.Reason.Step != "2" || !strings.Contains(st.Reason.Message, "exit code 7") ||
		!strings.Contains(st.Reason.Message, "broken") || !strings.Contains(logs, "broken") {
		t.Errorf("a failing build: %+v\n%s", st.Reason, logs)
	}

	// A rebuild replaces it: new sandboxes get the new build; the old
	// Runtime template goes once its sandbox has.
	_, st, _ = f.e2bBuild(a, "my-app", map[string]any{"fromTemplate": "base", "steps": []any{
		map[string]any{"type": "RUN", "args": []string{"echo second > /home/user/build.txt"}},
	}}, nil)
	if st.Status != "ready" {
		t.Fatalf("rebuild: %+v", st.Reason)
	}
	status, data = f.controlAs(a, "POST", "/sandboxes", map[string]any{"templateID": id, "timeout": 60})
	var sb2 e2bSandbox
	if status != http.StatusCreated || json.Unmarshal(data, &sb2) != nil {
		t.Fatalf("create from the rebuilt template: %d %s", status, data)
	}
	if res := e.sh(runtimeSandboxID(sb2.SandboxID), "cat /home/user/build.txt; ls /srv/app 2>&1 | head -1"); !strings.HasPrefix(res.Stdout, "second\nls: cannot access") {
		t.Errorf("a sandbox of the rebuild: %q %q", res.Stdout, res.Stderr)
	}
	if res := e.sh(sbID, "cat /srv/out.txt"); res.Stdout != "app 42\n" {
		t.Errorf("the first build's sandbox after the rebuild: %q", res.Stdout)
	}
	for _, x := range []string{sbID, runtimeSandboxID(sb2.SandboxID)} {
		e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+x, nil, nil)
	}
	if status, data := f.controlAs(a, "DELETE", "/templates/my-app", nil); status != http.StatusNoContent {
		t.Fatalf("the owner deletes it: %d %s", status, data)
	}
	if left := s.leftovers(t); strings.Join(left, ",") != "base" {
		t.Errorf("templates directory after the delete: %v", left)
	}
	if status, _ := f.controlAs(a, "GET", "/templates/aliases/my-app", nil); status != http.StatusNotFound {
		t.Errorf("alias after the delete: %d", status)
	}
}

// TestE2BTemplateTags: a build named "alias:tag" gets that tag; a tag
// assigned to it stays on it while "alias" (the default tag) moves to a
// rebuild, so a sandbox of "alias:production" boots the old content; the
// tags are listed, removed (the old build's Runtime template goes with its
// last tag), refused in forms that are not tags, and invisible to another
// key; deleting the template deletes them.
func TestE2BTemplateTags(t *testing.T) {
	s := newHostileScene(t)
	withBase(t, s.tdir)
	e := newEnv(t, withTemplatesDir(s.tdir))
	f := newE2BFront(e)
	var tenant api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "tenant", DailyLimitMicros: 100_000_000}, &tenant)
	a := tenant.Secret
	writes := func(v string) map[string]any {
		return map[string]any{"fromTemplate": "base", "steps": []any{
			map[string]any{"type": "RUN", "args": []string{"echo " + v + " > /home/user/build.txt"}}}}
	}
	id, st, logs := f.e2bBuild(a, "tagged:v1", writes("first"), nil)
	if st.Status != "ready" {
		t.Fatalf("build tagged:v1: %+v\n%s", st.Reason, logs)
	}
	var assigned struct {
		Tags    []string `json:"tags"`
		BuildID string   `json:"buildID"`
	}
	status, data := f.controlAs(a, "POST", "/templates/tags", map[string]any{"target": "tagged:v1", "tags": []string{"production", "tagged:stable"}})
	if status != http.StatusCreated || json.Unmarshal(data, &assigned) != nil || strings.Join(assigned.Tags, ",") != "production,stable" || assigned.BuildID == "" {
		t.Fatalf("assign: %d %s", status, data)
	}
	firstBuild := assigned.BuildID
	for _, bad := range []string{":invalid-tag", "tagged:", "other:x", ""} {
		if status, data := f.controlAs(a, "POST", "/templates/tags", map[string]any{"target": "tagged:v1", "tags": []string{bad}}); status != 400 {
			t.Errorf("assign %q: %d %s; want 400", bad, status, data)
		}
	}
	if status, data := f.controlAs(a, "POST", "/templates/tags", map[string]any{"target": "tagged:nope", "tags": []string{"x"}}); status != 404 {
		t.Errorf("assign from a missing tag: %d %s", status, data)
	}
	// The rebuild without a tag gets the default tag.
	if _, st, logs := f.e2bBuild(a, "tagged", writes("second"), nil); st.Status != "ready" {
		t.Fatalf("rebuild: %+v\n%s", st.Reason, logs)
	}
	var tags []struct {
		Tag       string    `json:"tag"`
		BuildID   string    `json:"buildID"`
		CreatedAt time.Time `json:"createdAt"`
	}
	for _, ref := range []string{id, "tagged"} {
		status, data = f.controlAs(a, "GET", "/templates/"+ref+"/tags", nil)
		if status != 200 || json.Unmarshal(data, &tags) != nil || len(tags) != 4 {
			t.Fatalf("tags of %s: %d %s", ref, status, data)
		}
	}
	byTag := map[string]string{}
	for _, tg := range tags {
		byTag[tg.Tag] = tg.BuildID
		if tg.CreatedAt.IsZero() {
			t.Errorf("tag %s has no createdAt", tg.Tag)
		}
	}
	if byTag["v1"] != firstBuild || byTag["production"] != firstBuild || byTag["stable"] != firstBuild || byTag["default"] == "" || byTag["default"] == firstBuild {
		t.Errorf("tags after the rebuild: %+v (first build %s)", byTag, firstBuild)
	}
	// E2B's read-only tag routes agree with the list.
	var count struct {
		Total int `json:"total"`
	}
	if status, data := f.controlAs(a, "GET", "/templates/tagged/tags/count", nil); status != 200 || json.Unmarshal(data, &count) != nil || count.Total != 4 {
		t.Errorf("tags/count: %d %s", status, data)
	}
	for tag, want := range map[string]string{"production": `{"exists":true,"normalizedTag":"production"}`, "nope": `{"exists":false,"normalizedTag":"nope"}`} {
		if status, data := f.controlAs(a, "GET", "/templates/"+id+"/tags/exists?tag="+tag, nil); status != 200 || strings.TrimSpace(string(data)) != want {
			t.Errorf("tags/exists %s: %d %s", tag, status, data)
		}
	}
	var groups struct {
		Tags []struct {
			Tag         string `json:"tag"`
			Assignments []struct {
				BuildID         string     `json:"buildId"`
				BuildFinishedAt *time.Time `json:"buildFinishedAt"`
			} `json:"assignments"`
		} `json:"tags"`
		NextCursor *string `json:"nextCursor"`
	}
	status, data = f.controlAs(a, "GET", "/templates/tagged/tags/groups?sort=name_asc&tagsLimit=3", nil)
	if status != 200 || json.Unmarshal(data, &groups) != nil || len(groups.Tags) != 3 || groups.NextCursor == nil {
		t.Fatalf("tags/groups page 1: %d %s", status, data)
	}
	status, data = f.controlAs(a, "GET", "/templates/tagged/tags/groups?sort=name_asc&tagsLimit=3&tagsCursor="+url.QueryEscape(*groups.NextCursor), nil)
	page1 := groups.Tags
	groups.Tags = nil
	if status != 200 || json.Unmarshal(data, &groups) != nil || len(groups.Tags) != 1 || groups.NextCursor != nil {
		t.Fatalf("tags/groups page 2: %d %s", status, data)
	}
	var order []string
	for _, g := range append(page1, groups.Tags...) {
		order = append(order, g.Tag)
		if len(g.Assignments) != 1 || g.Assignments[0].BuildID != byTag[g.Tag] || g.Assignments[0].BuildFinishedAt == nil || g.Assignments[0].BuildFinishedAt.IsZero() {
			t.Errorf("tags/groups %s: %+v; want build %s", g.Tag, g.Assignments, byTag[g.Tag])
		}
	}
	if strings.Join(order, ",") != "default,production,stable,v1" {
		t.Errorf("tags/groups name_asc: %v", order)
	}
	if status, data := f.controlAs(a, "GET", "/templates/tagged/tags/production/assignments", nil); status != 200 || !strings.Contains(string(data), `"buildId":"`+firstBuild+`"`) {
		t.Errorf("tags/production/assignments: %d %s", status, data)
	}
	for _, path := range []string{"/templates/tagged/tags/exists", "/templates/tagged/tags/groups?sort=newest", "/templates/tagged/tags/groups?tagsLimit=500",
		"/templates/tagged/tags/v1/assignments?cursor=nope"} {
		if status, data := f.controlAs(a, "GET", path, nil); status != 400 {
			t.Errorf("GET %s: %d %s; want 400", path, status, data)
		}
	}
	// Each reference boots its build's content.
	for ref, want := range map[string]string{"tagged:production": "first", "tagged:v1": "first", "tagged": "second", "tagged:default": "second", id + ":stable": "first"} {
		status, data := f.controlAs(a, "POST", "/sandboxes", map[string]any{"templateID": ref, "timeout": 60})
		var sb e2bSandbox
		if status != http.StatusCreated || json.Unmarshal(data, &sb) != nil {
			t.Fatalf("create from %s: %d %s", ref, status, data)
		}
		if res := e.sh(runtimeSandboxID(sb.SandboxID), "cat /home/user/build.txt"); res.Stdout != want+"\n" {
			t.Errorf("a sandbox of %s: %q %q; want %q", ref, res.Stdout, res.Stderr, want)
		}
		e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+runtimeSandboxID(sb.SandboxID), nil, nil)
	}
	if status, data := f.controlAs(a, "POST", "/sandboxes", map[string]any{"templateID": "tagged:nope"}); status != 404 {
		t.Errorf("create from a missing tag: %d %s", status, data)
	}
	if status, _ := f.controlAs(a, "GET", "/templates/aliases/tagged:production", nil); status != 200 {
		t.Errorf("exists tagged:production: %d", status)
	}
	if status, _ := f.controlAs(a, "GET", "/templates/aliases/tagged:nope", nil); status != 404 {
		t.Errorf("exists tagged:nope: %d", status)
	}

	// Another key sees, boots and removes nothing.
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/templates/" + id + "/tags", nil}, {"GET", "/templates/tagged/tags", nil},
		{"GET", "/templates/tagged/tags/count", nil}, {"GET", "/templates/" + id + "/tags/exists?tag=v1", nil},
		{"GET", "/templates/tagged/tags/groups", nil}, {"GET", "/templates/tagged/tags/v1/assignments", nil},
		{"POST", "/templates/tags", map[string]any{"target": "tagged:v1", "tags": []string{"mine"}}},
		{"DELETE", "/templates/tags", map[string]any{"name": "tagged", "tags": []string{"production"}}},
		{"POST", "/sandboxes", map[string]any{"templateID": id + ":production"}},
	} {
		if status, data := f.control(c.method, c.path, c.body); status != http.StatusNotFound && !(c.path == "/sandboxes" && status == 400) {
			t.Errorf("another key's %s %s: %d %s", c.method, c.path, status, data)
		}
	}

	runtimeTemplates := func() []string {
		var mine api.TemplateList
		status, data := e.do("GET", "/v1/templates", nil, "Authorization", "Bearer "+a)
		if status != 200 || json.Unmarshal(data, &mine) != nil {
			t.Fatalf("the owner's Runtime list: %d %s", status, data)
		}
		var out []string
		for _, rt := range mine.Templates {
			if strings.HasPrefix(rt.Name, "e2b.tagged.") {
				out = append(out, rt.Name)
			}
		}
		return out
	}
	if got := runtimeTemplates(); len(got) != 2 {
		t.Errorf("Runtime templates with the first build tagged: %v", got)
	}
	// Removing some of the first build's tags keeps it; removing the last
	// one deletes its Runtime template.
	if status, data := f.controlAs(a, "DELETE", "/templates/tags", map[string]any{"name": "tagged", "tags": []string{"v1", "stable"}}); status != http.StatusNoContent {
		t.Fatalf("remove v1, stable: %d %s", status, data)
	}
	if got := runtimeTemplates(); len(got) != 2 {
		t.Errorf("Runtime templates with production left: %v", got)
	}
	if status, data := f.controlAs(a, "POST", "/sandboxes", map[string]any{"templateID": "tagged:v1"}); status != 404 {
		t.Errorf("create from a removed tag: %d %s", status, data)
	}
	if status, data := f.controlAs(a, "DELETE", "/templates/tags", map[string]any{"name": "tagged", "tags": []string{"production"}}); status != http.StatusNoContent {
		t.Fatalf("remove production: %d %s", status, data)
	}
	if got := runtimeTemplates(); len(got) != 1 {
		t.Errorf("Runtime templates once the first build has no tag: %v", got)
	}
	if status, data := f.controlAs(a, "DELETE", "/templates/tagged", nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, data)
	}
	if status, data := f.controlAs(a, "GET", "/templates/"+id+"/tags", nil); status != http.StatusNotFound {
		t.Errorf("tags of a deleted template: %d %s", status, data)
	}
	if left := s.leftovers(t); strings.Join(left, ",") != "base" {
		t.Errorf("templates directory after the delete: %v", left)
	}
}
