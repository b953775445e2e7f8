package itest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// heavyServer is a Python HTTP server on 127.0.0.1:8000 that holds 200 MiB
// of random bytes in memory and a counter: GET / adds one to the counter and
// answers it, GET /sum answers the SHA-256 of the bytes (computed again at
// every request, from memory), and /ready answers at once.
const heavyServer = `python3 -c '
import hashlib, http.server, os
blob = bytearray(os.urandom(200 << 20))
n = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global n
        if self.path == "/sum":
            body = hashlib.sha256(blob).hexdigest()
        elif self.path == "/ready":
            body = "ok"
        else:
            n += 1
            body = str(n)
        self.send_response(200); self.end_headers(); self.wfile.write(body.encode())
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
'`

func (e *env) snapshot(id string, req api.CreateSnapshotRequest) api.Snapshot {
	e.t.Helper()
	var sn api.Snapshot
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+id+"/snapshots", req, &sn)
	if sn.State != "ready" || sn.Bytes <= 0 || sn.SourceSandboxID != id || !strings.HasPrefix(sn.ID, "snap_") {
		e.t.Fatalf("snapshot of %s: %+v", id, sn)
	}
	return sn
}

// snapshotImages lists the snapshot directories on the host.
func (e *env) snapshotImages() []string {
	entries, _ := os.ReadDir(filepath.Join(e.dataDir, "gvisor", "snapshots"))
	var out []string
	for _, ent := range entries {
		out = append(out, ent.Name())
	}
	return out
}

// TestSnapshotRestoresThree: a sandbox whose HTTP server holds 200 MiB in
// memory is snapshotted while it runs; three sandboxes created from the
// snapshot each answer on the server's port with the counter where it was
// and the bytes intact, hold the files written before, and diverge (a
// write in one is in none of the others); the source ran on throughout
// with its id and lease unchanged. Deleting the snapshot leaves the
// sandboxes made from it running and nothing on the host.
func TestSnapshotRestoresThree(t *testing.T) {
	e := newEnv(t)
	src := e.create(api.CreateSandboxRequest{MemoryMiB: 1024, TimeoutSeconds: 900})
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+src.ID+"/processes", agentapi.ExecRequest{Command: heavyServer}, nil)
	waitFor(t, 60*time.Second, "the server holding 200 MiB", func() bool {
		return e.sh(src.ID, "curl -sf localhost:8000/ready").Stdout == "ok"
	})
	sum := e.sh(src.ID, "curl -sf localhost:8000/sum").Stdout
	if len(sum) != 64 {
		t.Fatalf("sum: %q", sum)
	}
	if got := e.sh(src.ID, "curl -sf localhost:8000/").Stdout; got != "1" {
		t.Fatalf("counter: %q", got)
	}
	e.sh(src.ID, "echo on-disk > /workspace/a && echo in-tmp > /tmp/b")

	start := time.Now()
	sn := e.snapshot(src.ID, api.CreateSnapshotRequest{Name: "heavy"})
	t.Logf("snapshot of a sandbox holding 200 MiB: %s, image %d MiB", time.Since(start), sn.Bytes>>20)
	if sn.MemoryMiB != 1024 || sn.Template != "base" || sn.Mode != "full" || sn.Name != "heavy" {
		t.Errorf("snapshot record: %+v", sn)
	}
	after := e.get(src.ID)
	if after.State != "running" || !after.LeaseEndsAt.Equal(src.LeaseEndsAt) {
		t.Errorf("the source after its snapshot: %+v (before: lease end %s)", after, src.LeaseEndsAt)
	}
	if got := e.sh(src.ID, "curl -sf localhost:8000/").Stdout; got != "2" {
		t.Fatalf("the source's counter after the snapshot: %q, want 2 (it runs on)", got)
	}

	var copies []api.Sandbox
	for i := range 3 {
		start := time.Now()
		// By name, and by id; with more memory for the last.
		req := api.CreateSandboxRequest{Snapshot: "heavy", Env: map[string]string{"COPY": fmt.Sprint(i)}, TimeoutSeconds: 600}
		if i > 0 {
			req.Snapshot = sn.ID
		}
		if i == 2 {
			req.MemoryMiB = 2048
		}
		c := e.create(req)
		t.Logf("create %d from the snapshot: %s", i, time.Since(start))
		if c.ID == src.ID || c.Template != "base" || c.DiskMiB != src.DiskMiB || c.MemoryMiB != max(req.MemoryMiB, 1024) {
			t.Errorf("copy %d: %+v", i, c)
		}
		copies = append(copies, c)
	}
	for i, c := range copies {
		res := e.sh(c.ID, "curl -sf localhost:8000/; echo; curl -sf localhost:8000/sum; echo; cat /workspace/a /tmp/b; echo $COPY")
		want := "2\n" + sum + "\non-disk\nin-tmp\n" + fmt.Sprint(i) + "\n"
		if res.Stdout != want {
			t.Errorf("copy %d: %q (stderr %q), want %q", i, res.Stdout, res.Stderr, want)
		}
		e.sh(c.ID, fmt.Sprintf("echo mine-%d > /workspace/own", i))
	}
	// Each diverges on its own.
	for i, c := range copies {
		if got := e.sh(c.ID, "cat /workspace/own; curl -sf localhost:8000/").Stdout; got != fmt.Sprintf("mine-%d\n3", i) {
			t.Errorf("copy %d after the writes: %q", i, got)
		}
	}
	if got := e.sh(src.ID, "cat /workspace/own 2>&1; curl -sf localhost:8000/").Stdout; !strings.Contains(got, "No such file") || !strings.HasSuffix(got, "3") {
		t.Errorf("the source after the copies wrote: %q", got)
	}
	// A process the copies had from the snapshot is theirs to stop.
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+copies[0].ID, nil, nil)
	if got := e.sh(copies[1].ID, "curl -sf localhost:8000/").Stdout; got != "4" {
		t.Errorf("copy 1 after copy 0 was destroyed: %q", got)
	}

	// The snapshot's listing, another copy of the copy (a fork of a fork),
	// then its deletion.
	var list api.SnapshotList
	e.must(http.StatusOK, "GET", "/v1/snapshots", nil, &list)
	if len(list.Snapshots) != 1 || list.Snapshots[0].ID != sn.ID {
		t.Errorf("list: %+v", list)
	}
	grand := e.snapshot(copies[1].ID, api.CreateSnapshotRequest{})
	g := e.create(api.CreateSandboxRequest{Snapshot: grand.ID})
	if got := e.sh(g.ID, "curl -sf localhost:8000/; echo; cat /workspace/own").Stdout; got != "5\nmine-1\n" {
		t.Errorf("a copy of a copy: %q", got)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/snapshots/heavy", nil, nil)
	e.must(http.StatusNoContent, "DELETE", "/v1/snapshots/"+grand.ID, nil, nil)
	e.expectError(http.StatusNotFound, "not_found", "GET", "/v1/snapshots/"+sn.ID, nil)
	e.expectError(http.StatusNotFound, "not_found", "POST", "/v1/sandboxes", api.CreateSandboxRequest{Snapshot: sn.ID})
	if got := e.sh(copies[2].ID, "curl -sf localhost:8000/sum").Stdout; got != sum {
		t.Errorf("copy 2 after its snapshot was deleted: %q", got)
	}
	if left := e.snapshotImages(); len(left) > 0 {
		t.Errorf("snapshot images left after their deletion: %v", left)
	}
}

// TestSnapshotBadInput: what a snapshot and a create from it refuse, and
// why.
func TestSnapshotBadInput(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{MemoryMiB: 256, DiskMiB: 512})
	sn := e.snapshot(sb.ID, api.CreateSnapshotRequest{Name: "base-1"})
	for _, c := range []struct {
		status int
		code   string
		path   string
		body   any
		want   string
	}{
		{400, "bad_request", "/v1/sandboxes/" + sb.ID + "/snapshots", api.CreateSnapshotRequest{Name: "Bad Name"}, "lower-case"},
		{400, "bad_request", "/v1/sandboxes/" + sb.ID + "/snapshots", api.CreateSnapshotRequest{Name: "snap_x"}, "snapshot ids"},
		{400, "bad_request", "/v1/sandboxes/" + sb.ID + "/snapshots", api.CreateSnapshotRequest{Mode: "warm"}, "full"},
		{409, "conflict", "/v1/sandboxes/" + sb.ID + "/snapshots", api.CreateSnapshotRequest{Name: "base-1"}, "already"},
		{404, "not_found", "/v1/sandboxes/sbx_nosuchsandbox/snapshots", nil, ""},
		{400, "bad_request", "/v1/sandboxes", api.CreateSandboxRequest{Snapshot: sn.ID, MemoryMiB: 128}, "256 MiB or more"},
		{400, "bad_request", "/v1/sandboxes", api.CreateSandboxRequest{Snapshot: sn.ID, DiskMiB: 1024}, "512 MiB"},
		{400, "bad_request", "/v1/sandboxes", api.CreateSandboxRequest{Snapshot: sn.ID, Template: "code-interpreter"}, "omit template"},
		{404, "not_found", "/v1/sandboxes", api.CreateSandboxRequest{Snapshot: "no-such-name"}, "GET /v1/snapshots"},
		{400, "bad_request", "/v1/sandboxes/" + sb.ID + "/fork", api.ForkRequest{Count: 0}, "count"},
		{400, "bad_request", "/v1/sandboxes/" + sb.ID + "/fork", api.ForkRequest{Count: 2, Name: "x"}, "keepSnapshot"},
	} {
		status, data := e.do("POST", c.path, c.body)
		if status != c.status || errorCode(t, data) != c.code || !strings.Contains(string(data), c.want) {
			t.Errorf("POST %s %+v: %d %s, want %d %s naming %q", c.path, c.body, status, data, c.status, c.code, c.want)
		}
	}
	// A paused sandbox is resumed first; a stopped one is gone.
	e.pause(sb.ID)
	e.expectError(http.StatusConflict, "sandbox_paused", "POST", "/v1/sandboxes/"+sb.ID+"/snapshots", nil)
	e.resume(sb.ID)
	// Same memory and disk as the snapshot, given explicitly, is fine.
	c := e.create(api.CreateSandboxRequest{Snapshot: "base-1", MemoryMiB: 256, DiskMiB: 512, Template: "base"})
	e.mustOK(c.ID)
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
	e.expectError(http.StatusGone, "sandbox_stopped", "POST", "/v1/sandboxes/"+sb.ID+"/snapshots", nil)
	// The snapshot outlives its source.
	c = e.create(api.CreateSandboxRequest{Snapshot: "base-1"})
	e.mustOK(c.ID)
	e.must(http.StatusNoContent, "DELETE", "/v1/snapshots/base-1", nil, nil)
	e.expectError(http.StatusNotFound, "not_found", "DELETE", "/v1/snapshots/base-1", nil)
}

// TestFork: fork of 8 makes 8 independent sandboxes from one snapshot
// (deleted afterwards); killing one leaves the others; the source is
// untouched. A fork kept with a name is a snapshot like any.
func TestFork(t *testing.T) {
	e := newEnv(t)
	src := e.create(api.CreateSandboxRequest{TimeoutSeconds: 900})
	e.startCounter(src.ID)
	e.sh(src.ID, "echo shared > /workspace/f")
	start := time.Now()
	var fr api.ForkResult
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+src.ID+"/fork", api.ForkRequest{Count: 8, Env: map[string]string{"FORKED": "yes"}}, &fr)
	t.Logf("fork of 8: %s", time.Since(start))
	if fr.SnapshotKept || len(fr.Sandboxes) != 8 {
		t.Fatalf("fork: %+v", fr)
	}
	ids := map[string]bool{}
	for i, f := range fr.Sandboxes {
		if f.Sandbox == nil || f.Error != nil {
			t.Fatalf("fork %d failed: %+v", i, f.Error)
		}
		ids[f.Sandbox.ID] = true
	}
	if len(ids) != 8 || ids[src.ID] {
		t.Fatalf("fork ids: %v", ids)
	}
	for i, f := range fr.Sandboxes {
		if got := e.sh(f.Sandbox.ID, "curl -sf localhost:8000/; echo; cat /workspace/f; echo $FORKED").Stdout; got != "2\nshared\nyes\n" {
			t.Errorf("fork %d: %q", i, got)
		}
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+fr.Sandboxes[3].Sandbox.ID, nil, nil)
	for i, f := range fr.Sandboxes {
		if i == 3 {
			continue
		}
		if got := e.sh(f.Sandbox.ID, "curl -sf localhost:8000/").Stdout; got != "3" {
			t.Errorf("fork %d after fork 3 was destroyed: %q", i, got)
		}
	}
	if got := e.count(src.ID); got != "2" {
		t.Errorf("the source's counter: %q, want 2 (forks count on their own)", got)
	}
	e.expectError(http.StatusNotFound, "not_found", "GET", "/v1/snapshots/"+fr.Snapshot.ID, nil)
	if left := e.snapshotImages(); len(left) > 0 {
		t.Errorf("a fork's snapshot left on the host: %v", left)
	}
	// Kept, with a name.
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+src.ID+"/fork", api.ForkRequest{Count: 1, KeepSnapshot: true, Name: "kept"}, &fr)
	if !fr.SnapshotKept || fr.Snapshot.Name != "kept" || fr.Sandboxes[0].Sandbox == nil {
		t.Fatalf("kept fork: %+v", fr)
	}
	var got api.Snapshot
	e.must(http.StatusOK, "GET", "/v1/snapshots/kept", nil, &got)
	if got.ID != fr.Snapshot.ID {
		t.Errorf("kept snapshot: %+v", got)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/snapshots/kept", nil, nil)
}

// TestSnapshotsBelongToKeys: tenant B gets 404 for tenant A's snapshot on
// every route — get, delete, create from it by id or name, list (absent)
// — and for A's sandbox on the snapshot and fork routes; B's names are
// B's. An administrator's key sees every key's.
func TestSnapshotsBelongToKeys(t *testing.T) {
	e := newEnv(t)
	a, b := e.newTenant("snap-a"), e.newTenant("snap-b")
	must := func(who caller, want int, method, path string, body any) []byte {
		t.Helper()
		status, data := who(method, path, body)
		if status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, status, data, want)
		}
		return data
	}
	var sbA api.Sandbox
	mustDecode(t, must(a.do, 201, "POST", "/v1/sandboxes", api.CreateSandboxRequest{}), &sbA)
	var snA api.Snapshot
	mustDecode(t, must(a.do, 201, "POST", "/v1/sandboxes/"+sbA.ID+"/snapshots", api.CreateSnapshotRequest{Name: "mine"}), &snA)
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/snapshots/" + snA.ID},
		{"GET", "/v1/snapshots/mine"},
		{"DELETE", "/v1/snapshots/" + snA.ID},
		{"DELETE", "/v1/snapshots/mine"},
		{"POST", "/v1/sandboxes/" + sbA.ID + "/snapshots"},
		{"POST", "/v1/sandboxes/" + sbA.ID + "/fork"},
	} {
		var body any
		if strings.HasSuffix(c.path, "/fork") {
			body = api.ForkRequest{Count: 1}
		}
		status, data := b.do(c.method, c.path, body)
		if status != http.StatusNotFound || errorCode(t, data) != "not_found" {
			t.Errorf("tenant B %s %s: %d %s, want 404", c.method, c.path, status, data)
		}
	}
	for _, ref := range []string{snA.ID, "mine"} {
		status, data := b.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{Snapshot: ref})
		if status != http.StatusNotFound || errorCode(t, data) != "not_found" {
			t.Errorf("tenant B creates from A's snapshot %s: %d %s, want 404", ref, status, data)
		}
	}
	var list api.SnapshotList
	mustDecode(t, must(b.do, 200, "GET", "/v1/snapshots", nil), &list)
	if len(list.Snapshots) != 0 {
		t.Errorf("tenant B lists %+v", list.Snapshots)
	}
	// B may use the same name for its own.
	var sbB api.Sandbox
	mustDecode(t, must(b.do, 201, "POST", "/v1/sandboxes", api.CreateSandboxRequest{}), &sbB)
	var snB api.Snapshot
	mustDecode(t, must(b.do, 201, "POST", "/v1/sandboxes/"+sbB.ID+"/snapshots", api.CreateSnapshotRequest{Name: "mine"}), &snB)
	var fromB api.Sandbox
	mustDecode(t, must(b.do, 201, "POST", "/v1/sandboxes", api.CreateSandboxRequest{Snapshot: "mine"}), &fromB)
	// A's snapshot is still there and A's.
	var fromA api.Sandbox
	mustDecode(t, must(a.do, 201, "POST", "/v1/sandboxes", api.CreateSandboxRequest{Snapshot: "mine"}), &fromA)
	mustDecode(t, must(a.do, 200, "GET", "/v1/snapshots", nil), &list)
	if len(list.Snapshots) != 1 || list.Snapshots[0].ID != snA.ID {
		t.Errorf("tenant A lists %+v", list.Snapshots)
	}
	// The administrator sees both.
	e.must(http.StatusOK, "GET", "/v1/snapshots", nil, &list)
	if len(list.Snapshots) != 2 {
		t.Errorf("the administrator lists %+v", list.Snapshots)
	}
	must(a.do, 204, "DELETE", "/v1/snapshots/mine", nil)
	must(b.do, 204, "DELETE", "/v1/snapshots/mine", nil)
}

// TestSnapshotQuota: a snapshot counts in its key's disk quota. One that
// would not fit is refused (507) before anything is written, and the
// sandbox runs on; a kept snapshot's bytes then refuse a create that
// would have fitted.
func TestSnapshotQuota(t *testing.T) {
	e := newEnv(t)
	var key api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "q", DailyLimitMicros: 5_000_000, DiskQuotaMiB: 300}, &key)
	tn := &tenant{e: e, key: key}
	var sb api.Sandbox
	status, data := tn.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{DiskMiB: 200, MemoryMiB: 512})
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, data)
	}
	mustDecode(t, data, &sb)
	// 150 MiB in memory: the image's estimate passes the 100 MiB left.
	tn.e.must(http.StatusOK, "POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Command: "head -c 150000000 /dev/urandom > /tmp/fill"}, nil)
	status, data = tn.do("POST", "/v1/sandboxes/"+sb.ID+"/snapshots", nil)
	if status != http.StatusInsufficientStorage || errorCode(t, data) != "disk_quota_exceeded" || !strings.Contains(string(data), "snapshot") {
		t.Fatalf("snapshot past the disk quota: %d %s, want 507 disk_quota_exceeded", status, data)
	}
	if left := e.snapshotImages(); len(left) > 0 {
		t.Errorf("a refused snapshot wrote %v", left)
	}
	if got := e.get(sb.ID); got.State != "running" {
		t.Errorf("the sandbox after a refused snapshot: %+v", got)
	}
	// A smaller sandbox's snapshot fits; kept, its bytes count.
	if status, data := tn.do("DELETE", "/v1/sandboxes/"+sb.ID, nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, data)
	}
	status, data = tn.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{DiskMiB: 100})
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, data)
	}
	mustDecode(t, data, &sb)
	var sn api.Snapshot
	status, data = tn.do("POST", "/v1/sandboxes/"+sb.ID+"/snapshots", nil)
	if status != http.StatusCreated {
		t.Fatalf("a snapshot that fits: %d %s", status, data)
	}
	mustDecode(t, data, &sn)
	t.Logf("a small snapshot: %d MiB", sn.Bytes>>20)
	// 100 MiB of disk plus the snapshot (at least 1 MiB, counted in whole
	// MiB): a sandbox of 200 MiB no longer fits in 300.
	status, data = tn.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{DiskMiB: 200})
	if status != http.StatusInsufficientStorage || !strings.Contains(string(data), "pause images and snapshots") {
		t.Errorf("a create past the quota with a snapshot kept: %d %s", status, data)
	}
	if status, data := tn.do("DELETE", "/v1/snapshots/"+sn.ID, nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, data)
	}
	if status, data := tn.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{DiskMiB: 200}); status != http.StatusCreated {
		t.Errorf("the create after the snapshot was deleted: %d %s", status, data)
	}
}

// TestSnapshotRacesKill: snapshots of sandboxes that are destroyed at the
// same moment, creates from a snapshot that is deleted at the same moment:
// each ends one way or the other, and what is left on the host is exactly
// what the records say (no image without a record, no record without an
// image, no sandbox left running).
func TestSnapshotRacesKill(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	for i := range 4 {
		sb := e.create(api.CreateSandboxRequest{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 40 * time.Millisecond)
			status, data := e.do("POST", "/v1/sandboxes/"+sb.ID+"/snapshots", nil)
			if status != http.StatusCreated && status != http.StatusGone && status != http.StatusConflict {
				t.Errorf("snapshot racing a delete: %d %s", status, data)
			}
		}()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(3-i) * 40 * time.Millisecond)
			if status, data := e.do("DELETE", "/v1/sandboxes/"+sb.ID, nil); status != http.StatusNoContent {
				t.Errorf("delete racing a snapshot: %d %s", status, data)
			}
		}()
	}
	wg.Wait()
	src := e.create(api.CreateSandboxRequest{})
	sn := e.snapshot(src.ID, api.CreateSnapshotRequest{})
	for i := range 3 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			status, data := e.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{Snapshot: sn.ID})
			if status != http.StatusCreated && status != http.StatusNotFound {
				t.Errorf("create %d racing the snapshot's delete: %d %s", i, status, data)
			}
		}()
		go func() {
			defer wg.Done()
			if i == 1 {
				time.Sleep(100 * time.Millisecond)
				status, data := e.do("DELETE", "/v1/snapshots/"+sn.ID, nil)
				if status != http.StatusNoContent {
					t.Errorf("delete of the snapshot: %d %s", status, data)
				}
			}
		}()
	}
	wg.Wait()
	var list api.SnapshotList
	e.must(http.StatusOK, "GET", "/v1/snapshots", nil, &list)
	images := map[string]bool{}
	for _, id := range e.snapshotImages() {
		images[id] = true
	}
	for _, sn := range list.Snapshots {
		if !images[sn.ID] {
			t.Errorf("snapshot %s has a record and no image", sn.ID)
		}
		delete(images, sn.ID)
	}
	for id := range images {
		t.Errorf("snapshot image %s has no record", id)
	}
	for _, sn := range list.Snapshots {
		e.must(http.StatusNoContent, "DELETE", "/v1/snapshots/"+sn.ID, nil, nil)
	}
	// newEnv's cleanup checks that no sandbox was left on the host.
}

// TestSnapshotSurvivesRestart: a snapshot outlives the server that took it;
// the next server on the data directory restores it, and removes a
// snapshot left half-written and an image no record knows.
func TestSnapshotSurvivesRestart(t *testing.T) {
	dataDir, err := os.MkdirTemp("/tmp", "wr-snaprestart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	e := newEnv(t, withDataDir(dataDir))
	src := e.create(api.CreateSandboxRequest{})
	e.startCounter(src.ID)
	sn := e.snapshot(src.ID, api.CreateSnapshotRequest{Name: "keep"})
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+src.ID, nil, nil)
	e.detach()
	root := filepath.Join(dataDir, "gvisor", "snapshots")
	for _, d := range []string{".new-snap_halfwritten", "snap_orphan"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	e2 := newEnv(t, withDataDir(dataDir))
	if got := e2.snapshotImages(); len(got) != 1 || got[0] != sn.ID {
		t.Errorf("snapshot images after the restart: %v, want only %s", got, sn.ID)
	}
	c := e2.create(api.CreateSandboxRequest{Snapshot: "keep"})
	if got := e2.count(c.ID); got != "2" {
		t.Errorf("restored after a restart: counter %q, want 2", got)
	}
	e2.must(http.StatusNoContent, "DELETE", "/v1/snapshots/keep", nil, nil)
}

// TestSnapshotInFlightAndBilling: an exec running when a snapshot is taken
// ends with 409 conflict saying why (its connection closed at the save),
// a background process runs on, and the next request works at once. The
// snapshot is billed at the storage price under its own id from then on,
// and its billing stops with its deletion.
func TestSnapshotInFlightAndBilling(t *testing.T) {
	e := newEnv(t, withMeterInterval(300*time.Millisecond), withStoragePrice(3.6e9)) // 1e6 µ$ per GiB-second
	sb := e.create(api.CreateSandboxRequest{})
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+sb.ID+"/processes",
		agentapi.ExecRequest{Command: "while :; do date +%s%N > /tmp/tick; sleep 0.1; done"}, nil)
	collected := make(chan outcome, 1)
	go func() {
		collected <- e.try("POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Command: "sleep 60"})
	}()
	time.Sleep(time.Second)
	sn := e.snapshot(sb.ID, api.CreateSnapshotRequest{})
	select {
	case o := <-collected:
		if o.status != http.StatusConflict || errorCode(t, o.body) != "conflict" || !strings.Contains(string(o.body), "snapshot") {
			t.Errorf("the exec running at the snapshot: %s, want 409 conflict naming the snapshot", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the exec running at the snapshot did not end")
	}
	first := e.sh(sb.ID, "cat /tmp/tick").Stdout
	time.Sleep(500 * time.Millisecond)
	if e.sh(sb.ID, "cat /tmp/tick").Stdout == first {
		t.Errorf("the background process stopped at the snapshot")
	}
	if res := e.sh(sb.ID, "pgrep -fx 'sleep 60' || echo none"); res.Stdout != "none\n" {
		t.Errorf("the interrupted exec's command outlived it: %+v", res)
	}

	time.Sleep(time.Second)
	before := e.sandboxRow(sn.ID)
	time.Sleep(2 * time.Second)
	after := e.sandboxRow(sn.ID)
	want := float64(sn.Bytes) / (1 << 30) * 2
	if grown := after.StorageGiBSeconds - before.StorageGiBSeconds; grown < want*0.4 || grown > want*1.8 || after.CPUSeconds != 0 || after.GiBSeconds != 0 {
		t.Errorf("the snapshot's usage over 2 s: %+v then %+v, want about %.5f GiB-s of storage and nothing else (%d bytes)", before, after, want, sn.Bytes)
	}
	var got api.Snapshot
	e.must(http.StatusOK, "GET", "/v1/snapshots/"+sn.ID, nil, &got)
	if got.CostMicros <= 0 {
		t.Errorf("the snapshot's cost: %+v", got)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/snapshots/"+sn.ID, nil, nil)
	final := e.sandboxRow(sn.ID)
	time.Sleep(time.Second)
	if later := e.sandboxRow(sn.ID); later.StorageGiBSeconds != final.StorageGiBSeconds {
		t.Errorf("billed after its deletion: %+v then %+v", final, later)
	}
}
