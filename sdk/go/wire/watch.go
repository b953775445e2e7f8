package wire

import "time"

// Limits of a file watch (GET /v1/sandboxes/{id}/files/watch).
const (
	// WatchQueueEvents is how many events a watch holds for a client that
	// reads slower than the sandbox changes files; past it events are
	// dropped and an "overflow" event says how many.
	WatchQueueEvents = 4096
	// WatchMaxDirs is how many directories one recursive watch follows;
	// past it the watch ends with an "error" event.
	WatchMaxDirs = 8192
)

// WatchEvent is one line of a file watch's NDJSON stream. The stream
// starts with "ready" once the watch is in place (a change made after it
// is reported), then carries one event per change, in the order the
// sandbox's kernel saw them, until the client goes.
type WatchEvent struct {
	// Type is "ready" (the watch is in place; Path is the watched
	// directory), "create" (a file, directory or link appeared), "write"
	// (a file's contents changed; consecutive writes of one file that
	// were not yet sent are one event), "remove", "rename" (one event with
	// OldPath and Path, both inside the watch), "chmod" (mode, owner or
	// times changed), "overflow" (events were lost: Dropped says how
	// many, 0 when the sandbox's kernel lost an unknown number), "error"
	// (the watch failed and the stream ends: Code and Message say why) or
	// "heartbeat" (nothing for 2 seconds; no other field).
	Type string `json:"type"`
	// Path is the absolute path inside the sandbox that changed (for
	// "rename", its new name).
	Path string `json:"path,omitempty"`
	// OldPath is a renamed file's name before the rename ("rename" only).
	OldPath string `json:"oldPath,omitempty"`
	// IsDir says the path is a directory.
	IsDir bool `json:"isDir,omitempty"`
	// Upload says a "create" or "write" is the file API's own write
	// landing (PUT .../files, or a move across file systems): the file
	// was written beside its target and renamed over it, which is
	// reported as a plain write would be (a "create" when the target did
	// not exist, then a "write"), with Upload set on both.
	Upload bool `json:"upload,omitempty"`
	// Time is when the agent read the event from the sandbox's kernel
	// (RFC 3339 with nanoseconds, UTC); absent on heartbeats.
	Time time.Time `json:"time,omitempty"`
	// Dropped is how many events were lost before an "overflow" event (0:
	// an unknown number).
	Dropped int64 `json:"dropped,omitempty"`
	// Code and Message say why an "error" event ended the watch.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}
