package wire

import (
	"encoding/base64"
	"time"
)

// Defaults and limits of the exec contract. docs/behaviour.md is the
// user's statement of them; keep the two in step.
const (
	// Workspace is where relative paths and commands without a cwd start.
	Workspace = "/workspace"
	// DefaultExecTimeoutSeconds applies when an ExecRequest of POST .../exec
	// sets no timeout (seconds).
	DefaultExecTimeoutSeconds = 120
	// DefaultMaxOutputBytes caps each of stdout and stderr in a collected
	// ExecResult (1 MiB) unless ExecRequest.MaxOutputBytes says otherwise:
	// past it the result keeps the head and the tail around a marker line
	// (see ExecResult.Stdout). Streams are not capped.
	DefaultMaxOutputBytes = 1 << 20
	// MaxMaxOutputBytes is the largest cap a request may ask for (16 MiB).
	MaxMaxOutputBytes = 16 << 20
	// TimeoutExitCode is the exit code of a command killed by its timeout,
	// as coreutils timeout(1) reports it.
	TimeoutExitCode = 124
	// ContentTypeNDJSON, as a request's Accept, asks exec, wait, code,
	// create-with-exec and template builds for a stream of events, one JSON
	// object a line.
	ContentTypeNDJSON = "application/x-ndjson"
	// EventHeartbeat is the type of the line {"type":"heartbeat"} that
	// every stream carries after 2 s without another line; it says only
	// that the server is alive, and clients skip it.
	EventHeartbeat = "heartbeat"
)

// ExecRequest runs one command (POST .../exec, POST .../processes). Set
// exactly one of Command and Argv.
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
	// TimeoutSeconds kills everything the command started (every process
	// in its cgroup, daemons that called setsid included) after this many
	// seconds; it then exits with TimeoutExitCode. 0 means
	// DefaultExecTimeoutSeconds for an exec; for a background process 0
	// means no timeout (the lease still ends it).
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
	// MaxOutputBytes caps each of stdout and stderr in a collected result,
	// in bytes. 0 means DefaultMaxOutputBytes; at most MaxMaxOutputBytes.
	// Streams are not capped.
	MaxOutputBytes int `json:"maxOutputBytes,omitempty"`
	// Stdin is the command's standard input (UTF-8 text). When empty the
	// command reads end-of-file at once, so nothing can hang on input.
	Stdin string `json:"stdin,omitempty"`
	// User runs the command as "user" (default, uid 1000; also "") or
	// "root". Any other name is refused with 400.
	User string `json:"user,omitempty"`
	// StdinOpen keeps a background process's standard input open, for
	// writes through POST /v1/sandboxes/{id}/processes/{pid}/stdin and an
	// end-of-file through .../stdin/close. Only for background processes
	// (POST .../processes), and not together with Stdin.
	StdinOpen bool `json:"stdinOpen,omitempty"`
	// Pty runs a background process on a pseudo-terminal of this size,
	// reached through GET .../processes/{pid}/terminal. Only for POST
	// .../processes, and not together with Stdin or StdinOpen: its input
	// comes from the terminal.
	Pty *PtySize `json:"pty,omitempty"`
}

// Event is one line of an NDJSON exec stream.
type Event struct {
	// Type is "start", "stdout", "stderr", "exit", "error" or "heartbeat"
	// (EventHeartbeat; skip it, as any type you do not know).
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
	Lossy bool `json:"lossy,omitempty"`
	// DataBase64 is the chunk's exact bytes, base64, set only when Lossy.
	DataBase64 string `json:"dataBase64,omitempty"`
	// Result ends the stream (exit events).
	Result *ExecResult `json:"result,omitempty"`
	// Error ends the stream when the command could not run (error events).
	Error *ErrorDetail `json:"error,omitempty"`
}

// Bytes is the chunk's exact bytes: DataBase64 decoded when Lossy, else
// Data.
func (ev Event) Bytes() []byte { return exact(ev.Data, ev.Lossy, ev.DataBase64) }

// ExecResult is how a command ended and what it printed. A non-zero
// ExitCode is a result, not an error.
type ExecResult struct {
	// ExitCode is the command's exit status; 128+N when killed by signal N;
	// TimeoutExitCode (124) when its timeout killed it; 137 when it was
	// killed for the sandbox's memory (OOMKilled) or its process limit
	// (ProcessLimitKilled).
	ExitCode int `json:"exitCode"`
	// Signal names the signal that ended the command ("SIGKILL"), if any.
	Signal string `json:"signal,omitempty"`
	// Stdout and Stderr are the captured output as UTF-8 text, each at
	// most ExecRequest.MaxOutputBytes bytes. Output over the cap keeps its
	// first and last bytes (about half each, cut on UTF-8 character
	// boundaries) joined by the line "\n[... N bytes omitted ...]\n", N
	// being exactly the bytes left out; caps under 128 bytes keep only the
	// first bytes. Empty in a streamed exit event, where the output went
	// out as events; for a background process, the replay buffer's last
	// bytes.
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
	// OOMKilled says the command was killed because the sandbox's memory
	// reached its size and this command's tree held the most of it
	// (ExitCode 137, Signal SIGKILL). The sandbox lives on.
	OOMKilled bool `json:"oomKilled,omitempty"`
	// ProcessLimitKilled says the command was killed because the sandbox
	// stayed at its process limit and this command's tree held the most
	// processes (a fork bomb; ExitCode 137, Signal SIGKILL). The sandbox
	// lives on.
	ProcessLimitKilled bool `json:"processLimitKilled,omitempty"`
	// DurationMs is wall time from start to exit, in milliseconds.
	DurationMs int64 `json:"durationMs"`
}

// StdoutData is the exact bytes kept of stdout: StdoutBase64 decoded when
// the output was not UTF-8, else Stdout.
func (r ExecResult) StdoutData() []byte { return exact(r.Stdout, r.StdoutLossy, r.StdoutBase64) }

// StderrData is the exact bytes kept of stderr (see StdoutData).
func (r ExecResult) StderrData() []byte { return exact(r.Stderr, r.StderrLossy, r.StderrBase64) }

// exact is b64 decoded when lossy (and it decodes), else text.
func exact(text string, lossy bool, b64 string) []byte {
	if lossy {
		if b, err := base64.StdEncoding.DecodeString(b64); err == nil {
			return b
		}
	}
	return []byte(text)
}

// Process is a background command (POST .../processes).
type Process struct {
	// Pid is the process id inside the sandbox.
	Pid int `json:"pid"`
	// Pty is its terminal's current size, for a process started with one.
	Pty *PtySize `json:"pty,omitempty"`
	// Command and Argv are as the ExecRequest gave them (one is set).
	Command string   `json:"command,omitempty"`
	Argv    []string `json:"argv,omitempty"`
	// Cwd is the working directory, absolute.
	Cwd string `json:"cwd"`
	// StartedAt is when it started (UTC).
	StartedAt time.Time `json:"startedAt"`
	// Running says it has not exited yet.
	Running bool `json:"running"`
	// Result is how it ended, once it has.
	Result *ExecResult `json:"result,omitempty"`
}

// ProcessList is the body of GET .../processes.
type ProcessList struct {
	Processes []Process `json:"processes"`
}

// KillRequest is the body of POST .../processes/{pid}/kill: it signals
// everything a background process started (every process in its cgroup),
// also after its main process has exited.
type KillRequest struct {
	// Signal is a name such as "SIGTERM" or "SIGKILL" (default SIGKILL).
	Signal string `json:"signal,omitempty"`
}
