package withruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Files is the file API of one sandbox; get it with Sandbox.Files. Paths
// are absolute inside the sandbox, or relative to /workspace. Errors:
// ErrNotFound (no such file or parent), ErrBadRequest (a directory where a
// file is wanted, or the reverse; a path with NUL), ErrConflict (the
// destination exists), ErrTooLarge (over the server's upload cap),
// ErrNoSpace, and ErrLeaseEnded / ErrSandboxStopped.
type Files struct {
	s *Sandbox
}

// Files returns the sandbox's file API.
func (s *Sandbox) Files() *Files { return &Files{s: s} }

func (f *Files) query(route, path string, extra ...string) string {
	q := url.Values{"path": {path}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return f.s.path("/files"+route) + "?" + q.Encode()
}

// Open streams a regular file's content. The caller must close the reader.
// OpenRange streams part of it.
func (f *Files) Open(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := f.s.c.request(ctx, "GET", f.query("", path), nil, "", "application/octet-stream")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// OpenRange streams length bytes of a regular file from offset (length
// < 0: to the end), with a Range request, so an interrupted download can
// resume where it stopped:
//
//	st, _ := local.Stat()
//	rc, err := sbx.Files().OpenRange(ctx, "big.bin", st.Size(), -1)
//	// ... io.Copy(local, rc) appends the rest
//
// An offset at the file's end gives an empty stream; one past it is
// ErrRangeNotSatisfiable. A file the server sends whole (one that reports
// size 0, such as those in /proc) has its first offset bytes skipped here,
// so the bytes are the same either way. The caller must close the reader.
func (f *Files) OpenRange(ctx context.Context, path string, offset, length int64) (io.ReadCloser, error) {
	if offset < 0 {
		return nil, fmt.Errorf("withruntime: OpenRange %s: offset %d is negative; give a byte offset from 0", path, offset)
	}
	if length == 0 {
		return io.NopCloser(strings.NewReader("")), nil
	}
	rng := fmt.Sprintf("bytes=%d-", offset)
	if length > 0 {
		if offset > math.MaxInt64-length {
			return nil, fmt.Errorf("withruntime: OpenRange %s: offset %d and length %d pass the largest file size", path, offset, length)
		}
		rng += strconv.FormatInt(offset+length-1, 10)
	}
	resp, err := f.s.c.send(ctx, "GET", f.query("", path), nil, "", "application/octet-stream", http.Header{"Range": {rng}})
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusPartialContent:
		if first, ok := contentRangeStart(resp.Header.Get("Content-Range")); !ok || first != offset {
			resp.Body.Close()
			return nil, fmt.Errorf("withruntime: OpenRange %s: the answer holds %q, not bytes from %d", path, resp.Header.Get("Content-Range"), offset)
		}
		return resp.Body, nil
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		if size, ok := strings.CutPrefix(resp.Header.Get("Content-Range"), "bytes */"); ok && size == strconv.FormatInt(offset, 10) {
			resp.Body.Close()
			return io.NopCloser(strings.NewReader("")), nil // at the end: nothing left
		}
	case resp.StatusCode < 400:
		// The whole file: skip to offset here.
		if _, err := io.CopyN(io.Discard, resp.Body, offset); err != nil && err != io.EOF {
			resp.Body.Close()
			return nil, fmt.Errorf("withruntime: reading %s: %w", path, err)
		}
		if length < 0 {
			return resp.Body, nil
		}
		return struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, length), resp.Body}, nil
	}
	defer resp.Body.Close()
	return nil, decodeError(resp)
}

// contentRangeStart reads the first byte of "bytes FIRST-LAST/SIZE".
func contentRangeStart(v string) (int64, bool) {
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, false
	}
	first, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(first, 10, 64)
	return n, err == nil && n >= 0
}

// Read copies a regular file's content to w and returns the number of
// bytes copied.
func (f *Files) Read(ctx context.Context, path string, w io.Writer) (int64, error) {
	rc, err := f.Open(ctx, path)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	n, err := io.Copy(w, rc)
	if err != nil {
		return n, fmt.Errorf("withruntime: reading %s: %w", path, err)
	}
	return n, nil
}

// ReadFile returns a regular file's whole content.
func (f *Files) ReadFile(ctx context.Context, path string) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := f.Read(ctx, path, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write streams r into the file at path, creating missing parent
// directories, and returns the file's new description. The file is written
// to a temporary name and renamed into place, so a failed upload leaves
// nothing behind. A new file is mode 0644 and owned by the sandbox user; a
// replaced one keeps its mode and owner.
func (f *Files) Write(ctx context.Context, path string, r io.Reader) (FileInfo, error) {
	resp, err := f.s.c.request(ctx, "PUT", f.query("", path), r, "application/octet-stream", "application/json")
	if err != nil {
		return FileInfo{}, err
	}
	defer resp.Body.Close()
	return decodeInfo(resp.Body)
}

// WriteFile writes data to the file at path (see Write).
func (f *Files) WriteFile(ctx context.Context, path string, data []byte) (FileInfo, error) {
	return f.Write(ctx, path, bytes.NewReader(data))
}

// maxListPageBytes bounds one page's answer: the server cuts a page at
// about 4 MiB of entries.
var maxListPageBytes int64 = 16 << 20

// ListOptions selects one page of a listing (ListPage).
type ListOptions struct {
	// Depth is how many levels to list: 1 (or less) lists the direct
	// children; at most 10.
	Depth int
	// Limit is the most entries the page may hold: 0 means
	// DefaultListLimit; at most MaxListLimit. A page may hold fewer (the
	// server also cuts it at about 4 MiB of JSON).
	Limit int
	// Cursor is the Next of the page before; "" asks for the first page.
	Cursor string
}

// ListPage returns one page of a directory's listing, in listing order
// (see FileList). While the page is Truncated, ask for the next one with
// the same path and depth and Cursor set to its Next: each page starts
// strictly after the last entry of the page before, so an entry that
// exists from the first page to the last is listed exactly once. Errors:
// ErrBadRequest for a cursor that is not one a listing gave, a depth or
// limit out of range, or a path that is not a directory.
func (f *Files) ListPage(ctx context.Context, path string, opts ListOptions) (FileList, error) {
	depth := max(opts.Depth, 1)
	extra := []string{"depth", strconv.Itoa(depth)}
	if opts.Limit != 0 {
		extra = append(extra, "limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		extra = append(extra, "cursor", opts.Cursor)
	}
	var out FileList
	if err := f.s.c.doJSONCapped(ctx, "GET", f.query("/list", path, extra...), nil, &out, maxListPageBytes); err != nil {
		return FileList{}, err
	}
	if out.Truncated && (len(out.Entries) == 0 || out.Next == "" || out.Next == opts.Cursor) {
		return FileList{}, fmt.Errorf("withruntime: listing %s: a page that does not move the listing forward (was the sandbox's agent replaced from inside?)", path)
	}
	return out, nil
}

// Entries iterates over every entry of a directory's listing to the given
// depth (as List), fetching pages of MaxListLimit entries as it goes, so
// a directory of any size is walked in bounded memory. An error ends the
// iteration after being yielded with a zero FileInfo.
//
//	for fi, err := range sbx.Files().Entries(ctx, "/data", 1) {
//		if err != nil { return err }
//		fmt.Println(fi.Path)
//	}
func (f *Files) Entries(ctx context.Context, path string, depth int) iter.Seq2[FileInfo, error] {
	return func(yield func(FileInfo, error) bool) {
		opts := ListOptions{Depth: depth, Limit: MaxListLimit}
		for {
			page, err := f.ListPage(ctx, path, opts)
			if err != nil {
				yield(FileInfo{}, err)
				return
			}
			for _, fi := range page.Entries {
				if !yield(fi, nil) {
					return
				}
			}
			if !page.Truncated {
				return
			}
			opts.Cursor = page.Next
		}
	}
}

// List lists a directory to the given depth (1 or less: its direct
// children; at most 10), every entry, in listing order: by path compared
// one component at a time (a directory, then its contents, then its next
// sibling; at depth 1, by name). Symlinked directories are listed but not
// descended into. It follows the server's pages (ListPage) to the last,
// holding at most 256 MiB of answers; walk a larger listing with Entries.
func (f *Files) List(ctx context.Context, path string, depth int) ([]FileInfo, error) {
	entries := []FileInfo{}
	opts := ListOptions{Depth: depth, Limit: MaxListLimit}
	var read int64
	for {
		page, err := f.ListPage(ctx, path, opts)
		if err != nil {
			return nil, err
		}
		entries = append(entries, page.Entries...)
		if !page.Truncated {
			return entries, nil
		}
		for _, fi := range page.Entries {
			read += int64(len(fi.Path)+len(fi.Name)+len(fi.Target)) + 128 // about its JSON
		}
		if read > maxAgentAnswerBytes {
			return nil, fmt.Errorf("withruntime: listing %s: over %d entries, more than List holds; walk it with Files.Entries", path, len(entries))
		}
		opts.Cursor = page.Next
	}
}

// Stat describes one path (a symlink itself, not its target).
func (f *Files) Stat(ctx context.Context, path string) (FileInfo, error) {
	var fi FileInfo
	return fi, f.s.c.doJSONCapped(ctx, "GET", f.query("/stat", path), nil, &fi, maxInfoBytes)
}

// Remove removes a file, a symlink or an empty directory.
func (f *Files) Remove(ctx context.Context, path string) error {
	return f.s.c.doJSON(ctx, "DELETE", f.query("", path), nil, nil)
}

// RemoveAll removes path and, if it is a directory, everything in it. The
// server refuses / and /workspace themselves.
func (f *Files) RemoveAll(ctx context.Context, path string) error {
	return f.s.c.doJSON(ctx, "DELETE", f.query("", path, "recursive", "true"), nil, nil)
}

// Mkdir creates one directory, owned by the sandbox user; its parent must
// exist.
func (f *Files) Mkdir(ctx context.Context, path string) (FileInfo, error) {
	var fi FileInfo
	return fi, f.s.c.doJSONCapped(ctx, "POST", f.s.path("/files/mkdir"), MkdirRequest{Path: path}, &fi, maxInfoBytes)
}

// MkdirAll creates a directory and any missing parents, like mkdir -p; an
// existing directory is not an error.
func (f *Files) MkdirAll(ctx context.Context, path string) (FileInfo, error) {
	var fi FileInfo
	return fi, f.s.c.doJSONCapped(ctx, "POST", f.s.path("/files/mkdir"), MkdirRequest{Path: path, Parents: true}, &fi, maxInfoBytes)
}

// Rename moves from to to, replacing to if it is a file and creating its
// missing parents, and returns to's description.
func (f *Files) Rename(ctx context.Context, from, to string) (FileInfo, error) {
	var fi FileInfo
	return fi, f.s.c.doJSONCapped(ctx, "POST", f.s.path("/files/rename"), RenameRequest{From: from, To: to}, &fi, maxInfoBytes)
}

func decodeInfo(r io.Reader) (FileInfo, error) {
	var fi FileInfo
	if err := json.NewDecoder(newCapReader(r, maxInfoBytes)).Decode(&fi); err != nil {
		return FileInfo{}, fmt.Errorf("withruntime: decoding file info: %w", err)
	}
	return fi, nil
}
