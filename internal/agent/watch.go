package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/agentapi"
)

// File watches (GET /files/watch): inotify inside the sandbox, so every
// change the sandbox's kernel makes is an event, however short-lived the
// file (a file created and removed between two listings is two events), and
// a rename is one event with both names. One inotify instance per watch, a
// watch descriptor per directory (every directory of the tree when
// recursive, up to agentapi.WatchMaxDirs). Events go through a bounded queue
// (agentapi.WatchQueueEvents): a client that reads slower than the sandbox
// changes files loses events, and an "overflow" event says how many. The
// stream ends when the client goes (the inotify instance is closed), when
// the watched directory is removed or moved, or on an error. The file
// API's own temporary files are not reported (tempfiles.go): an upload is
// the target's create and write.

// watchMask is what each watched directory reports.
const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// movePairWait is how long an IN_MOVED_FROM waits for its IN_MOVED_TO
// (the kernel queues the two together; a read may split them) before it is
// a remove (the file left the watched tree).
const movePairWait = 5 * time.Millisecond

func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) error {
	dir, err := s.queryPath(r, s.cfg.Workspace)
	if err != nil {
		return err
	}
	recursive := false
	if v := r.URL.Query().Get("recursive"); v != "" {
		if recursive, err = strconv.ParseBool(v); err != nil {
			return badRequest("recursive=%q is not a boolean; use true or false", v)
		}
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fsErr(err, dir)
	}
	if !st.IsDir() {
		return badRequest("%s is not a directory; watch the directory that holds it", dir)
	}
	wt, err := newWatcher(dir, recursive, &s.temps)
	if err != nil {
		return err
	}
	defer wt.close()
	go wt.read()
	out := startNDJSON(w)
	defer out.close()
	if out.emit(agentapi.WatchEvent{Type: "ready", Path: dir, IsDir: true, Time: time.Now().UTC()}) != nil {
		return nil
	}
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-wt.q.ready:
		}
		evs, final := wt.q.take()
		for _, ev := range evs {
			if out.emit(ev) != nil {
				return nil
			}
		}
		if final {
			return nil
		}
	}
}

// watcher is one inotify instance and the directories it watches.
type watcher struct {
	fd        int
	f         *os.File // fd, through the runtime's poller (read deadlines, close)
	root      string
	recursive bool
	q         *watchQueue
	// temps are the file API's temporary files, not reported (tempfiles.go).
	temps *tempFiles

	// dirs maps a watch descriptor to its directory's path; only read()
	// changes it after newWatcher.
	dirs map[int32]string
	// pending is an IN_MOVED_FROM waiting for its IN_MOVED_TO.
	pending  *unix.InotifyEvent
	pendPath string
	pendDir  bool
}

func newWatcher(root string, recursive bool, temps *tempFiles) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	wt := &watcher{fd: fd, f: os.NewFile(uintptr(fd), "inotify"), root: root, recursive: recursive,
		q: newWatchQueue(), dirs: map[int32]string{}, temps: temps}
	if err := wt.addTree(root, false); err != nil {
		wt.close()
		return nil, err
	}
	return wt, nil
}

func (wt *watcher) close() { _ = wt.f.Close() }

// addTree watches dir, and with recursive every directory under it (not
// through symbolic links). With announce, what it holds is reported as
// created: it may have been made before its watch was in place.
func (wt *watcher) addTree(dir string, announce bool) error {
	if err := wt.add(dir); err != nil {
		return err
	}
	if !wt.recursive && !announce {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil // gone meanwhile, or unreadable: its parent's events still come
		}
		if announce {
			wt.q.push(agentapi.WatchEvent{Type: "create", Path: p, IsDir: d.IsDir(), Time: time.Now().UTC()})
		}
		if !d.IsDir() {
			return nil
		}
		if !wt.recursive {
			return fs.SkipDir
		}
		if err := wt.add(p); err != nil {
			return err
		}
		return nil
	})
}

// add watches one directory.
func (wt *watcher) add(dir string) error {
	if len(wt.dirs) >= agentapi.WatchMaxDirs {
		return &apiError{status: http.StatusBadRequest, code: agentapi.CodeBadRequest,
			msg: fmt.Sprintf("the watch would follow more than %d directories; watch a smaller tree, or without recursive", agentapi.WatchMaxDirs)}
	}
	mask := uint32(watchMask | unix.IN_ONLYDIR)
	if dir != wt.root {
		mask |= unix.IN_DONT_FOLLOW
	}
	wd, err := unix.InotifyAddWatch(wt.fd, dir, mask)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		if dir == wt.root {
			return fsErr(err, dir)
		}
		return nil // gone meanwhile
	}
	if errors.Is(err, unix.ENOSPC) {
		return &apiError{status: http.StatusConflict, code: agentapi.CodeConflict,
			msg: "the sandbox's kernel has no inotify watches left; end other watches, or watch a smaller tree"}
	}
	if err != nil {
		return fsErr(err, dir)
	}
	wt.dirs[int32(wd)] = dir
	return nil
}

// read turns the inotify instance's events into watch events until it is
// closed or the watch ends.
func (wt *watcher) read() {
	buf := make([]byte, 64<<10)
	for {
		n, err := wt.f.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			wt.flushMove()
			_ = wt.f.SetReadDeadline(time.Time{})
			continue
		}
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				wt.q.finish(agentapi.WatchEvent{Type: "error", Code: agentapi.CodeInternal, Message: "reading the sandbox's inotify events: " + err.Error()})
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := *(*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if end := off + unix.SizeofInotifyEvent + int(ev.Len); ev.Len > 0 && end <= n {
				name = strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:end]), "\x00")
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if done := wt.handle(&ev, name); done {
				return
			}
		}
		if wt.pending != nil {
			_ = wt.f.SetReadDeadline(time.Now().Add(movePairWait))
		}
	}
}

// handle turns one inotify event into watch events; done says the watch
// ended (its directory went).
func (wt *watcher) handle(ev *unix.InotifyEvent, name string) (done bool) {
	now := time.Now().UTC()
	if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
		wt.flushMove()
		wt.q.push(agentapi.WatchEvent{Type: "overflow", Time: now})
		return false
	}
	dir, ok := wt.dirs[ev.Wd]
	if !ok {
		return false // a directory no longer watched
	}
	path := dir
	if name != "" {
		path = filepath.Join(dir, name)
	}
	isDir := ev.Mask&unix.IN_ISDIR != 0
	if ev.Mask&unix.IN_MOVED_TO != 0 && wt.pending != nil && wt.pending.Cookie == ev.Cookie {
		old := wt.pendPath
		wt.pending = nil
		if tf, ok := wt.temps.lookup(old); ok {
			// The file API's write landing: what a plain write shows.
			if !tf.existed {
				wt.q.push(agentapi.WatchEvent{Type: "create", Path: path, Upload: true, Time: now})
			}
			wt.q.push(agentapi.WatchEvent{Type: "write", Path: path, Upload: true, Time: now})
			return false
		}
		wt.q.push(agentapi.WatchEvent{Type: "rename", OldPath: old, Path: path, IsDir: isDir, Time: now})
		if isDir {
			wt.renameDirs(old, path)
		}
		return false
	}
	wt.flushMove()
	if _, ok := wt.temps.lookup(path); ok && ev.Mask&unix.IN_MOVED_FROM == 0 {
		return false // the file API's temporary file (tempfiles.go)
	}
	switch {
	case ev.Mask&unix.IN_IGNORED != 0:
		delete(wt.dirs, ev.Wd)
	case ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
		if dir != wt.root {
			return false // its parent reports it
		}
		what := "removed"
		if ev.Mask&unix.IN_MOVE_SELF != 0 {
			what = "moved"
		}
		wt.q.finish(agentapi.WatchEvent{Type: "error", Code: agentapi.CodeNotFound, Time: now,
			Message: fmt.Sprintf("the watched directory %s was %s; the watch ends", wt.root, what)})
		return true
	case ev.Mask&unix.IN_MOVED_FROM != 0:
		e := *ev
		wt.pending, wt.pendPath, wt.pendDir = &e, path, isDir
	case ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		wt.q.push(agentapi.WatchEvent{Type: "create", Path: path, IsDir: isDir, Time: now})
		if isDir && wt.recursive {
			if err := wt.addTree(path, true); err != nil {
				wt.q.finish(agentapi.WatchEvent{Type: "error", Code: agentapi.CodeBadRequest, Message: err.Error(), Time: now})
				return true
			}
		}
	case ev.Mask&unix.IN_DELETE != 0:
		wt.q.push(agentapi.WatchEvent{Type: "remove", Path: path, IsDir: isDir, Time: now})
	case ev.Mask&unix.IN_MODIFY != 0:
		wt.q.push(agentapi.WatchEvent{Type: "write", Path: path, Time: now})
	case ev.Mask&unix.IN_ATTRIB != 0:
		wt.q.push(agentapi.WatchEvent{Type: "chmod", Path: path, IsDir: isDir, Time: now})
	}
	return false
}

// flushMove reports an IN_MOVED_FROM whose IN_MOVED_TO never came as a
// remove: the file left the watched tree.
func (wt *watcher) flushMove() {
	if wt.pending == nil {
		return
	}
	path, isDir := wt.pendPath, wt.pendDir
	wt.pending = nil
	if _, ok := wt.temps.lookup(path); ok {
		return
	}
	wt.q.push(agentapi.WatchEvent{Type: "remove", Path: path, IsDir: isDir, Time: time.Now().UTC()})
	if isDir {
		for wd, d := range wt.dirs {
			if d == path || strings.HasPrefix(d, path+"/") {
				_, _ = unix.InotifyRmWatch(wt.fd, uint32(wd))
				delete(wt.dirs, wd)
			}
		}
	}
}

// renameDirs moves the watched directories under old to under new.
func (wt *watcher) renameDirs(old, new string) {
	for wd, d := range wt.dirs {
		if d == old {
			wt.dirs[wd] = new
		} else if rest, ok := strings.CutPrefix(d, old+"/"); ok {
			wt.dirs[wd] = new + "/" + rest
		}
	}
}

// watchQueue holds the events not yet written, at most
// agentapi.WatchQueueEvents.
type watchQueue struct {
	// ready has a token while events (or the end) wait.
	ready chan struct{}

	mu      sync.Mutex
	evs     []agentapi.WatchEvent
	dropped int64
	final   *agentapi.WatchEvent
	ended   bool
}

func newWatchQueue() *watchQueue { return &watchQueue{ready: make(chan struct{}, 1)} }

// push queues ev; a write or chmod of the path the last queued event
// already says (upload alike) is dropped (it says as much). Past the bound, ev is counted
// as lost.
func (q *watchQueue) push(ev agentapi.WatchEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended {
		return
	}
	if n := len(q.evs); n > 0 && (ev.Type == "write" || ev.Type == "chmod") && q.evs[n-1].Type == ev.Type && q.evs[n-1].Path == ev.Path &&
		q.evs[n-1].Upload == ev.Upload {
		return
	}
	if len(q.evs) >= agentapi.WatchQueueEvents {
		q.dropped++ // reported after what is queued (take)
		return
	}
	q.evs = append(q.evs, ev)
	q.signal()
}

// finish queues the watch's last event.
func (q *watchQueue) finish(ev agentapi.WatchEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended {
		return
	}
	q.ended, q.final = true, &ev
	q.signal()
}

func (q *watchQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns the queued events (an overflow first when some were lost
// since) and whether the watch ended with them.
func (q *watchQueue) take() ([]agentapi.WatchEvent, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.evs
	q.evs = nil
	if q.dropped > 0 {
		evs = append(evs, agentapi.WatchEvent{Type: "overflow", Dropped: q.dropped, Time: time.Now().UTC()})
		q.dropped = 0
	}
	if q.final != nil {
		evs = append(evs, *q.final)
		q.final = nil
	}
	return evs, q.ended
}
