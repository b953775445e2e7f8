package wire

import "time"

// Limits of GET .../files/list. A listing comes in pages: each holds at
// most limit entries (ListDefaultLimit when the request gives none, at most
// ListMaxLimit) and at most about 4 MiB of JSON, so a page may hold fewer
// entries than asked for; follow FileList.Next until Truncated is false.
const (
	// ListMaxDepth is the deepest listing (levels below the directory).
	ListMaxDepth = 10
	// ListDefaultLimit is a page's entry count when limit is not given.
	ListDefaultLimit = 1000
	// ListMaxLimit is the largest limit a request may give.
	ListMaxLimit = 10000
)

// FileInfo describes one file or directory in a sandbox.
type FileInfo struct {
	// Name is the last element of Path.
	Name string `json:"name"`
	// Path is absolute inside the sandbox.
	Path string `json:"path"`
	// Type is "file", "dir", "symlink" or "other".
	Type string `json:"type"`
	// Size is in bytes.
	Size int64 `json:"size"`
	// Mode is the permission bits in octal, such as "0644".
	Mode string `json:"mode"`
	// ModTime is the last modification (UTC).
	ModTime time.Time `json:"modTime"`
	// Uid and Gid are the owner's numeric ids.
	Uid int `json:"uid"`
	Gid int `json:"gid"`
	// Target is where a symlink points.
	Target string `json:"target,omitempty"`
	// Metadata is the file's metadata: short text pairs a write gave it
	// (PUT .../files?metadata=), kept as its extended attributes (keys
	// lower-case HTTP token characters, values printable US-ASCII, 4 KiB
	// in all). Anything inside the sandbox can change them: data, not a
	// proof of who wrote the file. Absent when there are none.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// FileList is the body of GET .../files/list: one page of a directory's
// listing. Pages never lose or repeat an entry that exists from the first
// page to the last: each page starts strictly after the previous page's
// last entry.
type FileList struct {
	// Entries is the page's entries, in listing order: by path compared
	// one component at a time in byte order (a directory, then its
	// contents, then its next sibling; at depth 1, by name).
	Entries []FileInfo `json:"entries"`
	// Truncated says more entries follow: ask for them with cursor=Next.
	Truncated bool `json:"truncated"`
	// Next is the cursor of the next page, an opaque string to pass back
	// as the cursor query parameter; set only when Truncated.
	Next string `json:"next,omitempty"`
	// Total is the number of entries in the directory itself (its direct
	// children, whatever the page), as read for this page; set only for a
	// listing of depth 1 (counting a deeper one would walk the whole tree).
	Total *int `json:"total,omitempty"`
}

// MkdirRequest is the body of POST .../files/mkdir.
type MkdirRequest struct {
	// Path is the directory to create.
	Path string `json:"path"`
	// Parents creates missing parents too (as mkdir -p).
	Parents bool `json:"parents,omitempty"`
}

// RenameRequest is the body of POST .../files/rename: it moves From to To,
// replacing To if it is a file.
type RenameRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Signed file URLs (POST .../files/url): a URL that reads or writes one
// file of one sandbox without an API key, until it expires.
const (
	// DefaultFileURLSeconds is a signed file URL's life when the request
	// names none (seconds).
	DefaultFileURLSeconds = 3600
	// MaxFileURLSeconds is the longest life a signed file URL may have
	// (seconds: 7 days).
	MaxFileURLSeconds = 7 * 24 * 3600
)

// FileURLRequest is the body of POST /v1/sandboxes/{id}/files/url.
type FileURLRequest struct {
	// Path is the file, as the file routes take it (relative paths
	// resolve under /workspace when the URL is used).
	Path string `json:"path"`
	// Operation is "read" (the URL answers GET with the file's bytes, as
	// GET .../files, Range included) or "write" (it takes PUT with the
	// bytes, as PUT .../files).
	Operation string `json:"operation"`
	// ExpiresInSeconds is the URL's life, 1 to MaxFileURLSeconds; 0:
	// DefaultFileURLSeconds.
	ExpiresInSeconds int64 `json:"expiresInSeconds,omitempty"`
}

// FileURL is a signed file URL: anyone who has it may do its one
// operation on its one path of its one sandbox, as the key that made it,
// until ExpiresAt, while the sandbox runs (or is paused: a request resumes
// it when it has autoResume) and the key is not revoked.
type FileURL struct {
	// URL is the whole URL, on the server's public URL
	// (serve --public-url, else the request's host): /v1/files/signed
	// with the sandbox, path, operation, expiry, key and signature in its
	// query. Changing any of them voids the signature.
	URL string `json:"url"`
	// Method is the HTTP method the URL takes: "GET" (read) or "PUT"
	// (write).
	Method string `json:"method"`
	// Path is the request's.
	Path string `json:"path"`
	// Operation is the request's: "read" or "write".
	Operation string `json:"operation"`
	// ExpiresAt is when the URL stops working (UTC, whole seconds).
	ExpiresAt time.Time `json:"expiresAt"`
}
