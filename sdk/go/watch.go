package withruntime

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"sync"

	"withruntime.dev/runtime/sdk/go/wire"
)

// WatchEvent is one change a file watch reports (Files.Watch): its Type
// ("create", "write", "remove", "rename" with OldPath, "chmod",
// "overflow" with Dropped), the absolute Path and the Time the sandbox's
// kernel reported it.
type WatchEvent = wire.WatchEvent

// FileWatch is a live watch of a directory in a sandbox. Read its events
// with Events; Close ends it (the server then stops watching).
type FileWatch struct {
	ctx    context.Context
	cancel context.CancelFunc
	body   io.ReadCloser
	sc     *bufio.Scanner
	once   sync.Once
}

// Watch watches the directory path (absolute, or relative to /workspace;
// "" for /workspace) and, with recursive, every directory under it. It
// returns once the watch is in place: every change made after it returns
// is reported, however short-lived (a file created and removed at once is
// two events), from inotify inside the sandbox. Changes another sandbox
// makes to a shared volume are not seen. Close the watch when done; it
// also ends when ctx does. Errors: ErrNotFound (no such directory),
// ErrBadRequest (not a directory; a recursive tree of more than
// wire.WatchMaxDirs directories), those of the sandbox's state.
func (f *Files) Watch(ctx context.Context, path string, recursive bool) (*FileWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	extra := []string{}
	if recursive {
		extra = append(extra, "recursive", strconv.FormatBool(true))
	}
	q := f.query("/watch", path, extra...)
	if path == "" {
		q = f.s.path("/files/watch")
		if recursive {
			q += "?recursive=true"
		}
	}
	resp, err := f.s.c.request(ctx, http.MethodGet, q, nil, "", contentTypeNDJSON)
	if err != nil {
		cancel()
		return nil, err
	}
	w := &FileWatch{ctx: ctx, cancel: cancel, body: resp.Body, sc: bufio.NewScanner(resp.Body)}
	w.sc.Buffer(make([]byte, 64<<10), 1<<20)
	first, err := w.next()
	if err == nil && first.Type != "ready" {
		err = fmt.Errorf("withruntime: watch began with a %q event, not ready", first.Type)
	}
	if err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// next reads the next event that is not a heartbeat. An "error" event is
// returned with an *APIError; the end of the stream is an error too.
func (w *FileWatch) next() (WatchEvent, error) {
	for w.sc.Scan() {
		var ev WatchEvent
		if err := json.Unmarshal(w.sc.Bytes(), &ev); err != nil {
			return WatchEvent{}, fmt.Errorf("withruntime: bad event in watch stream: %w", err)
		}
		switch ev.Type {
		case eventHeartbeat:
			continue
		case "error":
			return ev, &APIError{Status: statusOfCode(ev.Code), Code: ev.Code, Message: ev.Message}
		}
		return ev, nil
	}
	err := w.sc.Err()
	switch {
	case w.ctx.Err() != nil:
		return WatchEvent{}, fmt.Errorf("withruntime: watch: %w", w.ctx.Err())
	case isTimeout(err):
	case err != nil:
		err = fmt.Errorf("withruntime: watch stream broke: %w", err)
	default:
		err = errors.New("withruntime: the watch stream ended (the sandbox may have been stopped or paused)")
	}
	return WatchEvent{}, err
}

// Events yields the watch's events in the order the sandbox's kernel
// reported them, until the watch ends: the last pair has a non-nil error
// (Close or ctx: its context error; the directory removed or moved: an
// *APIError with its event). An "overflow" event says events were lost
// (the client read too slowly; wire.WatchQueueEvents are held). Breaking
// out of the loop leaves the watch open.
func (w *FileWatch) Events() iter.Seq2[WatchEvent, error] {
	return func(yield func(WatchEvent, error) bool) {
		for {
			ev, err := w.next()
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// Close ends the watch. Safe to call more than once.
func (w *FileWatch) Close() error {
	w.once.Do(func() {
		w.cancel()
		w.body.Close()
	})
	return nil
}
