package agent

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// handleGetFile streams a regular file's bytes (GET /files), or one range
// of them. Every download says Accept-Ranges: bytes and carries the file's
// ETag and Last-Modified. A Range header of one byte range (RFC 9110
// 14.1.2: "bytes=FIRST-LAST", "bytes=FIRST-" or "bytes=-SUFFIX") is
// answered 206 with Content-Range; one that starts at or past the end (or
// asks for a suffix of 0 bytes) 416 with Content-Range: bytes */SIZE. A
// Range that does not parse, names another unit or several ranges is
// ignored (200, the whole file), as RFC 9110 allows; so is one whose
// If-Range names another version of the file. Files that report size 0
// (empty ones, and those in /proc that have content anyway) are always
// sent whole, chunked.
func (s *Server) handleGetFile(w http.ResponseWriter, r *http.Request) error {
	path, err := s.queryPath(r, "")
	if err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return fsErr(err, path)
	}
	if st.IsDir() {
		return badRequest("%s is a directory; list it with GET /files/list?path=%s", path, path)
	}
	if !st.Mode().IsRegular() {
		return badRequest("%s is not a regular file (mode %s); only regular files can be downloaded", path, st.Mode().Type())
	}
	// O_NONBLOCK: should a FIFO have replaced the file since the Stat, the
	// open returns at once instead of waiting for a writer; the opened file
	// is checked again.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return fsErr(err, path)
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return fsErr(err, path)
	}
	if !st.Mode().IsRegular() {
		return badRequest("%s is not a regular file (mode %s); only regular files can be downloaded", path, st.Mode().Type())
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Accept-Ranges", "bytes")
	modified := st.ModTime().UTC().Truncate(time.Second)
	h.Set("Last-Modified", modified.Format(http.TimeFormat))
	etag := fileETag(st)
	h.Set("ETag", etag)
	size := st.Size()
	if size <= 0 {
		// Files such as those in /proc report size 0 yet have content.
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, f)
		return nil
	}
	// The file is sent as the size seen at open time.
	status, first, n := http.StatusOK, int64(0), size
	if rng := r.Header.Get("Range"); rng != "" && ifRangeMatches(r.Header.Get("If-Range"), etag, modified) {
		switch from, to, res := parseRange(rng, size); res {
		case rangeUnsatisfiable:
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			return &apiError{status: http.StatusRequestedRangeNotSatisfiable, code: agentapi.CodeRangeNotSatisfiable,
				msg: fmt.Sprintf("Range %q starts at or past the end of %s, which is %d bytes; ask for bytes from 0 to %d", abbrev(rng, 100), path, size, size-1)}
		case rangeOK:
			status, first, n = http.StatusPartialContent, from, to-from+1
			h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, size))
		}
	}
	if first > 0 {
		if _, err := f.Seek(first, io.SeekStart); err != nil {
			return fsErr(err, path)
		}
	}
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(status)
	_, _ = io.Copy(w, io.LimitReader(f, n))
	return nil
}

// fileETag is a strong validator of a file's version: its inode, size and
// modification time.
func fileETag(st fs.FileInfo) string {
	ino := uint64(0)
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		ino = sys.Ino
	}
	return fmt.Sprintf(`"%x-%x-%x"`, ino, st.Size(), st.ModTime().UnixNano())
}

// ifRangeMatches says a Range applies under an If-Range header (RFC 9110
// 13.1.5): when there is none, when it is the file's ETag (a strong match),
// or when it is the file's Last-Modified date exactly.
func ifRangeMatches(ifRange, etag string, modified time.Time) bool {
	ifRange = strings.TrimSpace(ifRange)
	switch {
	case ifRange == "":
		return true
	case strings.HasPrefix(ifRange, `"`) || strings.HasPrefix(ifRange, "W/"):
		return ifRange == etag
	}
	t, err := http.ParseTime(ifRange)
	return err == nil && t.Equal(modified)
}

// rangeResult is what parseRange made of a Range header.
type rangeResult int

const (
	rangeIgnored       rangeResult = iota // malformed, another unit, or several ranges: send the whole file
	rangeOK                               // one satisfiable range
	rangeUnsatisfiable                    // one range that starts at or past the end
)

// parseRange reads a Range header of one byte range against a file of
// size bytes (size > 0) and returns the first and last byte it names,
// the last clamped to the end.
func parseRange(h string, size int64) (first, last int64, res rangeResult) {
	unit, spec, ok := strings.Cut(h, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(unit), "bytes") {
		return 0, 0, rangeIgnored
	}
	spec = strings.TrimSpace(spec)
	if strings.Contains(spec, ",") {
		return 0, 0, rangeIgnored
	}
	a, b, ok := strings.Cut(spec, "-")
	if !ok {
		return 0, 0, rangeIgnored
	}
	if a == "" { // a suffix: the last b bytes
		n, ok := parseDigits(b)
		switch {
		case !ok:
			return 0, 0, rangeIgnored
		case n == 0:
			return 0, 0, rangeUnsatisfiable
		case n > size:
			n = size
		}
		return size - n, size - 1, rangeOK
	}
	first, ok = parseDigits(a)
	if !ok {
		return 0, 0, rangeIgnored
	}
	last = size - 1
	if b != "" {
		l, ok := parseDigits(b)
		if !ok || l < first {
			return 0, 0, rangeIgnored
		}
		last = min(l, size-1)
	}
	if first >= size {
		return 0, 0, rangeUnsatisfiable
	}
	return first, last, rangeOK
}

// parseDigits reads a non-empty run of decimal digits; one too large for
// an int64 reads as the largest int64 (past any file's end).
func parseDigits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 1<<63 - 1, true
	}
	return n, true
}
