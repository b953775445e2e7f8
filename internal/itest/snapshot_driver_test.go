package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/driver/gvisor"
	"withruntime.dev/runtime/internal/template"
)

// driverAgent talks to one sandbox's agent through its driver handle.
type driverAgent struct {
	t  *testing.T
	tr *http.Transport
}

func newDriverAgent(t *testing.T, h *driver.Handle) *driverAgent {
	return &driverAgent{t: t, tr: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return h.Dial(ctx) },
		DisableKeepAlives: true,
	}}
}

func (a *driverAgent) post(path string, in, out any) int {
	a.t.Helper()
	body, _ := json.Marshal(in)
	req, _ := http.NewRequest("POST", "http://agent"+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.tr.RoundTrip(req)
	if err != nil {
		a.t.Fatalf("agent %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			a.t.Fatalf("agent %s: %d %s: %v", path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

func (a *driverAgent) sh(command string) agentapi.ExecResult {
	a.t.Helper()
	var res agentapi.ExecResult
	if st := a.post("/exec", agentapi.ExecRequest{Command: command, TimeoutSeconds: 30}, &res); st != http.StatusOK {
		a.t.Fatalf("exec %q: status %d", command, st)
	}
	return res
}

// TestDriverSnapshotRestore: the gVisor driver saves a running sandbox as
// a snapshot while it runs on, and boots new sandboxes (new ids) from it
// that start where it was: a process with its memory, files on disk and
// in /tmp. Each restored sandbox is independent of the source and of the
// others. A snapshot whose template changed is refused before anything
// starts.
func TestDriverSnapshotRestore(t *testing.T) {
	dataDir := t.TempDir()
	d, err := gvisor.New(gvisor.Config{Runsc: runscBin, AgentBinary: agentBin, StateDir: filepath.Join(dataDir, "gvisor")})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ts := &template.Store{Dir: templatesDir}
	rootfs, err := ts.RootFS("base")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spec := func(id string) driver.Spec {
		return driver.Spec{ID: id, RootFS: rootfs, CPU: 1, MemoryBytes: 512 << 20, DiskBytes: 1 << 30,
			TmpBytes: 128 << 20, ShmBytes: 64 << 20, PidsLimit: 128, LeaseEndsAt: time.Now().Add(10 * time.Minute)}
	}
	var ids []string
	defer func() {
		for _, id := range ids {
			if err := d.Destroy(ctx, id); err != nil {
				t.Errorf("destroy %s: %v", id, err)
			}
		}
	}()
	src, err := d.Create(ctx, spec("sbx_snapsrc"))
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, src.ID)
	a := newDriverAgent(t, src)
	var p agentapi.Process
	if st := a.post("/processes", agentapi.ExecRequest{Command: counterServer}, &p); st != http.StatusCreated {
		t.Fatalf("start counter: %d", st)
	}
	if res := a.sh(`for i in $(seq 100); do curl -sf localhost:8000/ >/dev/null && exit 0; sleep 0.1; done; exit 1`); res.ExitCode != 0 {
		t.Fatalf("counter did not start: %+v", res)
	}
	a.sh("echo disk > /workspace/f; echo mem > /tmp/m")

	start := time.Now()
	img, err := d.Snapshot(ctx, src.ID, src.State, "snap_one")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot took %s; image %d KiB", time.Since(start), img.Bytes>>10)
	if got := a.sh("curl -sf localhost:8000/").Stdout; got != "2" {
		t.Fatalf("source counter after the snapshot: %q, want 2 (it runs on)", got)
	}
	var copies []*driver.Handle
	for i := range 2 {
		id := fmt.Sprintf("sbx_snapcopy%d", i)
		start := time.Now()
		sp := spec(id)
		if i == 1 { // more memory and disk than the source
			sp.MemoryBytes, sp.DiskBytes = 1<<30, 2<<30
		}
		h, err := d.Restore(ctx, sp, "snap_one")
		if err != nil {
			t.Fatalf("restore %s: %v", id, err)
		}
		ids = append(ids, id)
		t.Logf("restore %s took %s", id, time.Since(start))
		c := newDriverAgent(t, h)
		res := c.sh("curl -sf localhost:8000/; echo; cat /workspace/f /tmp/m")
		if want := "2\ndisk\nmem\n"; res.Stdout != want {
			t.Fatalf("restored %s: %q (stderr %q), want %q", id, res.Stdout, res.Stderr, want)
		}
		c.sh(fmt.Sprintf("echo %d > /workspace/f", i))
		copies = append(copies, h)
	}
	if got := a.sh("cat /workspace/f").Stdout; got != "disk\n" {
		t.Fatalf("the source's file after the copies wrote theirs: %q", got)
	}
	// A snapshot of a restored sandbox restores too (a fork of a fork).
	if _, err := d.Snapshot(ctx, copies[1].ID, copies[1].State, "snap_two"); err != nil {
		t.Fatalf("snapshot of a restored sandbox: %v", err)
	}
	h, err := d.Restore(ctx, spec("sbx_snapgrand"), "snap_two")
	if err != nil {
		t.Fatalf("restore of the second generation: %v", err)
	}
	ids = append(ids, h.ID)
	if got := newDriverAgent(t, h).sh("curl -sf localhost:8000/; echo; cat /workspace/f").Stdout; got != "3\n1\n" {
		t.Fatalf("second generation: %q, want the copy's counter (3) and file (1)", got)
	}
	list, err := d.ListSnapshots(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListSnapshots: %v %v", list, err)
	}
	// Another template root than the source's: refused, nothing started.
	other := spec("sbx_snapother")
	other.RootFS = t.TempDir()
	if _, err := d.Restore(ctx, other, "snap_one"); !errors.Is(err, driver.ErrNotRestorable) {
		t.Fatalf("restore on another root: %v, want ErrNotRestorable", err)
	}
	for _, snap := range list {
		if err := d.DeleteSnapshot(ctx, snap); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Restore(ctx, spec("sbx_snapgone"), "snap_one"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("restore of a deleted snapshot: %v, want ErrNotFound", err)
	}
	for _, id := range []string{"sbx_snapgone", "sbx_snapother"} {
		if _, err := os.Stat(filepath.Join(dataDir, "gvisor", "sandboxes", id)); !os.IsNotExist(err) {
			t.Fatalf("a refused restore left its directory: %v", err)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(dataDir, "gvisor", "snapshots")); len(left) != 0 {
		t.Fatalf("snapshots left: %v", left)
	}
}
