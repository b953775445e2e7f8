package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/compat/e2b/envd/filesystempb"
)

// Watching a directory is done from the host by listing it every
// watchPoll and comparing: a new entry is a create (and a write when it
// has bytes), a changed size or time a write, a changed mode a chmod, a
// vanished entry a remove. A rename shows as a remove and a create. A
// recursive watch lists maxListDepth levels. The agent has no watch of its
// own yet (an inotify watch in the agent would report every event).
const (
	watchPoll = 250 * time.Millisecond
	// watchIdle ends a polled watcher (CreateWatcher) nobody read for so
	// long.
	watchIdle = 10 * time.Minute
	// maxWatchEvents caps the events a polled watcher holds; the oldest
	// go first.
	maxWatchEvents = 10000
	// maxWatchers caps polled watchers per sandbox.
	maxWatchers = 64
)

type snapshot map[string]agentapi.FileInfo

func (f *filesystemService) snapshot(ctx context.Context, t target, dir string, recursive bool) (snapshot, error) {
	depth := 1
	if recursive {
		depth = maxListDepth
	}
	s := snapshot{}
	h := &held{key: t.keyID()}
	defer h.release()
	if err := f.list(ctx, t, dir, depth, h, func(e agentapi.FileInfo) { s[e.Path] = e }); err != nil {
		return nil, err
	}
	return s, nil
}

// diff lists the events that turn old into cur, in path order.
func diff(dir string, old, cur snapshot) []*filesystempb.FilesystemEvent {
	var out []*filesystempb.FilesystemEvent
	ev := func(p string, typ filesystempb.EventType) {
		out = append(out, &filesystempb.FilesystemEvent{Name: relName(dir, p), Type: typ})
	}
	paths := make([]string, 0, len(old)+len(cur))
	for p := range old {
		paths = append(paths, p)
	}
	for p := range cur {
		if _, ok := old[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	for _, p := range paths {
		o, had := old[p]
		c, has := cur[p]
		switch {
		case had && !has:
			ev(p, filesystempb.EventType_EVENT_TYPE_REMOVE)
		case !had && has:
			ev(p, filesystempb.EventType_EVENT_TYPE_CREATE)
			if c.Type == "file" && c.Size > 0 {
				ev(p, filesystempb.EventType_EVENT_TYPE_WRITE)
			}
		case o.Type != c.Type:
			ev(p, filesystempb.EventType_EVENT_TYPE_REMOVE)
			ev(p, filesystempb.EventType_EVENT_TYPE_CREATE)
		case o.Size != c.Size || !o.ModTime.Equal(c.ModTime):
			if c.Type != "dir" {
				ev(p, filesystempb.EventType_EVENT_TYPE_WRITE)
			}
		case o.Mode != c.Mode || o.Uid != c.Uid || o.Gid != c.Gid:
			ev(p, filesystempb.EventType_EVENT_TYPE_CHMOD)
		}
	}
	return out
}

// watchStart checks that dir is a directory and takes its first snapshot.
func (f *filesystemService) watchStart(ctx context.Context, t target, path string, recursive, includeEntry bool) (string, snapshot, error) {
	if includeEntry {
		return "", nil, connect.NewError(connect.CodeUnimplemented, errors.New("include_entry is not supported by Runtime"))
	}
	dir := t.abs(path)
	fi, err := f.stat(ctx, t, dir)
	if err != nil {
		return "", nil, err
	}
	if fi.Type != "dir" {
		return "", nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory; watch a directory", dir))
	}
	snap, err := f.snapshot(ctx, t, dir, recursive)
	if err != nil {
		return "", nil, rpcError(err)
	}
	return dir, snap, nil
}

func (f *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystempb.WatchDirRequest], stream *connect.ServerStream[filesystempb.WatchDirResponse]) error {
	t := targetFrom(ctx)
	in := req.Msg
	dir, snap, err := f.watchStart(ctx, t, in.GetPath(), in.GetRecursive(), in.GetIncludeEntry())
	if err != nil {
		return err
	}
	if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Start{Start: &filesystempb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	poll := time.NewTicker(watchPoll)
	defer poll.Stop()
	lastSent := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
		}
		cur, err := f.snapshot(ctx, t, dir, in.GetRecursive())
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return rpcError(err)
		}
		for _, ev := range diff(dir, snap, cur) {
			if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Filesystem{Filesystem: ev}}); err != nil {
				return err
			}
			lastSent = time.Now()
		}
		snap = cur
		if time.Since(lastSent) > keepAliveEvery {
			if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Keepalive{Keepalive: &filesystempb.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
			lastSent = time.Now()
		}
	}
}

// watchers are the polled watchers (CreateWatcher), each with its own
// polling goroutine and a bounded event buffer.
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
	dir, snap, err := f.watchStart(ctx, t, in.GetPath(), in.GetRecursive(), in.GetIncludeEntry())
	if err != nil {
		return nil, err
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	wctx, cancel := context.WithCancel(detach(ctx))
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
		cancel()
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("this sandbox has %d watchers; remove one first", maxWatchers))
	}
	ws.m[id] = w
	ws.mu.Unlock()
	go f.pollWatcher(wctx, t, id, w, dir, in.GetRecursive(), snap)
	return connect.NewResponse(&filesystempb.CreateWatcherResponse{WatcherId: id}), nil
}

func (f *filesystemService) pollWatcher(ctx context.Context, t target, id string, w *watcher, dir string, recursive bool, snap snapshot) {
	defer f.s.watches.remove(id)
	tick := time.NewTicker(watchPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.mu.Lock()
		idle := time.Since(w.read) > watchIdle
		w.mu.Unlock()
		if idle {
			return
		}
		cur, err := f.snapshot(ctx, t, dir, recursive)
		if err != nil {
			if ctx.Err() == nil {
				w.mu.Lock()
				w.err = rpcError(err)
				w.mu.Unlock()
				// Kept until read once, so the reader learns why.
				select {
				case <-ctx.Done():
				case <-time.After(watchIdle):
				}
			}
			return
		}
		evs := diff(dir, snap, cur)
		snap = cur
		w.mu.Lock()
		w.events = append(w.events, evs...)
		if over := len(w.events) - maxWatchEvents; over > 0 {
			w.events = w.events[over:]
		}
		w.mu.Unlock()
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
