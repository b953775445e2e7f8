package withruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
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
func (f *Files) Open(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := f.s.c.request(ctx, "GET", f.query("", path), nil, "", "application/octet-stream")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
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

// List lists a directory to the given depth (1 or less: its direct
// children; at most 10), sorted by path. Symlinked directories are listed
// but not descended into.
func (f *Files) List(ctx context.Context, path string, depth int) ([]FileInfo, error) {
	if depth < 1 {
		depth = 1
	}
	var out FileList
	if err := f.s.c.doJSONCapped(ctx, "GET", f.query("/list", path, "depth", strconv.Itoa(depth)), nil, &out, maxAgentAnswerBytes); err != nil {
		return nil, err
	}
	return out.Entries, nil
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
