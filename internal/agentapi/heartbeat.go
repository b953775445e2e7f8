package agentapi

import (
	"time"

	"withruntime.dev/runtime/sdk/go/wire"
)

// Heartbeats of NDJSON streams. Every stream of the API (an exec's, a
// background process's wait, a code cell's, a create's with its first
// command, a template build's) writes the line
//
//	{"type":"heartbeat"}
//
// when nothing else was written for HeartbeatSeconds, so a client can bound
// each read of a stream (no byte for N seconds: the server or the sandbox's
// agent is gone) without taking a command that prints nothing for minutes
// for a dead server. The line carries no other field and means nothing
// else: clients skip it, as they skip any event type they do not know.
// With a write every HeartbeatSeconds/2 checked, no stream is silent for
// more than 1.5 × HeartbeatSeconds (3 s), so an idle bound of 5 s or more
// never fails a live stream.
const (
	// EventHeartbeat is the type of a heartbeat line.
	EventHeartbeat = wire.EventHeartbeat
	// HeartbeatSeconds is how long a stream stays silent before a
	// heartbeat line (seconds).
	HeartbeatSeconds = 2
	// HeartbeatInterval is HeartbeatSeconds as a duration.
	HeartbeatInterval = HeartbeatSeconds * time.Second
)

// HeartbeatLine is a heartbeat event as written, newline included.
var HeartbeatLine = []byte(`{"type":"heartbeat"}` + "\n")
