// Package agentapi is the wire protocol between the host and the agent that
// runs as PID 1 inside every sandbox.
//
// The agent serves HTTP/1.1 on a unix socket (gVisor: a socket in a directory
// bind-mounted from the host; a VM: vsock). Its routes are the sandbox-scoped
// half of the public API, so the server authenticates, checks the sandbox's
// state and lease, and then forwards a request to the agent unchanged apart
// from the path prefix. Every route, body and error shape below is therefore
// also public; api/openapi.yaml documents them under /v1/sandboxes/{id}/...
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
//	                                       that claimed it; the lease end moves
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

// Defaults and limits of the exec contract. docs/behaviour.md is the user's
// statement of them; keep the two in step.
const (
	// Workspace is where relative paths and commands without a cwd start.
	Workspace = "/workspace"
	// DefaultExecTimeoutSeconds applies when an ExecRequest sets none.
	DefaultExecTimeoutSeconds = 120
	// DefaultMaxOutputBytes caps each of stdout and stderr in a collected
	// ExecResult (1 MiB): past it the result keeps the head and the tail
	// around a marker line (see ExecResult.Stdout). Streams are not capped:
	// the reader applies back pressure.
	DefaultMaxOutputBytes = 1 << 20
	// MaxMaxOutputBytes is the largest cap a request may ask for (16 MiB).
	MaxMaxOutputBytes = 16 << 20
	// ReplayBufferBytes is how much of each stream of a background process is
	// kept for a client that waits on it later (the tail, 1 MiB).
	ReplayBufferBytes = 1 << 20
	// TimeoutExitCode is the exit code reported for a command killed by its
	// timeout, as coreutils timeout(1) does.
	TimeoutExitCode = 124
	// ContentTypeNDJSON selects a streamed response on /exec and /wait.
	ContentTypeNDJSON = "application/x-ndjson"
)

// ExecRequest runs one command. Exactly one of Command and Argv is set.
type ExecRequest struct {
	// Command is a shell command line, run as `bash -c COMMAND`.
	Command string `json:"command,omitempty"`
	// Argv is a program and its arguments, run without a shell. The program
	// is looked up in PATH.
	Argv []string `json:"argv,omitempty"`
	// Cwd is the working directory; relative paths resolve under /workspace.
	// Default /workspace.
	Cwd string `json:"cwd,omitempty"`
	// Env adds to (and overrides) the sandbox's environment for this command.
	Env map[string]string `json:"env,omitempty"`
	// TimeoutSeconds kills everything the command started (every process
	// in its cgroup, daemons that called setsid included) after this many
	// seconds. 0 means DefaultExecTimeoutSeconds for /exec; for a background
	// process 0 means no timeout (the lease still ends it).
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
	// MaxOutputBytes caps each of stdout and stderr in a collected result.
	// 0 means DefaultMaxOutputBytes; at most MaxMaxOutputBytes.
	MaxOutputBytes int `json:"maxOutputBytes,omitempty"`
	// Stdin is given to the command as its standard input (UTF-8 text). When
	// empty the command reads end-of-file at once, so nothing can hang on input.
	Stdin string `json:"stdin,omitempty"`
	// User runs the command as this user: exactly "user" (default, uid 1000;
	// also "") or "root". Any other name is refused with 400.
	User string `json:"user,omitempty"`
	// StdinOpen keeps a background process's standard input open: a pipe
	// that POST /processes/{pid}/stdin writes to and POST
	// /processes/{pid}/stdin/close closes (EOF). Only for POST /processes,
	// and not together with Stdin.
	StdinOpen bool `json:"stdinOpen,omitempty"`
	// Pty runs a background process on a pseudo-terminal of this size (see
	// wire.PtySize and the terminal routes in terminal.go). Only for POST
	// /processes, and not together with Stdin or StdinOpen: its input comes
	// from the terminal.
	Pty *wire.PtySize `json:"pty,omitempty"`
}

// MaxStdinWriteBytes caps one POST /processes/{pid}/stdin body (1 MiB).
const MaxStdinWriteBytes = 1 << 20

// Event is one line of an NDJSON exec stream.
type Event struct {
	// Type is "start", "stdout", "stderr", "exit" or "error".
	Type string `json:"type"`
	// Pid is the command's process id (start events).
	Pid int `json:"pid,omitempty"`
	// Data is the chunk as UTF-8 text (stdout/stderr events). A UTF-8
	// sequence split across reads is held back until it is complete, so the
	// concatenated Data of a stream equals the decoded whole.
	Data string `json:"data,omitempty"`
	// Lossy is true when the chunk held bytes that are not UTF-8; Data then
	// has U+FFFD in their place and DataBase64 holds the exact bytes.
	Lossy bool `json:"lossy,omitempty"`
	// DataBase64 is the chunk's exact bytes, set only when Lossy.
	DataBase64 string `json:"dataBase64,omitempty"`
	// Result ends the stream (exit events).
	Result *ExecResult `json:"result,omitempty"`
	// Error ends the stream when the command could not run (error events).
	Error *Error `json:"error,omitempty"`
}

// ExecResult is how a command ended and what it printed.
type ExecResult struct {
	// ExitCode is the command's exit status; 128+N when killed by signal N;
	// TimeoutExitCode (124) when its timeout killed it; 137 when the agent
	// killed it for the sandbox's memory (OOMKilled) or its process limit
	// (ProcessLimitKilled).
	ExitCode int `json:"exitCode"`
	// Signal names the signal that ended the command ("SIGKILL"), if any.
	Signal string `json:"signal,omitempty"`
	// Stdout and Stderr are the captured output as UTF-8 text, each at most
	// MaxOutputBytes bytes. Output over the cap keeps its first and last
	// bytes (about half each, cut on UTF-8 character boundaries) joined by
	// the line "\n[... N bytes omitted ...]\n", N being exactly the bytes
	// left out; caps under 128 bytes keep only the first bytes. Empty in a
	// streamed exit event, where the output went out as events; for a
	// background process, the replay buffer's last bytes.
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// StdoutTruncated and StderrTruncated say the cap cut the stream.
	StdoutTruncated bool `json:"stdoutTruncated"`
	StderrTruncated bool `json:"stderrTruncated"`
	// StdoutBytes and StderrBytes count every byte the command wrote, kept or not.
	StdoutBytes int64 `json:"stdoutBytes"`
	StderrBytes int64 `json:"stderrBytes"`
	// StdoutLossy and StderrLossy say the output was not valid UTF-8; the
	// exact bytes are then in StdoutBase64 / StderrBase64.
	StdoutLossy  bool   `json:"stdoutLossy,omitempty"`
	StderrLossy  bool   `json:"stderrLossy,omitempty"`
	StdoutBase64 string `json:"stdoutBase64,omitempty"`
	StderrBase64 string `json:"stderrBase64,omitempty"`
	// TimedOut says the command's timeout killed it.
	TimedOut bool `json:"timedOut"`
	// OOMKilled says the agent killed the command because the sandbox's
	// memory reached its size and this command's tree held the most of it
	// (ExitCode 137, Signal SIGKILL). The sandbox lives on.
	OOMKilled bool `json:"oomKilled,omitempty"`
	// ProcessLimitKilled says the agent killed the command because the
	// sandbox stayed at its process limit and this command's tree held the
	// most processes (a fork bomb; ExitCode 137, Signal SIGKILL). The
	// sandbox lives on.
	ProcessLimitKilled bool `json:"processLimitKilled,omitempty"`
	// DurationMs is wall time from start to exit, in milliseconds.
	DurationMs int64 `json:"durationMs"`
}

// Process is a background command.
type Process struct {
	Pid int `json:"pid"`
	// Pty is the terminal's current size, for a process started with one.
	Pty       *wire.PtySize `json:"pty,omitempty"`
	Command   string        `json:"command,omitempty"`
	Argv      []string      `json:"argv,omitempty"`
	Cwd       string        `json:"cwd"`
	StartedAt time.Time     `json:"startedAt"`
	Running   bool          `json:"running"`
	Result    *ExecResult   `json:"result,omitempty"`
}

// ProcessList is the answer of GET /processes.
type ProcessList struct {
	Processes []Process `json:"processes"`
}

// KillRequest signals everything a background process started (every
// process in its cgroup), also after its main process has exited.
type KillRequest struct {
	// Signal is a name such as "SIGTERM" or "SIGKILL" (default SIGKILL).
	Signal string `json:"signal,omitempty"`
}

// MkdirRequest creates a directory (and its parents when Parents).
type MkdirRequest struct {
	Path    string `json:"path"`
	Parents bool   `json:"parents,omitempty"`
}

// RenameRequest moves From to To, replacing To if it is a file.
type RenameRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

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

// Error is the body of every error: {"error": {"code", "message"}}.
type Error struct {
	// Code is a stable machine-readable category, one of the Code* constants.
	Code string `json:"code"`
	// Message says what was wrong and how to fix it.
	Message string `json:"message"`
}

// ErrorBody wraps Error as it travels.
type ErrorBody struct {
	Error Error `json:"error"`
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
