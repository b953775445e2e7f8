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
	"strings"
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
// is gone by then). The file API's own write (Runtime's upload: a file
// written beside its target and renamed over it, which Runtime reports as
// a create, when new, and a write, both marked upload) is what envd's
// upload shows: CREATE when new, CHMOD (the owner set), WRITE.
//
// envd's watcher lives in the process that writes the files, so its
// events are in its buffer by the time a write answers; Runtime's come
// from inside the sandbox a moment later. So that a poller
// (GetWatcherEvents) right after a file operation made through this
// facade sees its events as on envd, the facade notes each of its own
// completed writes, directory creations, moves and removes (ops), and
// GetWatcherEvents waits, at most watchSettle, until the watcher has read
// an event of each such path it covers made since it last answered.
const (
	// watchIdle ends a watcher (CreateWatcher) nobody read for so long.
	watchIdle = 10 * time.Minute
	// maxWatchEvents caps the events a watcher holds; the oldest go first.
	maxWatchEvents = 10000
	// maxWatchers caps watchers per sandbox.
	maxWatchers = 64
	// watchSettle is how long GetWatcherEvents waits for the events of the
	// facade's own file operations (see above).
	watchSettle = time.Second
	// opsKeep is how long a file operation is remembered for watchSettle;
	// maxOps caps those remembered per sandbox (the oldest go first).
	opsKeep = 10 * time.Second
	maxOps  = 256
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
		if ev.Upload {
			// envd's upload sets the file's owner, then writes it.
			return []*filesystempb.FilesystemEvent{one(ev.Path, filesystempb.EventType_EVENT_TYPE_CHMOD),
				one(ev.Path, filesystempb.EventType_EVENT_TYPE_WRITE)}
		}
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
	sandbox   string
	dir       string // the watched directory (absolute)
	recursive bool
	cancel    context.CancelFunc
	mu        sync.Mutex
	events    []*filesystempb.FilesystemEvent
	err       error // why polling stopped, if it did
	read      time.Time
	// seen is when an event of each type last named each path (its old
	// name too), keyed seenKey, for watchSettle; trimmed of what is older
	// than opsKeep.
	seen map[string]time.Time
	// changed is closed (and replaced) when events arrive or polling stops.
	changed chan struct{}
}

// note records the arrival of ev's events (w.mu held).
func (w *watcher) note(ev agentapi.WatchEvent, now time.Time) {
	if len(w.seen) > 4*maxOps {
		for p, at := range w.seen {
			if now.Sub(at) > opsKeep {
				delete(w.seen, p)
			}
		}
	}
	for _, p := range []string{ev.Path, ev.OldPath} {
		if p != "" && len(w.seen) < 16*maxOps {
			w.seen[seenKey(ev.Type, p)] = now
		}
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

func seenKey(typ, p string) string { return typ + "\x00" + p }

// covers says a change of p is an event of the watch.
func (w *watcher) covers(p string) bool {
	rel, ok := strings.CutPrefix(p, w.dir+"/")
	if w.dir == "/" {
		rel, ok = strings.CutPrefix(p, "/")
	}
	return ok && rel != "" && (w.recursive || !strings.Contains(rel, "/"))
}

// fileOp is one of the facade's own file operations: a path it changed,
// when it began, and the types of Runtime's watch event that is the last
// it makes of the path (any one of them).
type fileOp struct {
	path string
	at   time.Time
	last []string
}

// The last watch event each of the facade's operations makes of a path:
// an upload's write; a directory's chmod (the agent sets its owner after
// making it); a rename's, or a create or remove when the other name is
// outside the watch; a remove's.
var (
	lastOfWrite      = []string{"write"}
	lastOfMkdir      = []string{"chmod"}
	lastOfRenameFrom = []string{"rename", "remove"}
	lastOfRenameTo   = []string{"rename", "create"}
	lastOfRemove     = []string{"remove"}
)

// fileOps are the facade's recent file operations, per sandbox.
type fileOps struct {
	mu sync.Mutex
	m  map[string][]fileOp
}

// add notes that operations begun at changed paths of sandbox sb.
func (o *fileOps) add(sb string, ops ...fileOp) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string][]fileOp{}
	}
	now := time.Now()
	for id, old := range o.m { // forget what no watcher waits for any more
		for len(old) > 0 && now.Sub(old[0].at) > opsKeep {
			old = old[1:]
		}
		if len(old) == 0 {
			delete(o.m, id)
		} else {
			o.m[id] = old
		}
	}
	all := append(o.m[sb], ops...)
	if over := len(all) - maxOps; over > 0 {
		all = all[over:]
	}
	o.m[sb] = all
}

// since returns sandbox sb's operations begun after t.
func (o *fileOps) since(sb string, t time.Time) []fileOp {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []fileOp
	for _, op := range o.m[sb] {
		if op.at.After(t) {
			out = append(out, op)
		}
	}
	return out
}

// sawAfter says w read op's last event of its path after op began (w.mu
// held).
func (w *watcher) sawAfter(op fileOp) bool {
	for _, typ := range op.last {
		if at, ok := w.seen[seenKey(typ, op.path)]; ok && !at.Before(op.at) {
			return true
		}
	}
	return false
}

// settle waits, at most watchSettle, until w has read an event of each
// path the facade changed (ops) since after that it covers.
func (w *watcher) settle(ctx context.Context, ops []fileOp) {
	var want []fileOp
	for _, op := range ops {
		if w.covers(op.path) {
			want = append(want, op)
		}
	}
	if len(want) == 0 {
		return
	}
	timer := time.NewTimer(watchSettle)
	defer timer.Stop()
	for {
		w.mu.Lock()
		missing := w.err == nil
		if missing {
			missing = false
			for _, op := range want {
				if !w.sawAfter(op) {
					missing = true
					break
				}
			}
		}
		changed := w.changed
		w.mu.Unlock()
		if !missing {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
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
	w := &watcher{sandbox: t.id, dir: stream.dir, recursive: in.GetRecursive(), cancel: cancel, read: time.Now(),
		seen: map[string]time.Time{}, changed: make(chan struct{})}
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
				close(w.changed)
				w.changed = make(chan struct{})
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
		w.note(ev, time.Now())
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
	last := w.read
	w.mu.Unlock()
	w.settle(ctx, f.s.fileOps.since(t.id, last))
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
