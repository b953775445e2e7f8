// Package agentapi is the wire protocol between the host and the agent that
// runs as PID 1 inside every sandbox.
//
// The agent serves HTTP/1.1 on a unix socket (gVisor: a socket in a directory
// bind-mounted from the host; a VM: vsock). Its routes are the sandbox-scoped
// half of the public API, so the server authenticates, checks the sandbox's
// state and lease, and then forwards a request to the agent unchanged apart
// from the path prefix. Every route, body and error shape below is therefore
// also public; api/openapi.yaml documents them under /v1/sandboxes/{id}/...,
// and their bodies are package wire's (withruntime.dev/runtime/sdk/go/wire),
// aliased here. The types declared here are the host's alone:
// ConfigureRequest, Health, Usage and the PortUpgrade protocol.
//
// Routes (paths are relative to the agent; the public prefix is
// /v1/sandboxes/{id}):
//
//	GET    /health                      -> 200 Health
//	GET    /usage                       -> 200 Usage (the sandbox's CPU as the agent counts it)
//	POST   /exec           ExecRequest  -> 200 ExecResult, or an NDJSON stream of
//	                                       Event when Accept: application/x-ndjson
//	POST   /processes      ExecRequest  -> 201 Process (a background command)
//	GET    /processes                   -> 200 ProcessList
//	GET    /processes/{pid}             -> 200 Process
//	POST   /processes/{pid}/wait?timeoutSeconds=N
//	                                    -> 200 ExecResult (or NDJSON Events, replaying
//	                                       the bounded output buffer first); 408 if
//	                                       still running after N seconds
//	POST   /processes/{pid}/kill  KillRequest -> 200 Process
//	POST   /processes/{pid}/stdin  raw bytes -> 204 once written to the standard
//	                                       input of a process started with
//	                                       stdinOpen (at most MaxStdinWriteBytes);
//	                                       409 when its stdin is closed or it ended
//	POST   /processes/{pid}/stdin/close -> 204; the process reads end-of-file
//	GET    /processes/{pid}/terminal    -> 101, then the terminal channel of a
//	                                       process started with a pty
//	                                       (TerminalUpgrade; terminal.go)
//	POST   /processes/{pid}/resize PtySize -> 200 Process; the terminal's new
//	                                       size (409 without a terminal or after
//	                                       its program ended)
//	GET    /files?path=P                -> 200 raw bytes (application/octet-stream),
//	                                       with Accept-Ranges, ETag, Last-Modified;
//	                                       a Range of one byte range: 206 and those
//	                                       bytes with Content-Range, 416 with
//	                                       Content-Range: bytes */SIZE when it starts
//	                                       at or past the end; any other Range, or
//	                                       an If-Range of another version: 200
//	PUT    /files?path=P   raw bytes    -> 200 FileInfo; parents are created and owned
//	                                       by the sandbox user; written to a temporary
//	                                       file and renamed, so a failed upload leaves
//	                                       nothing behind
//	GET    /files/list?path=P&depth=N&limit=L&cursor=C
//	                                    -> 200 FileList, one page of the listing
//	                                       (depth 1 = direct children; limit and
//	                                       cursor: see FileList and the List
//	                                       constants in files.go)
//	GET    /files/stat?path=P           -> 200 FileInfo
//	POST   /files/mkdir    MkdirRequest -> 200 FileInfo
//	DELETE /files?path=P&recursive=B    -> 204
//	POST   /files/rename   RenameRequest -> 200 FileInfo
//	POST   /code, /contexts, ...        -> the code interpreter (see code.go)
//
// Three routes are the host's alone (the server never forwards them):
//
//	POST   /configure      ConfigureRequest -> 204; a warm-pool sandbox
//	                                       takes the environment of the create
//	                                       that claimed it (a sandbox restored
//	                                       from a snapshot: of its create, and
//	                                       its memory size); the lease end moves
//	POST   /checkpoint                  -> 204 once the agent has closed its
//	                                       listener for a gVisor checkpoint (a
//	                                       pause); it listens again after it;
//	                                       409 when it cannot be checkpointed
//	POST   /ports/{port}/connect        -> 101, then the bytes of a TCP connection
//	                                       to that port on the sandbox's loopback
//	                                       (PortUpgrade); 502 port_closed. The
//	                                       server uses it for its port relay
//	                                       (/v1/sandboxes/{id}/ports/{port}/...),
//	                                       never forwards requests to it
//
// Relative paths resolve under /workspace. A path containing NUL is refused
// with 400. Errors are always an ErrorBody with a matching HTTP status.
package agentapi

import (
	"time"

	"withruntime.dev/runtime/sdk/go/wire"
)

// Defaults and limits of the exec contract: package wire's, which
// docs/behaviour.md states for users; keep the two in step.
const (
	Workspace                 = wire.Workspace
	DefaultExecTimeoutSeconds = wire.DefaultExecTimeoutSeconds
	DefaultMaxOutputBytes     = wire.DefaultMaxOutputBytes
	MaxMaxOutputBytes         = wire.MaxMaxOutputBytes
	TimeoutExitCode           = wire.TimeoutExitCode
	// ReplayBufferBytes is how much of each stream of a background process is
	// kept for a client that waits on it later (the tail, 1 MiB).
	ReplayBufferBytes = 1 << 20
	// ContentTypeNDJSON selects a streamed response on /exec and /wait.
	ContentTypeNDJSON = wire.ContentTypeNDJSON
)

// The public bodies of the agent's routes are package wire's (the server
// forwards them unchanged); these are their names here.
type (
	ExecRequest   = wire.ExecRequest
	Event         = wire.Event
	ExecResult    = wire.ExecResult
	Process       = wire.Process
	ProcessList   = wire.ProcessList
	KillRequest   = wire.KillRequest
	MkdirRequest  = wire.MkdirRequest
	RenameRequest = wire.RenameRequest
	// Error is the body of every error's "error": {"code", "message"}.
	Error = wire.ErrorDetail
	// ErrorBody wraps Error as it travels.
	ErrorBody = wire.Error
)

// MaxStdinWriteBytes caps one POST /processes/{pid}/stdin body (1 MiB).
const MaxStdinWriteBytes = 1 << 20

// ConfigureRequest gives a sandbox booted ahead of time (the warm pool)
// the settings of the create that claims it. Env is added to the agent's
// boot environment for every command started afterwards, as a cold
// sandbox's create env would be; names must be non-empty without '=' or NUL.
type ConfigureRequest struct {
	Env map[string]string `json:"env,omitempty"`
	// LeaseEndsAt, when set, is the sandbox's lease end: the agent ends the
	// sandbox itself a grace period after it (agent.LeaseGrace) should no
	// server have stopped it by then. The server sends it on create, on
	// every lease change and on a pool claim.
	LeaseEndsAt *time.Time `json:"leaseEndsAt,omitempty"`
	// WarmKernel asks a sandbox with Jupyter kernels to start its default
	// code context, with numpy, pandas and matplotlib imported, before it
	// answers (the warm pool sends it at boot). Env given later reaches
	// that kernel too. Ignored where there are no kernels.
	WarmKernel bool `json:"warmKernel,omitempty"`
	// MemoryBytes, when positive, is the sandbox's new memory size in
	// bytes: the agent kills commands at it from now on (its memory guard).
	// The server sends it to a sandbox restored from a snapshot with more
	// memory than the snapshot's source had (the source's size is in the
	// restored agent's memory).
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
}

// Health is the agent's readiness answer.
type Health struct {
	OK bool `json:"ok"`
	// Version of the agent binary.
	Version string `json:"version"`
}

// Usage is the sandbox's CPU time as the agent counts it from inside (GET
// /usage), for drivers that cannot measure the sandbox from the host
// (Kubernetes). It comes from inside the sandbox, so the host caps and
// checks it (a hostile agent may lie).
type Usage struct {
	// CPUSeconds is the user plus system CPU time, in seconds, of the agent
	// and every process it started or inherited since it started: the
	// ended ones (reaped) and the live ones.
	CPUSeconds float64 `json:"cpuSeconds"`
}

// Error codes shared by the agent and the server.
const (
	CodeBadRequest   = "bad_request"  // 400
	CodeUnauthorized = "unauthorized" // 401
	CodeForbidden    = "forbidden"    // 403
	CodeNotFound     = "not_found"    // 404
	CodeTimeout      = "timeout"      // 408
	CodeConflict     = "conflict"     // 409 (wrong state, already exists)
	CodeLeaseEnded   = "lease_ended"  // 410
	CodeTooLarge     = "too_large"    // 413
	CodeNoSpace      = "no_space"     // 507
	CodeRateLimited  = "rate_limited" // 429
	CodeUnavailable  = "unavailable"  // 503
	CodeInternal     = "internal"     // 500
	CodePortClosed   = "port_closed"  // 502: nothing in the sandbox accepts connections on the port
	// CodeRangeNotSatisfiable (416): a download's Range starts at or past
	// the file's end; the answer's Content-Range is "bytes */SIZE".
	CodeRangeNotSatisfiable = "range_not_satisfiable"
)

// PortUpgrade is the protocol of the agent's POST /ports/{port}/connect
// (Connection: Upgrade, Upgrade: PortUpgrade). The agent connects to that
// TCP port on the sandbox's own loopback (127.0.0.1, then ::1) and answers
// 101 Switching Protocols; from then on the connection carries that TCP
// connection's bytes both ways, and a half close (EOF) is passed on. When
// nothing accepts on the port the answer is 502 with CodePortClosed.
const PortUpgrade = "withruntime-tcp"
