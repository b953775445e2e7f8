package e2b

import (
	"context"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/compat/e2b/envd/filesystempb"
)

func TestWatcherCovers(t *testing.T) {
	w := &watcher{dir: "/home/user/d"}
	for p, want := range map[string]bool{"/home/user/d/a": true, "/home/user/d/a/b": false, "/home/user/d": false,
		"/home/user/dd/a": false, "/home/user/a": false} {
		if got := w.covers(p); got != want {
			t.Errorf("covers(%q) = %v, want %v", p, got, want)
		}
	}
	w.recursive = true
	if !w.covers("/home/user/d/a/b") {
		t.Error("a recursive watch does not cover a nested path")
	}
	if !(&watcher{dir: "/"}).covers("/etc") || (&watcher{dir: "/"}).covers("/etc/x") {
		t.Error("the root's watch")
	}
}

// TestWatcherSettle: a poll waits for the last event of each of the
// facade's own operations it covers (an upload's write, not its create), no
// more than watchSettle for one that never comes, and not at all for one
// outside the watch.
func TestWatcherSettle(t *testing.T) {
	w := &watcher{dir: "/d", seen: map[string]time.Time{}, changed: make(chan struct{})}
	began := time.Now()
	op := fileOp{path: "/d/f", at: began, last: lastOfWrite}
	go func() {
		time.Sleep(50 * time.Millisecond)
		w.mu.Lock()
		w.note(agentapi.WatchEvent{Type: "create", Path: "/d/f", Upload: true}, time.Now())
		w.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		w.mu.Lock()
		w.note(agentapi.WatchEvent{Type: "write", Path: "/d/f", Upload: true}, time.Now())
		w.mu.Unlock()
	}()
	start := time.Now()
	w.settle(context.Background(), []fileOp{op, {path: "/elsewhere/x", at: began, last: lastOfWrite}})
	if d := time.Since(start); d < 140*time.Millisecond || d > watchSettle/2 {
		t.Fatalf("settled after %v: want it to wait for the write (~150 ms), not the create", d)
	}
	start = time.Now()
	w.settle(context.Background(), []fileOp{{path: "/d/never", at: time.Now(), last: lastOfRemove}})
	if d := time.Since(start); d < watchSettle || d > watchSettle+500*time.Millisecond {
		t.Fatalf("an event that never comes was waited for %v, want %v", d, watchSettle)
	}
	// an event read before the operation began does not count
	w.mu.Lock()
	w.note(agentapi.WatchEvent{Type: "remove", Path: "/d/old"}, time.Now())
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	w.settle(ctx, []fileOp{{path: "/d/old", at: time.Now().Add(time.Millisecond), last: lastOfRemove}})
	if time.Since(start) < 90*time.Millisecond {
		t.Fatal("an event older than the operation settled it")
	}
}

func TestFileOpsBounded(t *testing.T) {
	var o fileOps
	old := time.Now().Add(-2 * opsKeep)
	o.add("sb_old", fileOp{path: "/x", at: old})
	for i := range maxOps + 10 {
		o.add("sb", fileOp{path: "/p", at: time.Now().Add(time.Duration(i))})
	}
	if n := len(o.m["sb"]); n != maxOps {
		t.Fatalf("%d operations kept, want %d", n, maxOps)
	}
	if _, ok := o.m["sb_old"]; ok {
		t.Fatal("a sandbox's operations older than opsKeep were kept")
	}
	if got := o.since("sb", time.Now().Add(time.Hour)); len(got) != 0 {
		t.Fatalf("since the future: %d", len(got))
	}
}

// TestTranslateUpload: Runtime's upload events are envd's CREATE, CHMOD,
// WRITE (a new file) and CHMOD, WRITE (a rewrite); a plain write is WRITE.
func TestTranslateUpload(t *testing.T) {
	w := &watchStream{dir: "/d"}
	types := func(evs []*filesystempb.FilesystemEvent) (out []filesystempb.EventType) {
		for _, e := range evs {
			if e.Name != "f" {
				t.Fatalf("name %q", e.Name)
			}
			out = append(out, e.Type)
		}
		return out
	}
	got := append(types(w.translate(context.Background(), agentapi.WatchEvent{Type: "create", Path: "/d/f", Upload: true})),
		types(w.translate(context.Background(), agentapi.WatchEvent{Type: "write", Path: "/d/f", Upload: true}))...)
	want := []filesystempb.EventType{filesystempb.EventType_EVENT_TYPE_CREATE, filesystempb.EventType_EVENT_TYPE_CHMOD,
		filesystempb.EventType_EVENT_TYPE_WRITE}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("upload of a new file: %v, want %v", got, want)
	}
	if got := types(w.translate(context.Background(), agentapi.WatchEvent{Type: "write", Path: "/d/f"})); len(got) != 1 ||
		got[0] != filesystempb.EventType_EVENT_TYPE_WRITE {
		t.Fatalf("a plain write: %v", got)
	}
}
