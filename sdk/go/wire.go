package withruntime

import "time"

// The types in this file are the JSON bodies of Runtime's HTTP API
// (api/openapi.yaml), copied from the server so that this module needs
// nothing but the standard library. A test in the server's repository
// compares their JSON field sets with the server's own, so they cannot drift.

// Defaults and limits of the exec contract.
const (
	// Workspace is where relative paths and commands without a cwd start.
	Workspace = "/workspace"
	// DefaultExecTimeoutSeconds applies when an ExecRequest sets no timeout.
	DefaultExecTimeoutSeconds = 120
	// DefaultMaxOutputBytes caps each of stdout and stderr in a collected
	// ExecResult (1 MiB) unless ExecRequest.MaxOutputBytes says otherwise.
	// Streams (ExecStream) are not capped.
	DefaultMaxOutputBytes = 1 << 20
	// MaxMaxOutputBytes is the largest cap a request may ask for (16 MiB).
	MaxMaxOutputBytes = 16 << 20
	// TimeoutExitCode is the exit code of a command killed by its timeout,
	// as coreutils timeout(1) reports it.
	TimeoutExitCode = 124
)

// CreateSandboxRequest is the body of POST /v1/sandboxes. Create builds it
// from Options; zero values take the server's defaults.
type CreateSandboxRequest struct {
	Template       string            `json:"template"`
	TimeoutSeconds int64             `json:"timeoutSeconds"`
	CPU            float64           `json:"cpu"`
	MemoryMiB      int64             `json:"memoryMiB"`
	DiskMiB        int64             `json:"diskMiB"`
	Env            map[string]string `json:"env"`
	Metadata       map[string]string `json:"metadata"`
	Network        *NetworkPolicy    `json:"network,omitempty"`
	Secrets        []string          `json:"secrets,omitempty"`
	MaxCostMicros  int64             `json:"maxCostMicros,omitempty"`
	OnLeaseEnd     string            `json:"onLeaseEnd,omitempty"`
	AutoResume     *bool             `json:"autoResume,omitempty"`
	// Exec is a first command, run in the new sandbox as part of the create
	// (Client.CreateAndExec, Client.RunOnce); nil for a plain create.
	Exec *ExecRequest `json:"exec,omitempty"`
	// Volumes are the volumes to mount (Options.Volumes).
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// SandboxWithResult is the answer to a create with a first command: the
// sandbox and how the command ended. Exactly one of Result and Error is
// set (Error: the command could not run; the sandbox exists either way).
type SandboxWithResult struct {
	Sandbox SandboxInfo `json:"sandbox"`
	Result  *ExecResult `json:"result,omitempty"`
	Error   *ErrorInfo  `json:"error,omitempty"`
}

// SandboxInfo is a sandbox's record as the server returns it.
type SandboxInfo struct {
	ID string `json:"id"`
	// State is "starting", "running", "paused" or "stopped".
	State    string `json:"state"`
	Template string `json:"template"`
	// CreatedAt and LeaseEndsAt are UTC. The server destroys the sandbox at
	// LeaseEndsAt unless the lease is extended with SetTimeout.
	CreatedAt   time.Time `json:"createdAt"`
	LeaseEndsAt time.Time `json:"leaseEndsAt"`
	// EndedAt and EndReason ("deleted", "lease_ended", "failed",
	// "out_of_memory", "spending_limit") are set once the sandbox is stopped.
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	EndReason string     `json:"endReason,omitempty"`
	// CPU is in vCPUs, MemoryMiB and DiskMiB in MiB (2^20 bytes).
	CPU       float64           `json:"cpu"`
	MemoryMiB int64             `json:"memoryMiB"`
	DiskMiB   int64             `json:"diskMiB"`
	Metadata  map[string]string `json:"metadata"`
	// CostMicros is what the sandbox has cost so far, in micro-dollars
	// (1 USD = 1,000,000), as of its last metering sample (every few
	// seconds while it runs, and once when it stops): CPU used (at least
	// the CPU floor over its life) plus memory size × time, at the server's
	// prices, rounded once. It is the figure Client.Usage reports for the
	// sandbox. Create answers 0 (nothing is metered yet); Refresh, List,
	// Connect and SetTimeout give the current figure. A paused sandbox is
	// billed its image's size × time at the storage price, nothing else.
	CostMicros int64 `json:"costMicros"`
	// OnLeaseEnd is what the lease end does: "stop" or "pause".
	OnLeaseEnd string `json:"onLeaseEnd"`
	// AutoResume says whether a request while paused resumes the sandbox.
	AutoResume bool `json:"autoResume"`
	// PausedAt is when the sandbox was paused (UTC; set while paused).
	PausedAt *time.Time `json:"pausedAt,omitempty"`
	// ImageBytes is a paused sandbox's image size on the host, in bytes.
	ImageBytes int64 `json:"imageBytes,omitempty"`
	// Volumes are the volumes the sandbox mounts (nil: none).
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// SandboxList is the body of GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []SandboxInfo `json:"sandboxes"`
}

// SetTimeoutRequest is the body of POST /v1/sandboxes/{id}/timeout.
type SetTimeoutRequest struct {
	TimeoutSeconds int64 `json:"timeoutSeconds"`
	// OnLeaseEnd and AutoResume, when set, change the sandbox's.
	OnLeaseEnd string `json:"onLeaseEnd,omitempty"`
	AutoResume *bool  `json:"autoResume,omitempty"`
}

// ResumeRequest is the body of POST /v1/sandboxes/{id}/resume.
type ResumeRequest struct {
	// TimeoutSeconds is the resumed sandbox's lease (0: the lease it was
	// last given).
	TimeoutSeconds int64 `json:"timeoutSeconds,omitempty"`
}

// ExecRequest runs one command. Set exactly one of Command and Argv.
type ExecRequest struct {
	// Command is a shell command line, run as `bash -c COMMAND`.
	Command string `json:"command,omitempty"`
	// Argv is a program and its arguments, run without a shell; the program
	// is looked up in PATH.
	Argv []string `json:"argv,omitempty"`
	// Cwd is the working directory; a relative one resolves under
	// /workspace. Default /workspace.
	Cwd string `json:"cwd,omitempty"`
	// Env adds to (and overrides) the sandbox's environment for this command.
	Env map[string]string `json:"env,omitempty"`
	// TimeoutSeconds kills the command's whole process group after this many
	// seconds; it then exits with TimeoutExitCode. 0 means
	// DefaultExecTimeoutSeconds.
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
	// MaxOutputBytes caps each of stdout and stderr in a collected result
	// (Exec); the first bytes are kept. 0 means DefaultMaxOutputBytes; at
	// most MaxMaxOutputBytes. Streams are not capped.
	MaxOutputBytes int `json:"maxOutputBytes,omitempty"`
	// Stdin is the command's standard input (UTF-8 text). When empty the
	// command reads end-of-file at once.
	Stdin string `json:"stdin,omitempty"`
	// StdinOpen keeps a background process's standard input open, for
	// writes through POST /v1/sandboxes/{id}/processes/{pid}/stdin and an
	// EOF through .../stdin/close. Only for background processes, and not
	// together with Stdin.
	StdinOpen bool `json:"stdinOpen,omitempty"`
	// User runs the command as "user" (default, uid 1000) or "root".
	User string `json:"user,omitempty"`
}

// Event is one event of an exec stream (ExecStream).
type Event struct {
	// Type is "start", "stdout", "stderr", "exit" or "error".
	Type string `json:"type"`
	// Pid is the command's process id (start events).
	Pid int `json:"pid,omitempty"`
	// Data is the chunk as UTF-8 text (stdout and stderr events). A UTF-8
	// sequence split across reads is held back until complete, so the
	// concatenated Data of a stream is the decoded whole.
	Data string `json:"data,omitempty"`
	// Lossy is true when the chunk held bytes that are not UTF-8: Data then
	// has U+FFFD in their place and DataBase64 the exact bytes. Bytes
	// returns the exact bytes either way.
	Lossy      bool   `json:"lossy,omitempty"`
	DataBase64 string `json:"dataBase64,omitempty"`
	// Result ends the stream (exit events).
	Result *ExecResult `json:"result,omitempty"`
	// Error ends the stream when the command could not run (error events).
	Error *ErrorInfo `json:"error,omitempty"`
}

// ExecResult is how a command ended and what it printed. A non-zero
// ExitCode is a result, not an error: Exec returns it with a nil error.
type ExecResult struct {
	// ExitCode is the command's exit status; 128+N when killed by signal N;
	// TimeoutExitCode (124) when its timeout killed it.
	ExitCode int `json:"exitCode"`
	// Signal names the signal that ended the command ("SIGKILL"), if any.
	Signal string `json:"signal,omitempty"`
	// Stdout and Stderr are the output as UTF-8 text, each capped at
	// ExecRequest.MaxOutputBytes (the first bytes are kept). Empty in the
	// result of a stream, whose output went out as events.
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// StdoutTruncated and StderrTruncated say the cap cut the stream.
	StdoutTruncated bool `json:"stdoutTruncated"`
	StderrTruncated bool `json:"stderrTruncated"`
	// StdoutBytes and StderrBytes count every byte the command wrote, kept
	// or not.
	StdoutBytes int64 `json:"stdoutBytes"`
	StderrBytes int64 `json:"stderrBytes"`
	// StdoutLossy and StderrLossy say the output was not valid UTF-8; the
	// exact bytes are then in StdoutBase64 and StderrBase64 (see
	// StdoutData and StderrData).
	StdoutLossy  bool   `json:"stdoutLossy,omitempty"`
	StderrLossy  bool   `json:"stderrLossy,omitempty"`
	StdoutBase64 string `json:"stdoutBase64,omitempty"`
	StderrBase64 string `json:"stderrBase64,omitempty"`
	// TimedOut says the command's timeout killed it.
	TimedOut bool `json:"timedOut"`
	// OOMKilled says the command was killed because the sandbox ran out of
	// memory.
	OOMKilled bool `json:"oomKilled,omitempty"`
	// ProcessLimitKilled says the command was killed because the sandbox
	// stayed at its process limit and this command held the most processes
	// (a fork bomb; ExitCode 137). The sandbox lives on.
	ProcessLimitKilled bool `json:"processLimitKilled,omitempty"`
	// DurationMs is wall time from start to exit, in milliseconds.
	DurationMs int64 `json:"durationMs"`
}

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
	Mode    string    `json:"mode"`
	ModTime time.Time `json:"modTime"`
	Uid     int       `json:"uid"`
	Gid     int       `json:"gid"`
	// Target is where a symlink points.
	Target string `json:"target,omitempty"`
}

// FileList is the body of GET .../files/list: one page of a listing
// (Files.ListPage).
type FileList struct {
	// Entries is the page's entries, in listing order: by path compared
	// one component at a time in byte order (a directory, then its
	// contents, then its next sibling; at depth 1, by name).
	Entries []FileInfo `json:"entries"`
	// Truncated says more entries follow: ask for them with
	// ListOptions.Cursor set to Next.
	Truncated bool `json:"truncated"`
	// Next is the cursor of the next page, an opaque string; set only
	// when Truncated.
	Next string `json:"next,omitempty"`
	// Total is the number of entries in the directory itself (its direct
	// children, whatever the page), as the server read it; set only for a
	// listing of depth 1.
	Total *int `json:"total,omitempty"`
}

// MkdirRequest is the body of POST .../files/mkdir.
type MkdirRequest struct {
	Path    string `json:"path"`
	Parents bool   `json:"parents,omitempty"`
}

// RenameRequest is the body of POST .../files/rename.
type RenameRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ErrorInfo is the error object of every error answer and error event.
type ErrorInfo struct {
	// Code is a stable machine-readable category such as "not_found".
	Code string `json:"code"`
	// Message says what was wrong and how to fix it.
	Message string `json:"message"`
}

// ErrorBody is an error answer's body: {"error": {"code", "message"}}.
type ErrorBody struct {
	Error ErrorInfo `json:"error"`
}
