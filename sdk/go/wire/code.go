package wire

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// The code interpreter: contexts, each a Jupyter kernel that keeps its
// variables from one call to the next, and code run in them (POST
// .../contexts, POST .../code).

// DefaultCodeTimeoutSeconds applies when a RunCodeRequest sets no timeout
// (seconds).
const DefaultCodeTimeoutSeconds = 300

// The code interpreter's languages (CreateContextRequest.Language,
// RunCodeRequest.Language). Requests may also give E2B's short names:
// "js", "ts" (and "python3").
const (
	LanguagePython     = "python"
	LanguageJavaScript = "javascript"
	LanguageTypeScript = "typescript"
	LanguageR          = "r"
	LanguageBash       = "bash"
	// LanguageJava runs in a JShell kernel (JDK 17): the last
	// expression's value is the result, a cell's env is set as system
	// properties.
	LanguageJava = "java"
)

// DefaultContextID is the context a RunCodeRequest without a ContextID
// runs Python in; each other language's is "default-<language>"
// ("default-javascript", ...). Each is created on first use.
const DefaultContextID = "default"

// CreateContextRequest is the body of POST .../contexts.
type CreateContextRequest struct {
	// Language of the kernel: "python" (default), "javascript" (or "js"),
	// "typescript" ("ts"), "r", "bash" or "java". A language whose kernel
	// the sandbox lacks (any but Python outside the code-interpreter
	// template) is refused with a 400 naming it.
	Language string `json:"language,omitempty"`
	// Cwd is the kernel's working directory (default /workspace; relative
	// paths resolve under /workspace; it must exist).
	Cwd string `json:"cwd,omitempty"`
	// Env adds to the sandbox's environment for the kernel's whole life.
	Env map[string]string `json:"env,omitempty"`
	// User runs the kernel as "user" (default, uid 1000; also "") or
	// "root"; the cwd must be a directory that user can enter. Any other
	// name is refused with 400.
	User string `json:"user,omitempty"`
}

// UpdateContextRequest is the body of PATCH .../contexts/{contextId}.
type UpdateContextRequest struct {
	// Cwd moves the context's kernel to this working directory (relative
	// paths resolve under /workspace; it must exist and the kernel's user
	// must be able to enter it): a running kernel changes directory
	// without a cell (no output, no execution count), a restarted one
	// starts there.
	Cwd string `json:"cwd"`
}

// CodeContext is a code context: one kernel and the state it keeps.
type CodeContext struct {
	// ID names the context ("ctx_...", "default" for Python's default
	// context, "default-<language>" for another language's).
	ID string `json:"id"`
	// Language is the kernel's language: "python", "javascript",
	// "typescript", "r", "bash" or "java".
	Language string `json:"language"`
	// Cwd is the kernel's working directory.
	Cwd string `json:"cwd"`
	// User is who the kernel runs as: "user" or "root".
	User string `json:"user"`
	// State is "starting", "idle", "busy" or "dead" (its kernel died or was
	// killed; the next call starts a new one and says so).
	State string `json:"state"`
	// CreatedAt is when the context was created (UTC).
	CreatedAt time.Time `json:"createdAt"`
	// Restarts counts the kernels this context lost (each time, its
	// variables were lost with it).
	Restarts int `json:"restarts"`
}

// ContextList is the body of GET .../contexts.
type ContextList struct {
	Contexts []CodeContext `json:"contexts"`
}

// RunCodeRequest is the body of POST .../code.
type RunCodeRequest struct {
	// Code is the cell to run, in the context's language (Python: IPython
	// magics and `!cmd` work; Bash: a shell script; JavaScript and
	// TypeScript: Deno, top-level await; R).
	Code string `json:"code"`
	// ContextID names the context (POST .../contexts). Empty: the default
	// context of Language ("default" for Python, "default-<language>" for
	// the others), created on first use.
	ContextID string `json:"contextId,omitempty"`
	// Language is "python" (default), "javascript" ("js"), "typescript"
	// ("ts"), "r", "bash" or "java". With a ContextID it must match the
	// context's, or be empty.
	Language string `json:"language,omitempty"`
	// TimeoutSeconds interrupts the code (SIGINT, as Ctrl-C in a notebook)
	// after this many seconds, keeping the context and its variables; a
	// kernel that does not stop within 2 s is restarted and its state is
	// lost. 0: DefaultCodeTimeoutSeconds.
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
	// Env is set in the kernel's os.environ for this call only, and the
	// previous values are put back after it.
	Env map[string]string `json:"env,omitempty"`
}

// Execution is what running code produced, in the kernel's order within
// each list.
type Execution struct {
	// ContextID is the context the code ran in.
	ContextID string `json:"contextId"`
	// Results are the rich outputs: the cell's value (IsMainResult) and
	// whatever it displayed (display(), a figure left open or shown).
	Results []ExecutionResult `json:"results"`
	// Logs are stdout and stderr, one entry per chunk the kernel sent.
	Logs ExecutionLogs `json:"logs"`
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
	// LogsTruncated says a stream went over the server's cap (1 MiB each)
	// and its middle was left out; ResultsTruncated that the results went
	// over theirs (32 MiB together).
	LogsTruncated    bool `json:"logsTruncated,omitempty"`
	ResultsTruncated bool `json:"resultsTruncated,omitempty"`
	// DurationMs is the wall time of the call in milliseconds, kernel start
	// included.
	DurationMs int64 `json:"durationMs"`
}

// Text is the text/plain of the main result (the cell's value), "" if the
// cell had none.
func (e *Execution) Text() string {
	for _, r := range e.Results {
		if r.IsMainResult {
			return r.Text()
		}
	}
	return ""
}

// Stdout is the stdout chunks joined.
func (e *Execution) Stdout() string { return strings.Join(e.Logs.Stdout, "") }

// Stderr is the stderr chunks joined.
func (e *Execution) Stderr() string { return strings.Join(e.Logs.Stderr, "") }

// ExecutionLogs are the text a cell printed, chunk by chunk.
type ExecutionLogs struct {
	Stdout []string `json:"stdout"`
	Stderr []string `json:"stderr"`
}

// ExecutionResult is one rich output: a MIME bundle.
type ExecutionResult struct {
	// Data maps a MIME type to the output in that type: text types
	// ("text/plain", "text/html", "text/markdown", "image/svg+xml",
	// "text/latex") as strings, images ("image/png", "image/jpeg") as
	// base64 strings, "application/json" as JSON.
	Data map[string]json.RawMessage `json:"data"`
	// Metadata is the kernel's metadata of the output (image sizes...).
	Metadata map[string]json.RawMessage `json:"metadata,omitempty"`
	// IsMainResult marks the value of the cell's last expression (Out[N]).
	IsMainResult bool `json:"isMainResult"`
	// Chart is the data of a matplotlib figure the result shows (beside
	// its image in Data): its type, title, axes and the values plotted,
	// for programs and models to read. Nil for anything else, and for a
	// figure whose chart could not be read.
	Chart *Chart `json:"chart,omitempty"`
}

// MIME types the Python kernels of Runtime's sandboxes add to a result:
// ChartMIME carries a matplotlib figure's Chart from the kernel to the
// agent, which moves it into ExecutionResult.Chart (it never reaches a
// client under Data); DataFrameMIME is a pandas DataFrame's columns in
// ExecutionResult.Data, {"column": [value, ...]}, each value a number,
// string, boolean, ISO 8601 time or null (missing), left out for a frame
// of more than 100,000 cells.
const (
	ChartMIME     = "application/vnd.withruntime.chart+json"
	DataFrameMIME = "application/vnd.withruntime.dataframe+json"
)

// MaxChartPoints is the most points one Chart carries, all its series
// together: past it each series is thinned evenly (its first and last
// points kept) and Chart.Truncated is set.
const MaxChartPoints = 10000

// Chart is what a matplotlib figure plots, read from the figure itself
// (E2B's code interpreter's chart types): one chart per figure, or a
// "superchart" of one chart per axes that holds data.
type Chart struct {
	// Type is "line", "scatter", "bar", "pie", "box_and_whisker",
	// "superchart" (a figure of several charts, in Charts) or "unknown"
	// (axes whose artists are none of these, or a mix: title and axes
	// only).
	Type string `json:"type"`
	// Title is the axes' title (a superchart's: the figure's suptitle).
	Title string `json:"title,omitempty"`
	// XLabel and YLabel are the axis labels; XUnit and YUnit the unit
	// in them ("Time (s)" or "Time [s]": "s"). A bar or box chart's x
	// axis is always the one of its categories, drawn horizontally or not.
	XLabel string `json:"xLabel,omitempty"`
	YLabel string `json:"yLabel,omitempty"`
	XUnit  string `json:"xUnit,omitempty"`
	YUnit  string `json:"yUnit,omitempty"`
	// XScale and YScale (line, scatter, unknown) are "linear", "log",
	// "symlog", "logit", "datetime" (ticks and points are ISO 8601
	// strings) or "categorical" (points name their category), or another
	// scale's name.
	XScale string `json:"xScale,omitempty"`
	YScale string `json:"yScale,omitempty"`
	// XTicks and YTicks are the major ticks inside the view (numbers, or
	// ISO 8601 strings on a datetime axis); XTickLabels and YTickLabels
	// their labels as drawn.
	XTicks      []json.RawMessage `json:"xTicks,omitempty"`
	XTickLabels []string          `json:"xTickLabels,omitempty"`
	YTicks      []json.RawMessage `json:"yTicks,omitempty"`
	YTickLabels []string          `json:"yTickLabels,omitempty"`
	// Elements are the values plotted, in drawing order: a series of
	// points per line or scatter collection, a bar per bar (with its
	// group), a slice per pie wedge, a box per box. Empty for "unknown"
	// and "superchart".
	Elements []ChartElement `json:"elements"`
	// Charts are a superchart's charts, one per axes, in the figure's
	// order.
	Charts []Chart `json:"charts,omitempty"`
	// Truncated says the series held more than MaxChartPoints points
	// and were thinned.
	Truncated bool `json:"truncated,omitempty"`
}

// ChartElement is one thing a Chart plots; which fields it has depends on
// the chart's type.
type ChartElement struct {
	// Label is the series' legend label ("Line N", "Series N" when it
	// has none), a bar's or box's category (its tick label, or its
	// position as a number), a wedge's label.
	Label string `json:"label"`
	// Points (line, scatter) are [x, y] pairs, each coordinate a number,
	// a string (a category, or an ISO 8601 time) or null (missing).
	Points [][]json.RawMessage `json:"points,omitempty"`
	// Group (bar) is the bar's series: its legend label, or "Group N".
	Group string `json:"group,omitempty"`
	// Value (bar) is the bar's length.
	Value *float64 `json:"value,omitempty"`
	// Angle (pie) is the wedge's angle in degrees; Radius its radius.
	Angle  *float64 `json:"angle,omitempty"`
	Radius *float64 `json:"radius,omitempty"`
	// Min, FirstQuartile, Median, ThirdQuartile and Max (box_and_whisker)
	// are read from the box as drawn: whisker ends, box edges and median
	// line; Outliers are the fliers beyond the whiskers.
	Min           *float64  `json:"min,omitempty"`
	FirstQuartile *float64  `json:"firstQuartile,omitempty"`
	Median        *float64  `json:"median,omitempty"`
	ThirdQuartile *float64  `json:"thirdQuartile,omitempty"`
	Max           *float64  `json:"max,omitempty"`
	Outliers      []float64 `json:"outliers,omitempty"`
}

// String is the MIME type's text ("" if absent or not a string).
func (r ExecutionResult) String(mime string) string {
	var s string
	if raw, ok := r.Data[mime]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// Text is the text/plain representation.
func (r ExecutionResult) Text() string { return r.String("text/plain") }

// HTML is the text/html representation.
func (r ExecutionResult) HTML() string { return r.String("text/html") }

// Markdown is the text/markdown representation.
func (r ExecutionResult) Markdown() string { return r.String("text/markdown") }

// SVG is the image/svg+xml representation.
func (r ExecutionResult) SVG() string { return r.String("image/svg+xml") }

// PNG is the image/png representation, decoded (nil if absent or not
// base64).
func (r ExecutionResult) PNG() []byte { return r.image("image/png") }

// JPEG is the image/jpeg representation, decoded.
func (r ExecutionResult) JPEG() []byte { return r.image("image/jpeg") }

func (r ExecutionResult) image(mime string) []byte {
	s := strings.Map(func(c rune) rune {
		if c == '\n' || c == '\r' || c == ' ' {
			return -1
		}
		return c
	}, r.String(mime))
	if s == "" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

// JSON is the application/json representation, raw.
func (r ExecutionResult) JSON() json.RawMessage { return r.Data["application/json"] }

// Formats lists the result's MIME types.
func (r ExecutionResult) Formats() []string {
	out := make([]string, 0, len(r.Data))
	for k := range r.Data {
		out = append(out, k)
	}
	return out
}

// ExecutionError is an exception the code raised, or why the call failed.
// It is an error: "NAME: VALUE".
type ExecutionError struct {
	// Name is the exception class ("ZeroDivisionError"), or one of
	// "TimeoutError" (the timeout interrupted the code), "OutOfMemoryError"
	// (the kernel was killed for memory), "KernelDied".
	Name string `json:"name"`
	// Value is the exception's message.
	Value string `json:"value"`
	// Traceback is the formatted traceback, plain text (no ANSI colours).
	Traceback string `json:"traceback"`
}

func (e *ExecutionError) Error() string { return e.Name + ": " + e.Value }

// CodeEvent is one line of an NDJSON POST .../code stream. Events come in
// the order the kernel sent them: "start", then "stdout", "stderr",
// "result", "error" as they happen, then "end".
type CodeEvent struct {
	// Type is "start", "stdout", "stderr", "result", "error", "end" or
	// "heartbeat" (EventHeartbeat; skip it).
	Type string `json:"type"`
	// ContextID is set on start.
	ContextID string `json:"contextId,omitempty"`
	// Text is the chunk (stdout, stderr).
	Text string `json:"text,omitempty"`
	// Result is set on result events.
	Result *ExecutionResult `json:"result,omitempty"`
	// Error is set on error events.
	Error *ExecutionError `json:"error,omitempty"`
	// Execution ends the stream (end): everything but results and logs
	// (empty there: they went out as events). An Error is also sent as an
	// error event before it (a timeout's or a lost kernel's just before
	// end).
	Execution *Execution `json:"execution,omitempty"`
}
