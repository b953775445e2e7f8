package e2b

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/compat/e2b/envd/filesystempb"
)

// Watching a directory is Runtime's own file watch (GET
// /v1/sandboxes/{id}/files/watch): inotify inside the sandbox, so a file
// that lived for a millisecond is reported, and a rename is one event.
// Each of its events becomes envd's: create, write, remove and chmod as
// they are; a rename as envd reports one (fsnotify's way): RENAME of the
// old name, then CREATE of the new; an overflow (events lost) has no envd
// equivalent and is dropped; an error event (the directory removed) ends
// the watch with that error. With include_entry, every event but a remove
// carries the entry as a stat right after gives it (absent when the entry
// is gone by then).
const (
	// watchIdle ends a watcher (CreateWatcher) nobody read for so long.
	watchIdle = 10 * time.Minute
	// maxWatchEvents caps the events a watcher holds; the oldest go first.
	maxWatchEvents = 10000
	// maxWatchers caps watchers per sandbox.
	maxWatchers = 64
)

// watchStream is one of Runtime's file watches, as the facade reads it.
type watchStream struct {
	f       *filesystemService
	t       target
	dir     string
	entries bool
	body    io.ReadCloser
	sc      *bufio.Scanner
}

// openWatch starts a watch of path (envd's: relative to the user's home)
// and returns once it is in place.
func (f *filesystemService) openWatch(ctx context.Context, t target, path string, recursive, includeEntry bool) (*watchStream, error) {
	dir := t.abs(path)
	q := t.base() + "/files/watch?path=" + url.QueryEscape(dir) + "&recursive=" + strconv.FormatBool(recursive)
	resp, err := f.s.api.do(ctx, t.as, "GET", q, nil, http.Header{"Accept": {agentapi.ContentTypeNDJSON}})
	if err != nil {
		return nil, rpcError(err)
	}
	w := &watchStream{f: f, t: t, dir: dir, entries: includeEntry, body: resp.Body, sc: bufio.NewScanner(resp.Body)}
	w.sc.Buffer(make([]byte, 64<<10), 1<<20)
	ev, err := w.next()
	if err == nil && ev.Type != "ready" {
		err = connect.NewError(connect.CodeInternal, fmt.Errorf("the watch of %s began with %q", dir, ev.Type))
	}
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *watchStream) close() { w.body.Close() }

// next reads the next line (heartbeats included: a sign of life to the
// caller). An error event ends the watch with its error.
func (w *watchStream) next() (agentapi.WatchEvent, error) {
	if !w.sc.Scan() {
		err := w.sc.Err()
		if err == nil {
			err = errors.New("the sandbox's watch ended (the sandbox was paused or stopped)")
		}
		return agentapi.WatchEvent{}, connect.NewError(connect.CodeUnavailable, err)
	}
	var ev agentapi.WatchEvent
	if err := json.Unmarshal(w.sc.Bytes(), &ev); err != nil {
		return agentapi.WatchEvent{}, connect.NewError(connect.CodeInternal, fmt.Errorf("a watch event that is not Runtime's: %v", err))
	}
	if ev.Type == "error" {
		return ev, rpcError(&apiError{Status: statusOfCode(ev.Code), Code: ev.Code, Message: ev.Message})
	}
	return ev, nil
}

// statusOfCode is the status of an error event's code.
func statusOfCode(code string) int {
	if code == agentapi.CodeNotFound {
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// translate turns one of Runtime's watch events into envd's.
func (w *watchStream) translate(ctx context.Context, ev agentapi.WatchEvent) []*filesystempb.FilesystemEvent {
	one := func(p string, typ filesystempb.EventType) *filesystempb.FilesystemEvent {
		fe := &filesystempb.FilesystemEvent{Name: relName(w.dir, p), Type: typ}
		if w.entries && typ != filesystempb.EventType_EVENT_TYPE_REMOVE && typ != filesystempb.EventType_EVENT_TYPE_RENAME {
			if fi, err := w.f.stat(ctx, w.t, p); err == nil {
				fe.Entry = entryInfo(*fi)
			}
		}
		return fe
	}
	switch ev.Type {
	case "create":
		return []*filesystempb.FilesystemEvent{one(ev.Path, filesystempb.EventType_EVENT_TYPE_CREATE)}
	case "write":
		return []*filesystempb.FilesystemEvent{one(ev.Path, filesystempb.EventType_EVENT_TYPE_WRITE)}
	case "remove":
		return []*filesystempb.FilesystemEvent{one(ev.Path, filesystempb.EventType_EVENT_TYPE_REMOVE)}
	case "chmod":
		return []*filesystempb.FilesystemEvent{one(ev.Path, filesystempb.EventType_EVENT_TYPE_CHMOD)}
	case "rename":
		return []*filesystempb.FilesystemEvent{one(ev.OldPath, filesystempb.EventType_EVENT_TYPE_RENAME),
			one(ev.Path, filesystempb.EventType_EVENT_TYPE_CREATE)}
	}
	return nil // ready, heartbeat, overflow, and types to come
}

func (f *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystempb.WatchDirRequest], stream *connect.ServerStream[filesystempb.WatchDirResponse]) error {
	t := targetFrom(ctx)
	in := req.Msg
	w, err := f.openWatch(ctx, t, in.GetPath(), in.GetRecursive(), in.GetIncludeEntry())
	if err != nil {
		return err
	}
	defer w.close()
	if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Start{Start: &filesystempb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	lastSent := time.Now()
	for {
		ev, err := w.next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, fe := range w.translate(ctx, ev) {
			if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Filesystem{Filesystem: fe}}); err != nil {
				return err
			}
			lastSent = time.Now()
		}
		if time.Since(lastSent) > keepAliveEvery { // heartbeats come every 2 s
			if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Keepalive{Keepalive: &filesystempb.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
			lastSent = time.Now()
		}
	}
}

// watchers are the watchers of CreateWatcher, each reading one of
// Runtime's watches into a bounded event buffer.
type watchers struct {
	mu sync.Mutex
	m  map[string]*watcher
}

type watcher struct {
	sandbox string
	cancel  context.CancelFunc
	mu      sync.Mutex
	events  []*filesystempb.FilesystemEvent
	err     error // why polling stopped, if it did
	read    time.Time
}

func newWatchers() *watchers { return &watchers{m: map[string]*watcher{}} }

func (ws *watchers) closeAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for id, w := range ws.m {
		w.cancel()
		delete(ws.m, id)
	}
}

func (ws *watchers) remove(id string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.m[id]; w != nil {
		w.cancel()
		delete(ws.m, id)
	}
}

// get returns watcher id of sandbox sb (another sandbox's watcher is not
// found).
func (ws *watchers) get(sb, id string) (*watcher, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.m[id]
	if w == nil || w.sandbox != sb {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no watcher %q in this sandbox (it was removed, or nobody read it for %s)", id, watchIdle))
	}
	return w, nil
}

func (f *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[filesystempb.CreateWatcherRequest]) (*connect.Response[filesystempb.CreateWatcherResponse], error) {
	t := targetFrom(ctx)
	in := req.Msg
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	wctx, cancel := context.WithCancel(detach(ctx))
	stream, err := f.openWatch(wctx, t, in.GetPath(), in.GetRecursive(), in.GetIncludeEntry())
	if err != nil {
		cancel()
		return nil, err
	}
	w := &watcher{sandbox: t.id, cancel: cancel, read: time.Now()}
	ws := f.s.watches
	ws.mu.Lock()
	n := 0
	for _, o := range ws.m {
		if o.sandbox == t.id {
			n++
		}
	}
	if n >= maxWatchers {
		ws.mu.Unlock()
		stream.close()
		cancel()
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("this sandbox has %d watchers; remove one first", maxWatchers))
	}
	ws.m[id] = w
	ws.mu.Unlock()
	go f.readWatcher(wctx, id, w, stream)
	return connect.NewResponse(&filesystempb.CreateWatcherResponse{WatcherId: id}), nil
}

// readWatcher reads stream into w until the watcher is removed, nobody
// read it for watchIdle (checked at each line: heartbeats come every 2 s),
// or the watch ends (its error is kept until read once).
func (f *filesystemService) readWatcher(ctx context.Context, id string, w *watcher, stream *watchStream) {
	defer f.s.watches.remove(id)
	defer stream.close()
	for {
		ev, err := stream.next()
		if err != nil {
			if ctx.Err() == nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				select { // kept until read once, so the reader learns why
				case <-ctx.Done():
				case <-time.After(watchIdle):
				}
			}
			return
		}
		evs := stream.translate(ctx, ev)
		w.mu.Lock()
		idle := time.Since(w.read) > watchIdle
		w.events = append(w.events, evs...)
		if over := len(w.events) - maxWatchEvents; over > 0 {
			w.events = w.events[over:]
		}
		w.mu.Unlock()
		if idle {
			return
		}
	}
}

func (f *filesystemService) GetWatcherEvents(ctx context.Context, req *connect.Request[filesystempb.GetWatcherEventsRequest]) (*connect.Response[filesystempb.GetWatcherEventsResponse], error) {
	t := targetFrom(ctx)
	w, err := f.s.watches.get(t.id, req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	evs, werr := w.events, w.err
	w.events, w.read = nil, time.Now()
	w.mu.Unlock()
	if werr != nil && len(evs) == 0 {
		f.s.watches.remove(req.Msg.GetWatcherId())
		return nil, werr
	}
	return connect.NewResponse(&filesystempb.GetWatcherEventsResponse{Events: evs}), nil
}

func (f *filesystemService) RemoveWatcher(ctx context.Context, req *connect.Request[filesystempb.RemoveWatcherRequest]) (*connect.Response[filesystempb.RemoveWatcherResponse], error) {
	t := targetFrom(ctx)
	if _, err := f.s.watches.get(t.id, req.Msg.GetWatcherId()); err != nil {
		return nil, err
	}
	f.s.watches.remove(req.Msg.GetWatcherId())
	return connect.NewResponse(&filesystempb.RemoveWatcherResponse{}), nil
}
