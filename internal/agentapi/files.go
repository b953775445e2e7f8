package agentapi

import (
	"encoding/base64"
	"fmt"
	"strings"

	"withruntime.dev/runtime/sdk/go/wire"
)

// WatchEvent is one line of GET /files/watch's stream (sdk/go/wire/watch.go).
type WatchEvent = wire.WatchEvent

// Limits of a file watch.
const (
	WatchQueueEvents = wire.WatchQueueEvents
	WatchMaxDirs     = wire.WatchMaxDirs
)

// FileInfo and FileList are the bodies of the file routes (package wire).
type (
	FileInfo = wire.FileInfo
	FileList = wire.FileList
)

// Limits of GET /files/list. A listing comes in pages: each holds at most
// limit entries (ListDefaultLimit when the request gives none, at most
// ListMaxLimit) and at most about ListMaxPageBytes of JSON, so a page may
// hold fewer entries than asked for; follow FileList.Next until Truncated
// is false.
const (
	ListMaxDepth     = wire.ListMaxDepth
	ListDefaultLimit = wire.ListDefaultLimit
	ListMaxLimit     = wire.ListMaxLimit
	// ListMaxPageBytes bounds the JSON of a page's entries (4 MiB): a page
	// ends early rather than pass it, whatever the paths' lengths.
	ListMaxPageBytes = 4 << 20
	// ListMaxCursorBytes bounds a cursor: the base64url form of the longest
	// path an entry can have, a directory path of 4095 bytes (PATH_MAX less
	// its NUL) and ListMaxDepth names of 255 bytes (NAME_MAX) below it.
	ListMaxCursorBytes = ((4095+ListMaxDepth*256)*8 + 5) / 6
)

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
