package agentapi

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"withruntime.dev/runtime/sdk/go/wire"
)

// WatchEvent is one line of GET /files/watch's stream (sdk/go/wire/watch.go).
type WatchEvent = wire.WatchEvent

// Limits of a file watch.
const (
	WatchQueueEvents = wire.WatchQueueEvents
	WatchMaxDirs     = wire.WatchMaxDirs
)

// FileInfo describes one file or directory.
type FileInfo struct {
	Name string `json:"name"`
	// Path is absolute inside the sandbox.
	Path string `json:"path"`
	// Type is "file", "dir", "symlink" or "other".
	Type string `json:"type"`
	// Size is in bytes.
	Size int64 `json:"size"`
	// Mode is the permission bits in octal, such as "0644".
	Mode    string    `json:"mode"`
	ModTime time.Time `json:"modTime"`
	Uid     int       `json:"uid"`
	Gid     int       `json:"gid"`
	// Target is where a symlink points.
	Target string `json:"target,omitempty"`
}

// Limits of GET /files/list. A listing comes in pages: each holds at most
// limit entries (ListDefaultLimit when the request gives none, at most
// ListMaxLimit) and at most about ListMaxPageBytes of JSON, so a page may
// hold fewer entries than asked for; follow FileList.Next until Truncated
// is false.
const (
	// ListMaxDepth is the deepest listing (levels below the directory).
	ListMaxDepth = 10
	// ListDefaultLimit is a page's entry count when limit is not given.
	ListDefaultLimit = 1000
	// ListMaxLimit is the largest limit a request may give.
	ListMaxLimit = 10000
	// ListMaxPageBytes bounds the JSON of a page's entries (4 MiB): a page
	// ends early rather than pass it, whatever the paths' lengths.
	ListMaxPageBytes = 4 << 20
	// ListMaxCursorBytes bounds a cursor: the base64url form of the longest
	// path an entry can have, a directory path of 4095 bytes (PATH_MAX less
	// its NUL) and ListMaxDepth names of 255 bytes (NAME_MAX) below it.
	ListMaxCursorBytes = ((4095+ListMaxDepth*256)*8 + 5) / 6
)

// FileList is the answer of GET /files/list: one page of a directory's
// listing. Entries are in listing order: by path compared one component at
// a time in byte order, so a directory is followed by its contents (at a
// depth above 1) and then by its next sibling; at depth 1 that is by name.
// Pages never lose or repeat an entry that exists from the first page to
// the last: each page starts strictly after the previous page's last entry.
type FileList struct {
	// Entries is this page's entries, in listing order.
	Entries []FileInfo `json:"entries"`
	// Truncated says more entries follow this page: ask for them with
	// cursor=Next.
	Truncated bool `json:"truncated"`
	// Next is the cursor of the next page (set only when Truncated): an
	// opaque string to pass back as the cursor query parameter.
	Next string `json:"next,omitempty"`
	// Total is the number of entries in the directory itself (its direct
	// children, whatever the page), as read for this page; set only for a
	// listing of depth 1 (counting a deeper one would walk the whole tree).
	Total *int `json:"total,omitempty"`
}

// ListCursor is the cursor of the page that follows the entry at path.
func ListCursor(path string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(path))
}

// ParseListCursor returns the path a cursor from ListCursor names, or an
// error that says what is wrong with it.
func ParseListCursor(cursor string) (string, error) {
	if len(cursor) > ListMaxCursorBytes {
		return "", fmt.Errorf("the cursor is %d bytes, over the %d a listing ever gives", len(cursor), ListMaxCursorBytes)
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return "", fmt.Errorf("the cursor is not one a listing gave (it is not base64url)")
	}
	p := string(b)
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || strings.Contains(p, "//") ||
		strings.HasSuffix(p, "/") {
		return "", fmt.Errorf("the cursor is not one a listing gave (it names no absolute path)")
	}
	for _, c := range strings.Split(p[1:], "/") {
		if c == "." || c == ".." {
			return "", fmt.Errorf("the cursor is not one a listing gave (its path is not clean)")
		}
	}
	return p, nil
}

// ComparePaths orders two clean absolute paths as a listing does: one
// component at a time, each in byte order, a path before the paths under
// it. It returns -1, 0 or +1.
func ComparePaths(a, b string) int {
	for {
		ca, ra, _ := strings.Cut(strings.TrimPrefix(a, "/"), "/")
		cb, rb, _ := strings.Cut(strings.TrimPrefix(b, "/"), "/")
		if c := strings.Compare(ca, cb); c != 0 {
			return c
		}
		switch {
		case ra == "" && rb == "":
			return 0
		case ra == "":
			return -1
		case rb == "":
			return 1
		}
		a, b = ra, rb
	}
}
