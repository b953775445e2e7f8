package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// watchStream opens a watch of dir and returns its events as they come
// (heartbeats skipped), once it is ready.
func (a *testAgent) watchStream(ctx context.Context, dir string, recursive bool) <-chan agentapi.WatchEvent {
	a.t.Helper()
	q := url.Values{"path": {dir}}
	if recursive {
		q.Set("recursive", "true")
	}
	resp := a.do(ctx, "GET", "/files/watch?"+q.Encode(), nil)
	if resp.StatusCode != http.StatusOK {
		a.t.Fatalf("watch: %s", resp.Status)
	}
	ch := make(chan agentapi.WatchEvent, 100000)
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		a.t.Fatal("watch: no first line")
	}
	var first agentapi.WatchEvent
	if err := json.Unmarshal(sc.Bytes(), &first); err != nil || first.Type != "ready" || first.Path != dir {
		a.t.Fatalf("watch's first line: %s", sc.Bytes())
	}
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		for sc.Scan() {
			var ev agentapi.WatchEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type != agentapi.EventHeartbeat {
				ch <- ev
			}
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan agentapi.WatchEvent) agentapi.WatchEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return agentapi.WatchEvent{}
}

func TestWatchEvents(t *testing.T) {
	a := newTestAgent(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := a.workspace
	ch := a.watchStream(ctx, dir, true)
	p := filepath.Join(dir, "f")
	must(t, os.WriteFile(p, []byte("x"), 0o644))
	must(t, os.Chmod(p, 0o600))
	must(t, os.Rename(p, filepath.Join(dir, "g")))
	must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	expect(t, ch,
		agentapi.WatchEvent{Type: "create", Path: p}, agentapi.WatchEvent{Type: "write", Path: p}, agentapi.WatchEvent{Type: "chmod", Path: p},
		agentapi.WatchEvent{Type: "rename", OldPath: p, Path: filepath.Join(dir, "g")},
		agentapi.WatchEvent{Type: "create", Path: filepath.Join(dir, "sub"), IsDir: true})
	// Once a new directory's create is reported, it is watched too.
	must(t, os.WriteFile(filepath.Join(dir, "sub", "h"), nil, 0o644))
	must(t, os.Remove(filepath.Join(dir, "sub", "h")))
	must(t, os.Rename(filepath.Join(dir, "sub"), filepath.Join(dir, "sub2")))
	must(t, os.WriteFile(filepath.Join(dir, "sub2", "i"), nil, 0o644))
	expect(t, ch,
		agentapi.WatchEvent{Type: "create", Path: filepath.Join(dir, "sub", "h")}, agentapi.WatchEvent{Type: "remove", Path: filepath.Join(dir, "sub", "h")},
		agentapi.WatchEvent{Type: "rename", OldPath: filepath.Join(dir, "sub"), Path: filepath.Join(dir, "sub2"), IsDir: true},
		agentapi.WatchEvent{Type: "create", Path: filepath.Join(dir, "sub2", "i")})
}

func expect(t *testing.T, ch <-chan agentapi.WatchEvent, want ...agentapi.WatchEvent) {
	t.Helper()
	for i, w := range want {
		got := next(t, ch)
		if got.Type != w.Type || got.Path != w.Path || got.OldPath != w.OldPath || got.IsDir != w.IsDir || got.Upload != w.Upload || got.Time.IsZero() {
			t.Fatalf("event %d: %+v, want %+v", i, got, w)
		}
	}
}

func TestWatchRootRemoved(t *testing.T) {
	a := newTestAgent(t, Config{})
	dir := filepath.Join(a.workspace, "w")
	must(t, os.Mkdir(dir, 0o755))
	ch := a.watchStream(context.Background(), dir, false)
	must(t, os.Remove(dir))
	var last agentapi.WatchEvent
	for ev := range ch {
		last = ev
	}
	if last.Type != "error" || last.Code != agentapi.CodeNotFound {
		t.Fatalf("last event after the directory went: %+v", last)
	}
}

func TestWatchBadInput(t *testing.T) {
	a := newTestAgent(t, Config{})
	f := filepath.Join(a.workspace, "file")
	must(t, os.WriteFile(f, nil, 0o644))
	a.apiErr("GET", "/files/watch?path="+url.QueryEscape(f), nil, http.StatusBadRequest, agentapi.CodeBadRequest)
	a.apiErr("GET", "/files/watch?path=/nope", nil, http.StatusNotFound, agentapi.CodeNotFound)
	a.apiErr("GET", "/files/watch?recursive=maybe", nil, http.StatusBadRequest, agentapi.CodeBadRequest)
}

// TestWatchQueueBound: a client that does not read loses events past the
// queue's bound, and an overflow event says how many.
func TestWatchQueueBound(t *testing.T) {
	q := newWatchQueue()
	for i := range agentapi.WatchQueueEvents + 10 {
		q.push(agentapi.WatchEvent{Type: "create", Path: "/x/" + string(rune('a'+i%26)) + time.Now().String()})
	}
	evs, _ := q.take()
	if len(evs) != agentapi.WatchQueueEvents+1 {
		t.Fatalf("%d events, want the bound and an overflow", len(evs))
	}
	if last := evs[len(evs)-1]; last.Type != "overflow" || last.Dropped != 10 {
		t.Fatalf("last event %+v, want an overflow of 10", last)
	}
	q.push(agentapi.WatchEvent{Type: "write", Path: "/a"})
	q.push(agentapi.WatchEvent{Type: "write", Path: "/a"})
	if evs, _ := q.take(); len(evs) != 1 {
		t.Fatalf("two writes of one file in a row: %+v, want one event", evs)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestWatchUpload: an upload through the file API is the target's create
// and write, never its temporary file; over an existing file, a write;
// each marked upload, and a plain write beside them not.
func TestWatchUpload(t *testing.T) {
	a := newTestAgent(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := a.watchStream(ctx, a.workspace, false)
	p := filepath.Join(a.workspace, "up.txt")
	a.call("PUT", "/files?path="+url.QueryEscape(p), "one", http.StatusOK, nil)
	a.call("PUT", "/files?path="+url.QueryEscape(p), "two", http.StatusOK, nil)
	must(t, os.WriteFile(filepath.Join(a.workspace, "marker"), nil, 0o644))
	expect(t, ch, agentapi.WatchEvent{Type: "create", Path: p, Upload: true}, agentapi.WatchEvent{Type: "write", Path: p, Upload: true},
		agentapi.WatchEvent{Type: "write", Path: p, Upload: true}, agentapi.WatchEvent{Type: "create", Path: filepath.Join(a.workspace, "marker")})
}
