package agentapi

import (
	"encoding/json"
	"time"
)

// The code interpreter: contexts, each a Jupyter kernel (ipykernel) that
// keeps its variables from one call to the next, and code run in them.
// Sandboxes of the code-interpreter template have the kernels; in others
// these routes answer 501 not_implemented.
//
//	POST   /contexts         CreateContextRequest -> 201 Context (kernel started)
//	GET    /contexts                              -> 200 ContextList
//	GET    /contexts/{contextId}                  -> 200 Context
//	DELETE /contexts/{contextId}                  -> 204 (kernel stopped)
//	POST   /contexts/{contextId}/restart          -> 200 Context (a new kernel; state lost)
//	POST   /code             RunCodeRequest       -> 200 Execution, or an NDJSON stream of
//	                                                 CodeEvent when Accept: application/x-ndjson

// Defaults and limits of the code interpreter.
const (
	// DefaultContextID names the context a RunCodeRequest without a
	// ContextID runs in; it is created on first use.
	DefaultContextID = "default"
	// LanguagePython is the only language with kernels so far.
	LanguagePython = "python"
	// DefaultCodeTimeoutSeconds applies when a RunCodeRequest sets none.
	DefaultCodeTimeoutSeconds = 300
	// MaxContexts is how many contexts a sandbox may have at once (each is
	// a Python process of 50-100 MiB).
	MaxContexts = 16
	// MaxLogBytes caps each of stdout and stderr in a collected Execution:
	// past it the head and tail are kept around a marker entry
	// "[... N bytes omitted ...]". Streams are not capped.
	MaxLogBytes = 1 << 20
	// MaxResultBytes caps the results of one collected Execution together
	// (their MIME data); a result past it is replaced by one whose
	// text/plain says how large it was.
	MaxResultBytes = 32 << 20
	// CodeNotImplemented is the error code (501) of the code routes in a
	// sandbox whose template has no kernels.
	CodeNotImplemented = "not_implemented"
)

// CreateContextRequest starts a context.
type CreateContextRequest struct {
	// Language of the kernel: "python" (default).
	Language string `json:"language,omitempty"`
	// Cwd is the kernel's working directory (default /workspace; relative
	// paths resolve under /workspace; it must exist).
	Cwd string `json:"cwd,omitempty"`
	// Env adds to the sandbox's environment for the kernel's whole life.
	Env map[string]string `json:"env,omitempty"`
}

// Context is a code context: one kernel and the state it keeps.
type Context struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
	// State is "starting", "idle", "busy" or "dead" (its kernel died or was
	// killed; the next call starts a new one and says so).
	State     string    `json:"state"`
	CreatedAt time.Time `json:"createdAt"`
	// Restarts counts the kernels this context lost (each time, its
	// variables were lost with it).
	Restarts int `json:"restarts"`
}

// ContextList is the answer of GET /contexts.
type ContextList struct {
	Contexts []Context `json:"contexts"`
}

// RunCodeRequest runs code in a context.
type RunCodeRequest struct {
	// Code is the cell to run (Python; IPython magics and `!cmd` work).
	Code string `json:"code"`
	// ContextID names the context (POST /contexts). Empty: the default
	// context of Language, created on first use.
	ContextID string `json:"contextId,omitempty"`
	// Language is "python" (default). With a ContextID it must match the
	// context's, or be empty.
	Language string `json:"language,omitempty"`
	// TimeoutSeconds interrupts the code (SIGINT, as Ctrl-C in a notebook)
	// after this many seconds, keeping the context and its variables; a
	// kernel that does not stop within InterruptGraceSeconds is restarted
	// and its state is lost. 0: DefaultCodeTimeoutSeconds.
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
	// Env is set in the kernel's os.environ for this call only, and the
	// previous values are put back after it.
	Env map[string]string `json:"env,omitempty"`
}

// InterruptGraceSeconds is how long a kernel has to stop after the
// interrupt of a timeout before it is killed and restarted.
const InterruptGraceSeconds = 2

// Execution is what running code produced, in the kernel's order within
// each list.
type Execution struct {
	// ContextID is the context the code ran in.
	ContextID string `json:"contextId"`
	// Results are the rich outputs: the cell's value (IsMainResult) and
	// whatever it displayed (display(), a figure left open or shown).
	Results []Result `json:"results"`
	// Logs are stdout and stderr, one entry per chunk the kernel sent.
	Logs Logs `json:"logs"`
	// Error is set when the code raised (or timed out, or its kernel died).
	Error *ExecutionError `json:"error,omitempty"`
	// ExecutionCount is the kernel's counter for this cell (In [N]); 0 if
	// the cell never started.
	ExecutionCount int `json:"executionCount"`
	// TimedOut says the timeout interrupted the code.
	TimedOut bool `json:"timedOut,omitempty"`
	// OutOfMemory says the kernel was killed because the sandbox's memory
	// ran out while the code ran (StateLost is then true too).
	OutOfMemory bool `json:"outOfMemory,omitempty"`
	// StateLost says the kernel was killed or died during this call: the
	// context's variables are gone, and the next call runs in a new kernel.
	StateLost bool `json:"stateLost,omitempty"`
	// Restarted says this call ran in a new kernel because the previous one
	// was lost (see Notice): variables from earlier calls are gone.
	Restarted bool `json:"restarted,omitempty"`
	// Notice is a plain sentence about a lost or restarted kernel, for
	// people and models alike; empty otherwise.
	Notice string `json:"notice,omitempty"`
	// LogsTruncated says a stream went over MaxLogBytes and its middle was
	// left out; ResultsTruncated that results went over MaxResultBytes.
	LogsTruncated    bool `json:"logsTruncated,omitempty"`
	ResultsTruncated bool `json:"resultsTruncated,omitempty"`
	// DurationMs is the wall time of the call in milliseconds, kernel start
	// included.
	DurationMs int64 `json:"durationMs"`
}

// Logs are the text a cell printed, chunk by chunk.
type Logs struct {
	Stdout []string `json:"stdout"`
	Stderr []string `json:"stderr"`
}

// Result is one rich output: a MIME bundle.
type Result struct {
	// Data maps a MIME type to the output in that type: text types
	// ("text/plain", "text/html", "text/markdown", "image/svg+xml",
	// "text/latex") as strings, images ("image/png", "image/jpeg") as
	// base64 strings, "application/json" as JSON.
	Data map[string]json.RawMessage `json:"data"`
	// Metadata is the kernel's metadata of the output (image sizes...).
	Metadata map[string]json.RawMessage `json:"metadata,omitempty"`
	// IsMainResult marks the value of the cell's last expression (Out[N]).
	IsMainResult bool `json:"isMainResult"`
}

// ExecutionError is an exception the code raised, or why the call failed.
type ExecutionError struct {
	// Name is the exception class ("ZeroDivisionError"), or one of
	// "TimeoutError" (the timeout interrupted the code), "OutOfMemoryError"
	// (the kernel was killed for memory), "KernelDied".
	Name  string `json:"name"`
	Value string `json:"value"`
	// Traceback is the formatted traceback, plain text (no ANSI colours).
	Traceback string `json:"traceback"`
}

// CodeEvent is one line of an NDJSON /code stream. Events come in the
// order the kernel sent them: "start", then "stdout", "stderr", "result",
// "error" as they happen, then "end".
type CodeEvent struct {
	// Type is "start", "stdout", "stderr", "result", "error" or "end".
	Type string `json:"type"`
	// ContextID is set on start.
	ContextID string `json:"contextId,omitempty"`
	// Text is the chunk (stdout, stderr).
	Text string `json:"text,omitempty"`
	// Result is set on result events.
	Result *Result `json:"result,omitempty"`
	// Error is set on error events.
	Error *ExecutionError `json:"error,omitempty"`
	// Execution ends the stream (end): everything but results and logs
	// (empty there: they went out as events). An Error is also sent as an error event
	// before it (a timeout's or a lost kernel's just before end).
	Execution *Execution `json:"execution,omitempty"`
}
