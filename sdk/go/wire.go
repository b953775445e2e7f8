package withruntime

import "withruntime.dev/runtime/sdk/go/wire"

// The JSON bodies of Runtime's HTTP API live in package wire
// (withruntime.dev/runtime/sdk/go/wire), the one Go copy of
// api/openapi.yaml's schemas, which the server imports too. The names
// below are this package's names for them: each is the wire type itself
// (an alias), so values move between the two packages without conversion.

// Defaults and limits of the exec contract (see package wire).
const (
	// Workspace is where relative paths and commands without a cwd start.
	Workspace = wire.Workspace
	// DefaultExecTimeoutSeconds applies when an ExecRequest sets no timeout.
	DefaultExecTimeoutSeconds = wire.DefaultExecTimeoutSeconds
	// DefaultMaxOutputBytes caps each of stdout and stderr in a collected
	// ExecResult (1 MiB) unless ExecRequest.MaxOutputBytes says otherwise.
	// Streams (ExecStream) are not capped.
	DefaultMaxOutputBytes = wire.DefaultMaxOutputBytes
	// MaxMaxOutputBytes is the largest cap a request may ask for (16 MiB).
	MaxMaxOutputBytes = wire.MaxMaxOutputBytes
	// TimeoutExitCode is the exit code of a command killed by its timeout,
	// as coreutils timeout(1) reports it.
	TimeoutExitCode = wire.TimeoutExitCode
	// DefaultCodeTimeoutSeconds applies to RunCode when no timeout is given.
	DefaultCodeTimeoutSeconds = wire.DefaultCodeTimeoutSeconds
	// MaxChartPoints is the most points a Chart carries (past it the
	// series are thinned and Chart.Truncated is set).
	MaxChartPoints = wire.MaxChartPoints
	// DataFrameMIME is the MIME type of a pandas DataFrame's columns in a
	// Result's Data, {"column": [value, ...]}.
	DataFrameMIME = wire.DataFrameMIME
	// DefaultListLimit is a listing page's entry count when
	// ListOptions.Limit is 0.
	DefaultListLimit = wire.ListDefaultLimit
	// MaxListLimit is the largest ListOptions.Limit.
	MaxListLimit = wire.ListMaxLimit
)

// contentTypeNDJSON asks for a stream of events, one JSON object a line.
const contentTypeNDJSON = wire.ContentTypeNDJSON

// eventHeartbeat is the type of the line {"type":"heartbeat"} that every
// stream of the server carries after 2 s without another line; the SDK
// skips it (it only says the server is alive).
const eventHeartbeat = wire.EventHeartbeat

// Sandboxes.
type (
	// CreateSandboxRequest is the body of POST /v1/sandboxes; Create builds
	// it from Options.
	CreateSandboxRequest = wire.CreateSandboxRequest
	// SandboxInfo is a sandbox's record as the server returns it.
	SandboxInfo = wire.Sandbox
	// SandboxList is the body of GET /v1/sandboxes.
	SandboxList = wire.SandboxList
	// SandboxWithResult is the answer to a create with a first command
	// (Client.CreateAndExec, Client.RunOnce).
	SandboxWithResult = wire.SandboxWithResult
	// PauseRequest is the body of POST /v1/sandboxes/{id}/pause.
	PauseRequest = wire.PauseRequest
	// SetTimeoutRequest is the body of POST /v1/sandboxes/{id}/timeout.
	SetTimeoutRequest = wire.SetTimeoutRequest
	// ResumeRequest is the body of POST /v1/sandboxes/{id}/resume.
	ResumeRequest = wire.ResumeRequest
	// NetworkPolicy is a sandbox's network (Options.Network,
	// Sandbox.SetNetwork).
	NetworkPolicy = wire.NetworkPolicy
	// CreateSecretRequest is the body of POST /v1/secrets
	// (Client.SetSecret).
	CreateSecretRequest = wire.CreateSecretRequest
	// SecretInfo is a stored secret as listed: never its value.
	SecretInfo = wire.Secret
	// SecretList is the body of GET /v1/secrets.
	SecretList = wire.SecretList
)

// Commands and files.
type (
	// ExecRequest runs one command. Set exactly one of Command and Argv.
	ExecRequest = wire.ExecRequest
	// Event is one event of an exec stream (ExecStream).
	Event = wire.Event
	// ExecResult is how a command ended and what it printed. A non-zero
	// ExitCode is a result, not an error: Exec returns it with a nil error.
	ExecResult = wire.ExecResult
	// FileInfo describes one file or directory in a sandbox.
	FileInfo = wire.FileInfo
	// FileList is one page of a listing (Files.ListPage).
	FileList = wire.FileList
	// MkdirRequest is the body of POST .../files/mkdir.
	MkdirRequest = wire.MkdirRequest
	// RenameRequest is the body of POST .../files/rename.
	RenameRequest = wire.RenameRequest
)

// The code interpreter.
type (
	// CreateContextRequest is the body of POST .../contexts.
	CreateContextRequest = wire.CreateContextRequest
	// CodeContext is a context: one kernel and the state it keeps.
	CodeContext = wire.CodeContext
	// ContextList is the body of GET .../contexts.
	ContextList = wire.ContextList
	// RunCodeRequest is the body of POST .../code.
	RunCodeRequest = wire.RunCodeRequest
	// Execution is what a cell produced.
	Execution = wire.Execution
	// Logs are the text a cell printed.
	Logs = wire.ExecutionLogs
	// Result is one rich output, a MIME bundle.
	Result = wire.ExecutionResult
	// FileURLRequest is the body of POST .../files/url (Sandbox.FileURL).
	FileURLRequest = wire.FileURLRequest
	// FileURL is a signed file URL.
	FileURL = wire.FileURL
	// SandboxMetrics is the body of GET /v1/sandboxes/{id}/metrics.
	SandboxMetrics = wire.SandboxMetrics
	// SandboxMetric is one sample of a sandbox's resource use.
	SandboxMetric = wire.SandboxMetric
	// Chart is what a matplotlib figure plots (Result.Chart).
	Chart = wire.Chart
	// ChartElement is one thing a Chart plots.
	ChartElement = wire.ChartElement
	// ExecutionError is an exception the code raised, or why the call
	// failed; it is an error.
	ExecutionError = wire.ExecutionError
	// CodeEvent is one line of a streamed /code answer.
	CodeEvent = wire.CodeEvent
)

// Templates, keys and usage.
type (
	// Template is a root filesystem sandboxes start from (Options.Template).
	Template = wire.Template
	// TemplateOrigin is where a template made from an image came from.
	TemplateOrigin = wire.TemplateOrigin
	// TemplateStart makes a template warm: what its sandboxes run before
	// they are handed out (DockerfileBuild.Start).
	TemplateStart = wire.TemplateStart
	// TemplateList is the body of GET /v1/templates.
	TemplateList = wire.TemplateList
	// CreateTemplateRequest is the JSON body of POST /v1/templates (see
	// Client.CreateTemplate).
	CreateTemplateRequest = wire.CreateTemplateRequest
	// TemplateEvent is one event of a template build's progress; the SDK's
	// methods return an error event as an *APIError.
	TemplateEvent = wire.TemplateEvent
	// CreateKeyRequest is the body of POST /v1/keys (see Client.CreateKey).
	CreateKeyRequest = wire.CreateKeyRequest
	// KeyInfo is an API key as the server describes it; Secret is set only
	// in CreateKey's answer (pass it to WithAPIKey).
	KeyInfo = wire.Key
	// KeyList is the body of GET /v1/keys.
	KeyList = wire.KeyList
	// UsageReport is the body of GET /v1/usage (Client.UsageReport).
	UsageReport = wire.UsageReport
	// UsageRow is the metered usage and cost of one group of sandboxes
	// (Client.Usage).
	UsageRow = wire.UsageRow
	// UsagePrices are the prices a report was computed with.
	UsagePrices = wire.UsagePrices
	// UsageTrial is a trial key's allowance of sandbox-hours.
	UsageTrial = wire.UsageTrial
)

// Errors.
type (
	// ErrorInfo is the error object of every error answer and error event.
	ErrorInfo = wire.ErrorDetail
	// ErrorBody is an error answer's body: {"error": {"code", "message"}}.
	ErrorBody = wire.Error
)
