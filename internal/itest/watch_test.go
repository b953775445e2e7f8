package itest

import (
	"context"
	"fmt"
	"testing"
	"time"

	withruntime "withruntime.dev/runtime/sdk/go"
)

// watchEvents reads w's events into a channel, for collect.
func watchEvents(w *withruntime.FileWatch) <-chan withruntime.WatchEvent {
	out := make(chan withruntime.WatchEvent, 10000)
	go func() {
		defer close(out)
		for ev, err := range w.Events() {
			if err != nil {
				return
			}
			out <- ev
		}
	}()
	return out
}

// collect takes want events from evs, failing after d.
func collect(t *testing.T, evs <-chan withruntime.WatchEvent, want int, d time.Duration) []withruntime.WatchEvent {
	t.Helper()
	var got []withruntime.WatchEvent
	timeout := time.After(d)
	for len(got) < want {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatalf("the watch ended after %d events, want %d", len(got), want)
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("%d events within %s, want %d; the first: %.2000v", len(got), d, want, got)
		}
	}
	return got
}

// TestFileWatch: a watch through the API and the Go SDK reports, from
// inotify in the sandbox, a file created and removed within a millisecond
// (which no listing every 250 ms sees), a rename as one event with both
// names, a chmod, and a burst of 1,000 files created and removed, all in
// order (or an overflow event saying what was lost).
func TestFileWatch(t *testing.T) {
	e := newEnv(t)
	c, err := withruntime.NewClient(withruntime.WithBaseURL(e.http.URL), withruntime.WithAPIKey(e.key))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := c.Create(ctx, withruntime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	w, err := sb.Files().Watch(ctx, "", true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	evch := watchEvents(w)
	res, err := sb.Exec(ctx, withruntime.ExecRequest{Command: `python3 -c '
import os, time
t = time.monotonic()
open("/workspace/blink", "w").close(); os.unlink("/workspace/blink")
print(round((time.monotonic() - t) * 1e6))
' && echo x > /workspace/b && mv /workspace/b /workspace/c && chmod 600 /workspace/c && mkdir /workspace/d`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("changes: %+v %v", res, err)
	}
	t.Logf("the file lived %s µs", res.Stdout)
	want := []withruntime.WatchEvent{
		{Type: "create", Path: "/workspace/blink"}, {Type: "remove", Path: "/workspace/blink"},
		{Type: "create", Path: "/workspace/b"}, {Type: "write", Path: "/workspace/b"},
		{Type: "rename", OldPath: "/workspace/b", Path: "/workspace/c"},
		{Type: "chmod", Path: "/workspace/c"}, {Type: "create", Path: "/workspace/d", IsDir: true},
	}
	got := collect(t, evch, len(want), 30*time.Second)
	for i := range want {
		g := got[i]
		if g.Type != want[i].Type || g.Path != want[i].Path || g.OldPath != want[i].OldPath || g.IsDir != want[i].IsDir || g.Time.IsZero() {
			t.Fatalf("event %d: %+v, want %+v (all: %+v)", i, g, want[i], got)
		}
	}

	// A burst: 1,000 files created and removed in a new directory, watched
	// once its create was read.
	res, err = sb.Exec(ctx, withruntime.ExecRequest{Command: `python3 -c '
import os
for i in range(1000):
    p = "/workspace/d/f%d" % i
    open(p, "w").close(); os.unlink(p)
'`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("burst: %+v %v", res, err)
	}
	evs := collect(t, evch, 2000, 2*time.Minute)
	lost := int64(0)
	i := 0
	for _, ev := range evs {
		if ev.Type == "overflow" {
			lost += ev.Dropped
			continue
		}
		want := fmt.Sprintf("/workspace/d/f%d", i/2)
		typ := "create"
		if i%2 == 1 {
			typ = "remove"
		}
		if lost == 0 && (ev.Type != typ || ev.Path != want) {
			t.Fatalf("burst event %d: %+v, want %s %s", i, ev, typ, want)
		}
		i++
	}
	if lost > 0 {
		t.Logf("an overflow said %d events were lost", lost)
	}
}
