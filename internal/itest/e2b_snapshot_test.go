package itest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/api"
)

// e2bSnapshotInfo is E2B's SnapshotInfo.
type e2bSnapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

// snapshots lists GET /snapshots?query and returns the page and its
// X-Next-Token.
func (f *e2bFront) snapshots(query string) ([]e2bSnapshotInfo, string) {
	f.e.t.Helper()
	req, _ := http.NewRequest("GET", f.url+"/snapshots?"+query, nil)
	req.Header.Set("X-API-KEY", f.e.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out []e2bSnapshotInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &out) != nil {
		f.e.t.Fatalf("GET /snapshots?%s: %d %s", query, resp.StatusCode, data)
	}
	return out, resp.Header.Get("X-Next-Token")
}

// TestE2BSnapshotAnswers (issue 26): the E2B control plane's snapshot and
// fork routes answer what the SDKs read — SnapshotInfo, pages with
// X-Next-Token, delete through DELETE /templates/{id}, a fork's defaults
// (count 1, a 15 s lease, the source's network), memory false as a
// files-only snapshot, and E2B's error form for
// what Runtime refuses. The SDKs' own calls are in compat/e2b.
func TestE2BSnapshotAnswers(t *testing.T) {
	e := newEnv(t)
	f := newE2BFront(e)
	status, data := f.control("POST", "/sandboxes", map[string]any{"templateID": "base", "timeout": 300,
		"allow_internet_access": false, "metadata": map[string]string{"role": "source"}})
	var src e2bSandbox
	if status != http.StatusCreated || json.Unmarshal(data, &src) != nil {
		t.Fatalf("create: %d %s", status, data)
	}
	snapPath := "/sandboxes/" + src.SandboxID + "/snapshots"

	expect := func(want int, says, method, path string, body any) {
		t.Helper()
		status, data := f.control(method, path, body)
		var eb struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if status != want || json.Unmarshal(data, &eb) != nil || eb.Code != want || !strings.Contains(eb.Message, says) {
			t.Errorf("%s %s: %d %s, want %d saying %q", method, path, status, data, want, says)
		}
	}
	expect(http.StatusNotFound, "no sandbox", "POST", "/sandboxes/nosuchsandbox/snapshots", map[string]any{})

	take := func(body map[string]any) e2bSnapshotInfo {
		t.Helper()
		status, data := f.control("POST", snapPath, body)
		var sn e2bSnapshotInfo
		if status != http.StatusCreated || json.Unmarshal(data, &sn) != nil || !strings.HasPrefix(sn.SnapshotID, "snap_") {
			t.Fatalf("snapshot: %d %s", status, data)
		}
		return sn
	}
	// memory false (the SDKs' mode="filesystem") is a files-only snapshot.
	files := take(map[string]any{"memory": false})
	var fsn api.Snapshot
	e.must(http.StatusOK, "GET", "/v1/snapshots/"+files.SnapshotID, nil, &fsn)
	if fsn.Mode != "filesystem" {
		t.Errorf("memory false made a %q snapshot, want filesystem", fsn.Mode)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/snapshots/"+files.SnapshotID, nil, nil)
	named := take(map[string]any{"name": "kept"})
	plain := take(nil)
	if len(named.Names) != 1 || named.Names[0] != "kept" || plain.Names == nil || len(plain.Names) != 0 {
		t.Errorf("names: %v and %v, want [kept] and []", named.Names, plain.Names)
	}
	expect(http.StatusConflict, `named "kept" already`, "POST", snapPath, map[string]any{"name": "kept"})

	// Newest first, a page at a time.
	page, next := f.snapshots("sandboxID=" + src.SandboxID + "&limit=1")
	if len(page) != 1 || page[0].SnapshotID != plain.SnapshotID || next != plain.SnapshotID {
		t.Errorf("first page %v next %q, want [%s] next %s", page, next, plain.SnapshotID, plain.SnapshotID)
	}
	page, next = f.snapshots("sandboxID=" + src.SandboxID + "&limit=1&nextToken=" + next)
	if len(page) != 1 || page[0].SnapshotID != named.SnapshotID || next != "" {
		t.Errorf("second page %v next %q, want [%s] and no next", page, next, named.SnapshotID)
	}
	if page, _ = f.snapshots("name=kept"); len(page) != 1 || page[0].SnapshotID != named.SnapshotID {
		t.Errorf("name=kept lists %v", page)
	}
	if page, _ = f.snapshots("sandboxID=nosuchsandbox"); len(page) != 0 {
		t.Errorf("another sandbox's snapshots: %v", page)
	}
	expect(http.StatusBadRequest, "nextToken", "GET", "/snapshots?nextToken=snap_gone", nil)

	// Another key finds none of them.
	other := newE2BFront(e.asTenant("e2b-snapshot-other"))
	if page, _ = other.snapshots(""); len(page) != 0 {
		t.Errorf("another key lists %v", page)
	}
	if status, data := other.control("DELETE", "/templates/"+named.SnapshotID, nil); status != http.StatusNotFound {
		t.Errorf("another key's delete: %d %s", status, data)
	}
	if status, data := other.control("POST", "/sandboxes", map[string]any{"templateID": plain.SnapshotID}); status != http.StatusNotFound {
		t.Errorf("another key's create from the snapshot: %d %s", status, data)
	}
	if status, data := other.control("POST", "/sandboxes/"+src.SandboxID+"/fork", nil); status != http.StatusNotFound {
		t.Errorf("another key's fork: %d %s", status, data)
	}

	// Deleted through DELETE /templates/{id}, by name or id; a template
	// is not deleted there.
	for _, ref := range []string{"kept", plain.SnapshotID} {
		if status, data := f.control("DELETE", "/templates/"+ref, nil); status != http.StatusNoContent {
			t.Errorf("delete %s: %d %s", ref, status, data)
		}
	}
	expect(http.StatusNotFound, "no snapshot", "DELETE", "/templates/kept", nil)
	expect(http.StatusNotImplemented, "not supported", "DELETE", "/templates/base", nil)
	if page, _ = f.snapshots(""); len(page) != 0 {
		t.Errorf("after the deletes: %v", page)
	}

	// A fork with no body: one sandbox, E2B's 15 s lease, the source's
	// network and metadata.
	expect(http.StatusBadRequest, "count must be a whole number from 1 to", "POST", "/sandboxes/"+src.SandboxID+"/fork", map[string]any{"count": 33})
	expect(http.StatusBadRequest, "timeout must be a positive", "POST", "/sandboxes/"+src.SandboxID+"/fork", map[string]any{"timeout": 0})
	status, data = f.control("POST", "/sandboxes/"+src.SandboxID+"/fork", nil)
	var forks []struct {
		Sandbox *e2bSandbox     `json:"sandbox"`
		Error   json.RawMessage `json:"error"`
	}
	if status != http.StatusCreated || json.Unmarshal(data, &forks) != nil || len(forks) != 1 || forks[0].Sandbox == nil || forks[0].Error != nil {
		t.Fatalf("fork: %d %s", status, data)
	}
	status, data = f.control("GET", "/sandboxes/"+forks[0].Sandbox.SandboxID, nil)
	var info struct {
		TemplateID          string            `json:"templateID"`
		StartedAt           time.Time         `json:"startedAt"`
		EndAt               time.Time         `json:"endAt"`
		Metadata            map[string]string `json:"metadata"`
		AllowInternetAccess *bool             `json:"allowInternetAccess"`
	}
	if status != http.StatusOK || json.Unmarshal(data, &info) != nil {
		t.Fatalf("the fork's info: %d %s", status, data)
	}
	if lease := info.EndAt.Sub(info.StartedAt); lease < 10*time.Second || lease > 16*time.Second || info.TemplateID != "base" ||
		info.Metadata["role"] != "source" || info.AllowInternetAccess == nil || *info.AllowInternetAccess {
		t.Errorf("the fork: %s; want base, a 15 s lease, the source's metadata and no internet", data)
	}
	e.sh(runtimeSandboxID(forks[0].Sandbox.SandboxID), "true")
}

// runtimeSandboxID is Runtime's id of an E2B sandbox id.
func runtimeSandboxID(id string) string { return "sbx_" + strings.TrimPrefix(id, "sbx_") }
