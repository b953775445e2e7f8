package agentapi

import "withruntime.dev/runtime/sdk/go/wire"

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
//	PATCH  /contexts/{contextId} UpdateContextRequest -> 200 Context (its kernel moved)
//	POST   /code             RunCodeRequest       -> 200 Execution, or an NDJSON stream of
//	                                                 CodeEvent when Accept: application/x-ndjson

// Defaults and limits of the code interpreter.
const (
	// DefaultContextID names the context a RunCodeRequest without a
	// ContextID runs in; it is created on first use.
	DefaultContextID = wire.DefaultContextID
	// LanguagePython is the default language (wire lists the others).
	LanguagePython = wire.LanguagePython
	// DefaultCodeTimeoutSeconds applies when a RunCodeRequest sets none.
	DefaultCodeTimeoutSeconds = wire.DefaultCodeTimeoutSeconds
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

// The code interpreter's public bodies are package wire's.
type (
	CreateContextRequest = wire.CreateContextRequest
	// UpdateContextRequest is the body of PATCH /contexts/{id}.
	UpdateContextRequest = wire.UpdateContextRequest
	Context              = wire.CodeContext
	ContextList          = wire.ContextList
	RunCodeRequest       = wire.RunCodeRequest
	Execution            = wire.Execution
	Logs                 = wire.ExecutionLogs
	Result               = wire.ExecutionResult
	ExecutionError       = wire.ExecutionError
	CodeEvent            = wire.CodeEvent
)

// InterruptGraceSeconds is how long a kernel has to stop after the
// interrupt of a timeout before it is killed and restarted.
const InterruptGraceSeconds = 2
